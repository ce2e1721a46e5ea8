// concat and prefix: one producer's run after another's.

extension SignalProducer {
    /// Runs `next` after this producer completes. A failure or interruption of either ends the
    /// whole run.
    public func concat(_ next: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        SignalProducer<SignalProducer<Value, Error>, Error>([self, next]).flatten(.concat)
    }

    /// Runs `next` after this producer completes; see `concat(_:)`.
    public func concat<Next: SignalProducerConvertible>(_ next: Next) -> SignalProducer<Value, Error>
    where Next.Value == Value, Next.Error == Error {
        concat(next.producer)
    }

    /// Sends `value` after this producer completes, then completes.
    public func concat(value: Value) -> SignalProducer<Value, Error> {
        concat(SignalProducer(value: value))
    }

    /// Fails with `error` after this producer completes.
    public func concat(error: Error) -> SignalProducer<Value, Error> {
        concat(SignalProducer(error: error))
    }

    /// Runs `previous` first, then this producer.
    public func prefix(_ previous: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        previous.concat(self)
    }

    /// Runs `previous` first, then this producer.
    public func prefix<Previous: SignalProducerConvertible>(_ previous: Previous) -> SignalProducer<Value, Error>
    where Previous.Value == Value, Previous.Error == Error {
        prefix(previous.producer)
    }

    /// Sends `value` first, then this producer's events.
    public func prefix(value: Value) -> SignalProducer<Value, Error> {
        prefix(SignalProducer(value: value))
    }
}

// flatMapError: a failure replaced by the run of another producer.

extension SignalProducer {
    /// Replaces a failure with the run of the producer `transform` makes from the error.
    public func flatMapError<F>(_ transform: @escaping (Error) -> SignalProducer<Value, F>) -> SignalProducer<Value, F>
    {
        SignalProducer<Value, F>._serialized { sink, lifetime in
            let replacement = SerialDisposable()
            lifetime += replacement
            self._run(
                Signal<Value, Error>.Observer { event in
                    switch event {
                    case let .value(value): sink.send(.value(value))
                    case let .failed(error): replacement.inner = transform(error).start(sink.input)
                    case .completed: sink.send(.completed)
                    case .interrupted: sink.send(.interrupted)
                    }
                }, lifetime)
        }
    }

    /// Replaces a failure with the run of the stream `transform` makes from the error.
    public func flatMapError<Inner: SignalProducerConvertible>(
        _ transform: @escaping (Error) -> Inner
    ) -> SignalProducer<Value, Inner.Error> where Inner.Value == Value {
        flatMapError { transform($0).producer }
    }
}

extension Signal {
    /// Replaces a failure with the run of the producer `transform` makes from the error.
    public func flatMapError<F>(_ transform: @escaping (Error) -> SignalProducer<Value, F>) -> Signal<Value, F> {
        SignalProducer(self).flatMapError(transform)._startAsSignal()
    }

    /// Replaces a failure with the run of the stream `transform` makes from the error.
    public func flatMapError<Inner: SignalProducerConvertible>(
        _ transform: @escaping (Error) -> Inner
    ) -> Signal<Value, Inner.Error> where Inner.Value == Value {
        flatMapError { transform($0).producer }
    }
}

// merge: the values of several streams as one stream.

extension Signal {
    /// Forwards the values of every signal in `signals` as they arrive. Completes when all have
    /// completed; fails or interrupts as soon as one does.
    public static func merge<Seq: Sequence>(_ signals: Seq) -> Signal<Value, Error>
    where Seq.Element == Signal<Value, Error> {
        SignalProducer<Signal<Value, Error>, Error>(signals).flatten(.merge)._startAsSignal()
    }

    /// Merges the given signals; see `merge(_:)`.
    public static func merge(_ signals: Signal<Value, Error>...) -> Signal<Value, Error> {
        merge(signals)
    }

    /// Merges this signal with `other`; see `merge(_:)`.
    public func merge(with other: Signal<Value, Error>) -> Signal<Value, Error> {
        Signal.merge(self, other)
    }
}

extension SignalProducer {
    /// Runs every producer in `producers` on each start and forwards all their values.
    /// Completes when all have completed; fails or interrupts as soon as one does.
    public static func merge<Seq: Sequence>(_ producers: Seq) -> SignalProducer<Value, Error>
    where Seq.Element == SignalProducer<Value, Error> {
        SignalProducer<SignalProducer<Value, Error>, Error>(producers).flatten(.merge)
    }

    /// Merges this producer with `other`; see `merge(_:)`.
    public func merge(with other: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        SignalProducer.merge([self, other])
    }

    /// Starts the producer and returns its run as a signal: the run is interrupted when the
    /// signal is released with no observers.
    @usableFromInline
    func _startAsSignal() -> Signal<Value, Error> {
        startWithSignal { signal, _ in signal }
    }
}

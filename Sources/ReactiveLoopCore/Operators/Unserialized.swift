// unserialized and reentrantUnserialized: ReactiveSwift's escape hatches from its send lock.
//
// ReactiveSwift offers these to skip its lock (unserialized) or to allow reentrant sends
// (reentrantUnserialized), at the caller's risk. ReactiveLoop's ordinary signals already take
// no lock when uncontended and already accept reentrant sends, so these names give the
// ordinary, serialized signal: code written for ReactiveSwift keeps compiling and gets the
// stronger guarantees for free.

extension Signal {
    /// The same as `Signal.init(_:)`: ReactiveLoop's signals need no unserialized variant.
    public static func unserialized(_ generator: (Observer, Lifetime) -> Void) -> Signal<Value, Error> {
        Signal(generator)
    }

    /// The same as `Signal.init(_:)`: ReactiveLoop's signals already queue reentrant sends.
    public static func reentrantUnserialized(_ generator: (Observer, Lifetime) -> Void) -> Signal<Value, Error> {
        Signal(generator)
    }

    /// The same as `pipe(disposable:)`.
    public static func unserializedPipe(disposable: (any Disposable)? = nil) -> (output: Signal, input: Observer) {
        pipe(disposable: disposable)
    }

    /// The same as `pipe(disposable:)`: reentrant sends are queued, never deadlocked.
    public static func reentrantUnserializedPipe(disposable: (any Disposable)? = nil) -> (
        output: Signal, input: Observer
    ) {
        pipe(disposable: disposable)
    }
}

extension SignalProducer {
    /// The same as `SignalProducer.init(_:)`.
    public static func unserialized(
        _ startHandler: @escaping (Signal<Value, Error>.Observer, Lifetime) -> Void
    ) -> SignalProducer<Value, Error> {
        SignalProducer(startHandler)
    }
}

// MARK: Flattening sequences

extension Signal where Value: Sequence {
    /// Sends the elements of each sequence value, in order.
    public func flatten() -> Signal<Value.Iterator.Element, Error> {
        flatMap(.concat) { SignalProducer<Value.Iterator.Element, Error>($0) }
    }
}

extension SignalProducer where Value: Sequence {
    /// Sends the elements of each sequence value, in order.
    public func flatten() -> SignalProducer<Value.Iterator.Element, Error> {
        flatMap(.concat) { SignalProducer<Value.Iterator.Element, Error>($0) }
    }
}

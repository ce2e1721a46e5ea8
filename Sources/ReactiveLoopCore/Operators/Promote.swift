// promoteError and promoteValue: widen a stream that cannot fail, or cannot send values.

extension Signal where Error == Never {
    /// The same signal, typed as able to fail with `F` (it never does).
    public func promoteError<F>(_: F.Type = F.self) -> Signal<Value, F> {
        _promoteError(F.self)
    }

    /// The same signal (already of error type `Never`).
    public func promoteError(_: Error.Type = Error.self) -> Signal<Value, Error> {
        self
    }
}

extension Signal where Value == Never {
    /// The same signal, typed as sending values of type `U` (it never does).
    public func promoteValue<U>(_: U.Type = U.self) -> Signal<U, Error> {
        _view(_Promote.value())
    }

    /// The same signal (already of value type `Never`).
    public func promoteValue(_: Value.Type = Value.self) -> Signal<Value, Error> {
        self
    }
}

extension SignalProducer where Error == Never {
    /// The same producer, typed as able to fail with `F` (it never does).
    public func promoteError<F>(_: F.Type = F.self) -> SignalProducer<Value, F> {
        _promoteError(F.self)
    }

    /// The same producer (already of error type `Never`).
    public func promoteError(_: Error.Type = Error.self) -> SignalProducer<Value, Error> {
        self
    }
}

extension SignalProducer where Value == Never {
    /// The same producer, typed as sending values of type `U` (it never does).
    public func promoteValue<U>(_: U.Type = U.self) -> SignalProducer<U, Error> {
        let adapter: (Signal<U, Error>.Observer) -> Signal<Never, Error>.Observer = _Promote.value()
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// The same producer (already of value type `Never`).
    public func promoteValue(_: Value.Type = Value.self) -> SignalProducer<Value, Error> {
        self
    }
}

extension _Promote {
    @inlinable
    static func value<U, E>() -> (Signal<U, E>.Observer) -> Signal<Never, E>.Observer {
        { downstream in
            Signal<Never, E>.Observer { event in
                switch event {
                case let .failed(error): downstream.send(error: error)
                case .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }
}

// combinePrevious: each value paired with the one before it.

@usableFromInline
enum _CombinePrevious {
    @inlinable
    static func adapter<V, E>(_ initial: V?) -> (Signal<(V, V), E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var previous = initial  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                switch event {
                case let .value(value):
                    if let last = previous { downstream.send(value: (last, value)) }
                    previous = value
                case let .failed(error): downstream.send(error: error)
                case .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }
}

extension Signal {
    /// Sends each value paired with the one before it; the first is paired with `initial`.
    public func combinePrevious(_ initial: Value) -> Signal<(Value, Value), Error> {
        _lift(_CombinePrevious.adapter(initial))
    }

    /// Sends each value paired with the one before it, from the second value on.
    public func combinePrevious() -> Signal<(Value, Value), Error> {
        _lift(_CombinePrevious.adapter(nil))
    }
}

extension SignalProducer {
    /// Sends each value paired with the one before it; the first is paired with `initial`.
    public func combinePrevious(_ initial: Value) -> SignalProducer<(Value, Value), Error> {
        _lift(_CombinePrevious.adapter(initial))
    }

    /// Sends each value paired with the one before it, from the second value on.
    public func combinePrevious() -> SignalProducer<(Value, Value), Error> {
        _lift(_CombinePrevious.adapter(nil))
    }
}

extension PropertyProtocol {
    /// A property holding `(previous, current)`; the first previous value is `initial`.
    public func combinePrevious(_ initial: Value) -> Property<(Value, Value)> {
        Property(_unsafeProducer: producer.combinePrevious(initial))
    }
}

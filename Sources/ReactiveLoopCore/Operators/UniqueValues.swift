// uniqueValues: values whose identity was not seen before.

@usableFromInline
enum _UniqueValues {
    @inlinable
    static func adapter<V, E, Identity: Hashable>(
        _ identity: @escaping (V) -> Identity
    ) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var seen = Set<Identity>()  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                if case let .value(value) = event, !seen.insert(identity(value)).inserted { return }
                downstream.send(event)
            }
        }
    }
}

extension Signal {
    /// Forwards only values whose identity, as `transform` gives it, was not seen before.
    ///
    /// - Complexity: Keeps every identity seen, for the life of the signal.
    public func uniqueValues<Identity: Hashable>(_ transform: @escaping (Value) -> Identity) -> Signal<Value, Error> {
        _lift(_UniqueValues.adapter(transform))
    }
}

extension Signal where Value: Hashable {
    /// Forwards only values that were not seen before.
    public func uniqueValues() -> Signal<Value, Error> {
        uniqueValues { $0 }
    }
}

extension SignalProducer {
    /// Forwards only values whose identity was not seen before in the run.
    public func uniqueValues<Identity: Hashable>(_ transform: @escaping (Value) -> Identity) -> SignalProducer<
        Value, Error
    > {
        _lift(_UniqueValues.adapter(transform))
    }
}

extension SignalProducer where Value: Hashable {
    /// Forwards only values that were not seen before in the run.
    public func uniqueValues() -> SignalProducer<Value, Error> {
        uniqueValues { $0 }
    }
}

extension PropertyProtocol {
    /// A property that ignores values whose identity it has held before.
    public func uniqueValues<Identity: Hashable>(_ transform: @escaping (Value) -> Identity) -> Property<Value> {
        Property(_unsafeProducer: producer.uniqueValues(transform))
    }
}

extension PropertyProtocol where Value: Hashable {
    /// A property that ignores values it has held before.
    public func uniqueValues() -> Property<Value> {
        uniqueValues { $0 }
    }
}

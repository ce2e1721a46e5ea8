// skip(while:), take(while:), take(until:) with a predicate, combinePrevious, uniqueValues.

@usableFromInline
enum _Predicate {
    @inlinable
    static func skipWhile<V, E>(_ shouldContinue: @escaping (V) -> Bool) -> (Signal<V, E>.Observer, Lifetime) ->
        Signal<V, E>.Observer
    {
        { downstream, _ in
            var skipping = true  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                if skipping, case let .value(value) = event {
                    guard !shouldContinue(value) else { return }
                    skipping = false
                }
                downstream.send(event)
            }
        }
    }

    /// Forwards values while `shouldForward(value)` holds; `inclusive` decides whether the
    /// value that ends it is forwarded before completing.
    @inlinable
    static func takeWhile<V, E>(
        inclusive: Bool, _ shouldContinue: @escaping (V) -> Bool
    ) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var done = false  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                guard !done else { return }
                if case let .value(value) = event, !shouldContinue(value) {
                    done = true
                    if inclusive { downstream.send(event) }
                    return downstream.sendCompleted()
                }
                if event.isTerminating { done = true }
                downstream.send(event)
            }
        }
    }

    @inlinable
    static func combinePrevious<V, E>(_ initial: V?) -> (Signal<(V, V), E>.Observer, Lifetime) -> Signal<V, E>.Observer
    {
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

    @inlinable
    static func unique<V, E, Identity: Hashable>(
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
    /// Drops values while `shouldContinue` returns `true`; from the first value for which it
    /// returns `false` (included), forwards everything.
    public func skip(while shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Predicate.skipWhile(shouldContinue))
    }

    /// Forwards values while `shouldContinue` returns `true`; at the first `false` completes,
    /// without that value.
    public func take(while shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Predicate.takeWhile(inclusive: false, shouldContinue))
    }

    /// Forwards values until `shouldContinue` returns `false`; that value is forwarded, then
    /// the signal completes.
    public func take(until shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Predicate.takeWhile(inclusive: true, shouldContinue))
    }

    /// Sends each value paired with the one before it; the first is paired with `initial`.
    public func combinePrevious(_ initial: Value) -> Signal<(Value, Value), Error> {
        _lift(_Predicate.combinePrevious(initial))
    }

    /// Sends each value paired with the one before it, from the second value on.
    public func combinePrevious() -> Signal<(Value, Value), Error> {
        _lift(_Predicate.combinePrevious(nil))
    }

    /// Forwards only values whose identity, as `transform` gives it, was not seen before.
    ///
    /// - Complexity: Keeps every identity seen, for the life of the signal.
    public func uniqueValues<Identity: Hashable>(_ transform: @escaping (Value) -> Identity) -> Signal<Value, Error> {
        _lift(_Predicate.unique(transform))
    }
}

extension Signal where Value: Hashable {
    /// Forwards only values that were not seen before.
    public func uniqueValues() -> Signal<Value, Error> {
        uniqueValues { $0 }
    }
}

extension SignalProducer {
    /// Drops values while `shouldContinue` returns `true`; see `Signal.skip(while:)`.
    public func skip(while shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Predicate.skipWhile(shouldContinue))
    }

    /// Forwards values while `shouldContinue` returns `true`; see `Signal.take(while:)`.
    public func take(while shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Predicate.takeWhile(inclusive: false, shouldContinue))
    }

    /// Forwards values until `shouldContinue` returns `false`, that value included.
    public func take(until shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Predicate.takeWhile(inclusive: true, shouldContinue))
    }

    /// Sends each value paired with the one before it; the first is paired with `initial`.
    public func combinePrevious(_ initial: Value) -> SignalProducer<(Value, Value), Error> {
        _lift(_Predicate.combinePrevious(initial))
    }

    /// Sends each value paired with the one before it, from the second value on.
    public func combinePrevious() -> SignalProducer<(Value, Value), Error> {
        _lift(_Predicate.combinePrevious(nil))
    }

    /// Forwards only values whose identity was not seen before in the run.
    public func uniqueValues<Identity: Hashable>(_ transform: @escaping (Value) -> Identity) -> SignalProducer<
        Value, Error
    > {
        _lift(_Predicate.unique(transform))
    }
}

extension SignalProducer where Value: Hashable {
    /// Forwards only values that were not seen before in the run.
    public func uniqueValues() -> SignalProducer<Value, Error> {
        uniqueValues { $0 }
    }
}

extension PropertyProtocol {
    /// A property holding `(previous, current)`; the first previous value is `initial`.
    public func combinePrevious(_ initial: Value) -> Property<(Value, Value)> {
        Property(_unsafeProducer: producer.combinePrevious(initial))
    }

    /// A property that takes a value from this one only if it satisfies `predicate`; starts
    /// with `initial` if the current value does not.
    public func filter(initial: Value, _ predicate: @escaping (Value) -> Bool) -> Property<Value> {
        Property(_unsafeProducer: producer.filter(predicate).prefix(value: initial))
    }

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

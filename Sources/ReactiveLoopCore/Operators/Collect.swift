// collect: values gathered into arrays.

@usableFromInline
enum _Collect {
    /// Gathers values; `step` appends the latest value and returns an array to send, if any.
    /// On completion the remainder is sent, or an empty array if no value ever arrived.
    @inlinable
    static func adapter<V, E>(
        _ step: @escaping (_ collected: inout [V], _ latest: V) -> [V]?
    ) -> (Signal<[V], E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var collected: [V] = []  // Confined to the serial delivery of one run.
            var receivedAny = false
            return Signal<V, E>.Observer { event in
                switch event {
                case let .value(value):
                    receivedAny = true
                    if let outgoing = step(&collected, value) { downstream.send(value: outgoing) }
                case let .failed(error):
                    downstream.send(error: error)
                case .completed:
                    if !collected.isEmpty || !receivedAny { downstream.send(value: collected) }
                    downstream.sendCompleted()
                case .interrupted:
                    downstream.sendInterrupted()
                }
            }
        }
    }

    @inlinable
    static func whenCollected<V>(_ shouldEmit: @escaping ([V]) -> Bool) -> (inout [V], V) -> [V]? {
        { collected, latest in
            collected.append(latest)
            guard shouldEmit(collected) else { return nil }
            defer { collected.removeAll(keepingCapacity: true) }
            return collected
        }
    }

    @inlinable
    static func beforeLatest<V>(_ shouldEmit: @escaping ([V], V) -> Bool) -> (inout [V], V) -> [V]? {
        { collected, latest in
            guard shouldEmit(collected, latest) else {
                collected.append(latest)
                return nil
            }
            defer { collected = [latest] }
            return collected
        }
    }
}

extension Signal {
    /// Sends one array of every value when the signal completes (an empty array if there were
    /// none). A failure or interruption sends nothing.
    public func collect() -> Signal<[Value], Error> {
        collect { _ in false }
    }

    /// Sends arrays of `count` values; on completion, the remaining values if any (or an empty
    /// array if no value ever arrived).
    ///
    /// - Precondition: `count > 0`.
    public func collect(count: Int) -> Signal<[Value], Error> {
        _require(count > 0, "collect(count:): count must be > 0, got \(count)")
        return collect { $0.count == count }
    }

    /// Sends the gathered values whenever `shouldEmit`, given them with the latest appended,
    /// returns `true`; the remainder on completion.
    public func collect(_ shouldEmit: @escaping (_ collectedValues: [Value]) -> Bool) -> Signal<[Value], Error> {
        _lift(_Collect.adapter(_Collect.whenCollected(shouldEmit)))
    }

    /// Sends the gathered values, without the latest, whenever `shouldEmit` returns `true`
    /// for them and the latest value; the latest value starts the next array.
    public func collect(
        _ shouldEmit: @escaping (_ collected: [Value], _ latest: Value) -> Bool
    ) -> Signal<[Value], Error> {
        _lift(_Collect.adapter(_Collect.beforeLatest(shouldEmit)))
    }
}

extension SignalProducer {
    /// Sends one array of every value on completion; see `Signal.collect()`.
    public func collect() -> SignalProducer<[Value], Error> {
        collect { _ in false }
    }

    /// Sends arrays of `count` values; see `Signal.collect(count:)`.
    ///
    /// - Precondition: `count > 0`.
    public func collect(count: Int) -> SignalProducer<[Value], Error> {
        _require(count > 0, "collect(count:): count must be > 0, got \(count)")
        return collect { $0.count == count }
    }

    /// Sends the gathered values whenever `shouldEmit` returns `true`; see `Signal.collect(_:)`.
    public func collect(_ shouldEmit: @escaping (_ collectedValues: [Value]) -> Bool) -> SignalProducer<[Value], Error>
    {
        _lift(_Collect.adapter(_Collect.whenCollected(shouldEmit)))
    }

    /// Sends the gathered values before the latest when `shouldEmit` says so.
    public func collect(
        _ shouldEmit: @escaping (_ collected: [Value], _ latest: Value) -> Bool
    ) -> SignalProducer<[Value], Error> {
        _lift(_Collect.adapter(_Collect.beforeLatest(shouldEmit)))
    }
}

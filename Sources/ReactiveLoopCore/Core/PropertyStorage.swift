/// A value and the signal of its changes, updated so that observers see changes in exactly the
/// order they were made.
///
/// A change takes the signal core's delivery ownership, stores the value, and delivers it
/// before giving ownership back; a change made from inside a delivery (on the delivering
/// thread) stores at once, so reads see it, and is delivered right after the current delivery.
///
/// The storage holds the core, not a `Signal` handle: whoever owns the property holds the
/// handle, so that the run feeding a derived property can hold its storage strongly (no weak
/// load per change) without keeping the streams alive.
@usableFromInline
final class _PropertyStorage<Value> {
    @usableFromInline let core: _SignalCore<Value, Never>
    @usableFromInline let lock = _Lock.make()
    // Protected by lock; changed only by the owner of core's delivery.
    @usableFromInline var current: Value

    @usableFromInline
    init(_ initial: Value, core: _SignalCore<Value, Never> = _SignalCore()) {
        current = initial
        self.core = core
    }

    @inlinable
    var value: Value { lock.withLock { current } }

    @inlinable
    func set(_ newValue: Value) {
        let owned = core.beginExclusive()
        lock.withLock { current = newValue }
        core.endExclusive(delivering: .value(newValue), owned: owned)
    }

    @inlinable
    func swap(_ newValue: Value) -> Value {
        let owned = core.beginExclusive()
        let old: Value = lock.withLock {
            defer { current = newValue }
            return current
        }
        core.endExclusive(delivering: .value(newValue), owned: owned)
        return old
    }

    @inlinable
    func modify<Result>(_ action: (inout Value) throws -> Result) rethrows -> Result {
        let owned = core.beginExclusive()
        var event: Signal<Value, Never>.Event?
        defer { core.endExclusive(delivering: event, owned: owned) }
        lock.lock()
        defer { lock.unlock() }
        let result = try action(&current)
        event = .value(current)
        return result
    }

    @inlinable
    func withValue<Result>(_ action: (Value) throws -> Result) rethrows -> Result {
        let owned = core.beginExclusive()
        defer { core.endExclusive(delivering: nil, owned: owned) }
        return try action(value)
    }

    func complete() { core.send(.completed) }

    /// The current value, then every change, with nothing lost or repeated in between: the
    /// value is read and the observer registered under delivery ownership.
    ///
    /// Started from inside a delivery of this property, after a reentrant change, the current
    /// value already includes the changes still queued for delivery; the core registers the
    /// new observer behind them, so it sees the newest value once, not twice.
    ///
    /// - Parameter signal: The property's signal handle, which the producer keeps alive so that
    ///   the streams outlive the property object for as long as the producer is held.
    @usableFromInline
    func producer(keeping signal: Signal<Value, Never>) -> SignalProducer<Value, Never> {
        SignalProducer { [self, signal] observer, lifetime in
            _ = signal
            let owned = core.beginExclusive()
            observer.send(value: value)
            lifetime += core.observe(observer, ifTerminated: .completed)
            core.endExclusive(delivering: nil, owned: owned)
        }
    }
}

extension _PropertyStorage: @unchecked Sendable {}  // See the type's documentation.

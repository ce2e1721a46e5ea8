#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

/// debounce: a value is sent once `interval` has passed without a newer one. Per input: one
/// clock read and a store; at most one timer is pending, re-armed only if values kept coming.
@usableFromInline
// Vars: see below.
final class _DebounceState<Value, Error: Swift.Error>: _TimedState<Value, Error>, @unchecked Sendable {
    @usableFromInline let discardWhenCompleted: Bool
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var pending: Value?
    // Confined to the owner of the sink's delivery. When the pending value arrived, on `clock`.
    @exclusivity(unchecked) @usableFromInline var lastUpdated = -TimeInterval.greatestFiniteMagnitude
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var armed = false

    @usableFromInline
    init(
        interval: TimeInterval, clock: _SchedulerClock, discardWhenCompleted: Bool,
        sink: _SerialSink<Value, Error>, lifetime: Lifetime
    ) {
        self.discardWhenCompleted = discardWhenCompleted
        super.init(interval: interval, clock: clock, sink: sink, lifetime: lifetime)
    }

    /// The operator for one run: builds the state and returns the observer of the input.
    @inlinable
    static func adapter(
        _ interval: TimeInterval, _ scheduler: any DateScheduler, _ discardWhenCompleted: Bool
    ) -> (_SerialSink<Value, Error>, Lifetime) -> Signal<Value, Error>.Observer {
        // Once per application of the operator, not per run: it looks up a conformance.
        let clock = _SchedulerClock(scheduler)
        return { sink, lifetime in
            Signal.Observer(
                _DebounceState(
                    interval: interval, clock: clock, discardWhenCompleted: discardWhenCompleted, sink: sink,
                    lifetime: lifetime
                ).receive)
        }
    }

    @inlinable
    func receive(_ event: Signal<Value, Error>.Event) {
        switch event {
        case let .value(value):
            let now = clock.now
            var arm = false
            sink.send {
                pending = value
                lastUpdated = now
                if !armed {
                    armed = true
                    arm = true
                }
                return nil
            }
            if arm { timer.inner = clock.schedule(at: now + interval) { [self] in fire() } }
        case .completed:
            timer.dispose()
            var last: (value: Value, due: TimeInterval)?
            sink.send {
                if !discardWhenCompleted, let value = pending {
                    last = (value, lastUpdated + interval)
                }
                pending = nil
                return nil
            }
            if let last {
                clock.schedule(at: last.due) { [sink] in
                    sink.send(.value(last.value))
                    sink.send(.completed)
                }
            } else {
                scheduler.schedule { [sink] in sink.send(.completed) }
            }
        case .failed, .interrupted:
            timer.dispose()
            scheduler.schedule { [sink] in sink.send(event) }
        }
    }

    @usableFromInline
    func fire() {
        let now = clock.now
        var rearm: TimeInterval?
        sink.send {
            let due = lastUpdated + interval
            guard due <= now else {
                rearm = due
                return nil
            }
            armed = false
            defer { pending = nil }
            return pending.map { .value($0) }
        }
        if let rearm { timer.inner = clock.schedule(at: rearm) { [self] in fire() } }
    }
}

extension Signal {
    /// Sends a value on `scheduler` once `interval` seconds have passed without a newer value.
    ///
    /// - Parameters:
    ///   - discardWhenCompleted: If `false`, a value still waiting when the signal completes
    ///     is sent when its interval ends, then the completion; if `true` (the default), it is
    ///     dropped and the completion is delivered at once. Failure and interruption are
    ///     delivered at once and drop it.
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func debounce(
        _ interval: TimeInterval, on scheduler: any DateScheduler, discardWhenCompleted: Bool = true
    ) -> Signal<Value, Error> {
        _checkInterval(interval, "debounce(_:on:discardWhenCompleted:)")
        return _timed(_DebounceState.adapter(interval, scheduler, discardWhenCompleted))
    }
}

extension SignalProducer {
    /// Sends a value once `interval` seconds have passed without a newer value; see
    /// `Signal.debounce(_:on:discardWhenCompleted:)`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func debounce(
        _ interval: TimeInterval, on scheduler: any DateScheduler, discardWhenCompleted: Bool = true
    ) -> SignalProducer<Value, Error> {
        _checkInterval(interval, "debounce(_:on:discardWhenCompleted:)")
        return _timed(hopping: scheduler, _DebounceState.adapter(interval, scheduler, discardWhenCompleted))
    }
}

#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

/// throttle: at most one value per `interval`, the latest one. Per input it only stores the
/// value: no clock read and no timer, except when a quiet stream wakes up (one immediate send)
/// and once per interval while values keep coming (one timer).
@usableFromInline
// Vars: see below.
final class _ThrottleState<Value, Error: Swift.Error>: _TimedState<Value, Error>, @unchecked Sendable {
    // Confined to the owner of the sink's delivery. A value waits for the window to end.
    @exclusivity(unchecked) @usableFromInline var pending: Value?
    // Confined to the owner of the sink's delivery. True from a send until `interval` later.
    @exclusivity(unchecked) @usableFromInline var windowOpen = false

    /// The operator for one run: builds the state and returns the observer of the input.
    @inlinable
    static func adapter(
        _ interval: TimeInterval, _ scheduler: any DateScheduler
    ) -> (_SerialSink<Value, Error>, Lifetime) -> Signal<Value, Error>.Observer {
        // Once per application of the operator, not per run: it looks up a conformance.
        let clock = _SchedulerClock(scheduler)
        return { sink, lifetime in
            Signal.Observer(_ThrottleState(interval: interval, clock: clock, sink: sink, lifetime: lifetime).receive)
        }
    }

    @inlinable
    func receive(_ event: Signal<Value, Error>.Event) {
        guard case let .value(value) = event else {
            timer.dispose()
            scheduler.schedule { [sink] in sink.send(event) }
            return
        }
        var sendNow = false
        sink.send {
            pending = value
            if !windowOpen {
                windowOpen = true
                sendNow = true
            }
            return nil
        }
        if sendNow { timer.inner = scheduler.schedule { [self] in flush() } }
    }

    /// Sends the pending value and keeps the window open for another interval, or closes it.
    @usableFromInline
    func flush() {
        var sent = false
        sink.send {
            guard let value = pending else {
                windowOpen = false
                return nil
            }
            pending = nil
            sent = true
            return .value(value)
        }
        if sent {
            timer.inner = clock.schedule(at: clock.now + interval) { [self] in flush() }
        }
    }
}

extension Signal {
    /// Sends at most one value per `interval` seconds, on `scheduler`: a value after a quiet
    /// period goes at once; values arriving faster are held and the latest one is sent when
    /// `interval` has passed since the previous send.
    ///
    /// A terminal event is delivered on `scheduler` at once; a held value is dropped.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func throttle(_ interval: TimeInterval, on scheduler: any DateScheduler) -> Signal<Value, Error> {
        _checkInterval(interval, "throttle(_:on:)")
        return _timed(_ThrottleState.adapter(interval, scheduler))
    }

    /// Holds values while `shouldThrottle` is `true` and sends the latest held one when it
    /// becomes `false`; otherwise forwards values at once. Events are delivered on `scheduler`,
    /// in the order they were decided: a held value is never delivered after a newer one.
    ///
    /// - Note: The signal observes `shouldThrottle`'s producer and does not keep the property
    ///   itself alive; once the property is gone, its last value applies.
    public func throttle<P: PropertyProtocol>(while shouldThrottle: P, on scheduler: any Scheduler) -> Signal<
        Value, Error
    >
    where P.Value == Bool {
        Signal._serialized { sink, lifetime in
            var held: Value?  // Confined to the owner of the sink's delivery.
            var throttling = false  // Confined to the owner of the sink's delivery.
            // Every event is scheduled while the decision is held (inside `sink.send`), so the
            // scheduler receives them in the order they were decided; scheduling outside let a
            // newer value overtake a released one. A scheduler that runs the action at once
            // re-enters the sink, which queues the event behind the current decision.
            lifetime += shouldThrottle.producer.skipRepeats().startWithValues { isThrottling in
                sink.send {
                    throttling = isThrottling
                    if !isThrottling, let release = held {
                        held = nil
                        scheduler.schedule { sink.send(.value(release)) }
                    }
                    return nil
                }
            }
            lifetime += self.observe { event in
                sink.send {
                    if case let .value(value) = event, throttling {
                        held = value
                    } else {
                        scheduler.schedule { sink.send(event) }
                    }
                    return nil
                }
            }
        }
    }
}

extension SignalProducer {
    /// Sends at most one value per `interval` seconds; see `Signal.throttle(_:on:)`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func throttle(_ interval: TimeInterval, on scheduler: any DateScheduler) -> SignalProducer<Value, Error> {
        _checkInterval(interval, "throttle(_:on:)")
        return _timed(hopping: scheduler, _ThrottleState.adapter(interval, scheduler))
    }

    /// Holds values while `shouldThrottle` is `true`; see `Signal.throttle(while:on:)`.
    ///
    /// - Note: The producer does not keep `shouldThrottle` alive (as in ReactiveSwift, it holds
    ///   a `Property(_:)` view of it, which follows it without retaining it).
    public func throttle<P: PropertyProtocol>(
        while shouldThrottle: P, on scheduler: any Scheduler
    ) -> SignalProducer<Value, Error> where P.Value == Bool {
        let shouldThrottle = Property(shouldThrottle)
        return lift { $0.throttle(while: shouldThrottle, on: scheduler) }
    }
}

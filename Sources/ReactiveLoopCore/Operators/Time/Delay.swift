#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

/// delay: values and completion shifted by `interval`, in their order, through one FIFO queue
/// and at most one pending timer (not one timer per value).
@usableFromInline
// Vars: see below.
final class _DelayState<Value, Error: Swift.Error>: _TimedState<Value, Error>, @unchecked Sendable {
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var queue: [(deadline: TimeInterval, event: Signal<Value, Error>.Event)] =
        []
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var head = 0
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var armed = false

    /// The operator for one run: builds the state and returns the observer of the input.
    @inlinable
    static func adapter(
        _ interval: TimeInterval, _ scheduler: any DateScheduler
    ) -> (_SerialSink<Value, Error>, Lifetime) -> Signal<Value, Error>.Observer {
        // Once per application of the operator, not per run: it looks up a conformance.
        let clock = _SchedulerClock(scheduler)
        return { sink, lifetime in
            Signal.Observer(_DelayState(interval: interval, clock: clock, sink: sink, lifetime: lifetime).receive)
        }
    }

    @inlinable
    func receive(_ event: Signal<Value, Error>.Event) {
        switch event {
        case .value, .completed:
            let deadline = clock.now + interval
            var arm = false
            sink.send {
                queue.append((deadline, event))
                if !armed {
                    armed = true
                    arm = true
                }
                return nil
            }
            if arm { timer.inner = clock.schedule(at: deadline) { [self] in fire() } }
        case .failed, .interrupted:
            // Not delayed: delivered on the scheduler at once, ahead of anything queued.
            timer.dispose()
            scheduler.schedule { [sink] in sink.send(event) }
        }
    }

    @usableFromInline
    func fire() {
        while true {
            let now = clock.now
            var next: TimeInterval?
            var delivered = false
            sink.send {
                guard head < queue.count else {
                    armed = false
                    return nil
                }
                guard queue[head].deadline <= now else {
                    next = queue[head].deadline
                    return nil
                }
                let event = queue[head].event
                head += 1
                if head == queue.count {
                    queue.removeAll(keepingCapacity: true)
                    head = 0
                }
                delivered = true
                return event
            }
            if let next {
                timer.inner = clock.schedule(at: next) { [self] in fire() }
                return
            }
            if !delivered { return }
        }
    }
}

extension Signal {
    /// Delays each value and the completion by `interval` seconds, delivering them on
    /// `scheduler` in their order. A failure or interruption is not delayed: it is delivered on
    /// `scheduler` at once and drops what was still waiting.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func delay(_ interval: TimeInterval, on scheduler: any DateScheduler) -> Signal<Value, Error> {
        _checkInterval(interval, "delay(_:on:)")
        return _timed(_DelayState.adapter(interval, scheduler))
    }
}

extension SignalProducer {
    /// Delays each value and the completion of each run; see `Signal.delay(_:on:)`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    @inlinable
    public func delay(_ interval: TimeInterval, on scheduler: any DateScheduler) -> SignalProducer<Value, Error> {
        _checkInterval(interval, "delay(_:on:)")
        return _timed(hopping: scheduler, _DelayState.adapter(interval, scheduler))
    }
}

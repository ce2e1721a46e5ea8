#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

/// timeout for one run: fails the output at the deadline, forwards the input otherwise.
@usableFromInline
func _timeoutAdapter<Value, Error: Swift.Error>(
    _ interval: TimeInterval, _ error: Error, _ scheduler: any DateScheduler
) -> (_SerialSink<Value, Error>, Lifetime) -> Signal<Value, Error>.Observer {
    _checkInterval(interval, "timeout(after:raising:on:)")
    // Once per application of the operator, not per run: it looks up a conformance.
    let clock = _SchedulerClock(scheduler)
    return { sink, lifetime in
        lifetime._attachDisposing(clock.schedule(at: clock.now + interval) { sink.send(.failed(error)) })
        return sink.input
    }
}

extension Signal {
    /// Forwards events until `interval` seconds have passed, then fails with `error` on
    /// `scheduler` unless the signal terminated first.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    public func timeout(after interval: TimeInterval, raising error: Error, on scheduler: any DateScheduler) -> Signal<
        Value, Error
    > {
        _timed(_timeoutAdapter(interval, error, scheduler))
    }
}

extension Signal where Error == Never {
    /// Forwards events until `interval` seconds have passed, then fails with `error`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    public func timeout<NewError: Swift.Error>(
        after interval: TimeInterval, raising error: NewError, on scheduler: any DateScheduler
    ) -> Signal<Value, NewError> {
        promoteError(NewError.self).timeout(after: interval, raising: error, on: scheduler)
    }
}

extension SignalProducer {
    /// Forwards events of each run until `interval` seconds have passed, then fails with
    /// `error`; see `Signal.timeout(after:raising:on:)`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    public func timeout(
        after interval: TimeInterval, raising error: Error, on scheduler: any DateScheduler
    ) -> SignalProducer<Value, Error> {
        _timed(hopping: nil, _timeoutAdapter(interval, error, scheduler))
    }
}

extension SignalProducer where Error == Never {
    /// Forwards events of each run until `interval` seconds have passed, then fails with `error`.
    ///
    /// - Precondition: `interval` is finite and `>= 0`.
    public func timeout<NewError: Swift.Error>(
        after interval: TimeInterval, raising error: NewError, on scheduler: any DateScheduler
    ) -> SignalProducer<Value, NewError> {
        promoteError(NewError.self).timeout(after: interval, raising: error, on: scheduler)
    }
}

// retry(upTo:) and retry(upTo:interval:on:): a failed run started again.

#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

extension SignalProducer {
    /// Starts the producer again after a failure, up to `count` more times; the last failure
    /// is forwarded.
    ///
    /// - Precondition: `count >= 0`.
    public func retry(upTo count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "retry(upTo:): count must be >= 0, got \(count)")
        guard count > 0 else { return self }
        return _restarting {
            var remaining = count
            return { event in
                guard case .failed = event, remaining > 0 else { return false }
                remaining -= 1
                return true
            }
        }
    }

    /// Starts the producer again `interval` seconds after a failure, up to `count` more times.
    ///
    /// - Precondition: `count >= 0` and `interval >= 0`.
    public func retry(upTo count: Int, interval: TimeInterval, on scheduler: any DateScheduler) -> SignalProducer<
        Value, Error
    > {
        _require(count >= 0, "retry(upTo:interval:on:): count must be >= 0, got \(count)")
        _checkInterval(interval, "retry(upTo:interval:on:)")
        guard count > 0 else { return self }
        return flatMapError { _ in
            SignalProducer<(), Error>(value: ()).delay(interval, on: scheduler)
                .then(self.retry(upTo: count - 1, interval: interval, on: scheduler))
        }
    }

    /// Runs this producer again after each terminal event for which the run's decision (made
    /// fresh by `makeDecision` for every start) says so; other events are forwarded.
    ///
    /// A run that ends synchronously asks for its successor from inside its own start: the
    /// trampoline starts the successor after that start returns, so any number of synchronous
    /// runs take constant stack.
    func _restarting(
        _ makeDecision: @escaping () -> (Signal<Value, Error>.Event) -> Bool
    ) -> SignalProducer<Value, Error> {
        SignalProducer(.run) { downstream, lifetime in
            let restartsAfter = makeDecision()  // Runs are sequential: confined to the current one.
            let current = SerialDisposable()
            lifetime += current
            let loop = _RestartLoop()
            func attempt() {
                guard !lifetime.hasEnded else { return downstream.sendInterrupted() }
                current.inner = self.start(
                    Signal.Observer { event in
                        if event.isTerminating && !lifetime.hasEnded && restartsAfter(event) {
                            _Trampoline.run(owner: loop, attempt)
                        } else {
                            downstream.send(event)
                        }
                    })
            }
            _Trampoline.run(owner: loop, attempt)
        }
    }
}

/// The identity of one run of `_restarting`, for its trampoline.
final class _RestartLoop {}

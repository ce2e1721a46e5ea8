import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

extension EventLoop {
    /// The process signals `numbers` (`SIGTERM`, `SIGINT`, `SIGHUP`, …) as they arrive, on the
    /// loop thread, while the producer runs.
    ///
    /// Starting the producer installs a handler for each signal (libuv's `uv_signal_t`), which
    /// replaces the default action (a `SIGTERM` no longer ends the process); disposing the run
    /// removes it again. The loop thread unblocks the signals, so that they arrive even in a
    /// process started with them blocked (a child inherits the signal mask of the thread that
    /// spawned it, and Dispatch's threads block most signals). Each delivery is sent once; signals that arrive together may be sent
    /// in either order. The producer is interrupted when the loop stops.
    ///
    /// - Precondition: `numbers` is not empty, and each is a signal that can be caught (1 to
    ///   64, not `SIGKILL` or `SIGSTOP`).
    public func signals(_ numbers: Int32...) -> SignalProducer<Int32, Never> {
        signals(numbers)
    }

    /// The process signals `numbers` as they arrive (see `signals(_:)`).
    public func signals(_ numbers: [Int32]) -> SignalProducer<Int32, Never> {
        _require(!numbers.isEmpty, "EventLoop.signals(_:): no signal given")
        for number in numbers {
            _require(
                number > 0 && number < 65 && number != SIGKILL && number != SIGSTOP,
                "EventLoop.signals(_:): signal \(number) cannot be caught")
        }
        let distinct = Array(Set(numbers)).sorted()
        return SignalProducer { [self] observer, lifetime in
            let begin = { [self] in
                guard !lifetime.hasEnded else { return }
                // A process can start with signals blocked (inherited from the thread that spawned
                // it); a blocked signal would never reach the handler. Deliver them to this thread.
                var mask = sigset_t()
                sigemptyset(&mask)
                for number in distinct { sigaddset(&mask, number) }
                pthread_sigmask(SIG_UNBLOCK, &mask, nil)
                for number in distinct {
                    let watcher = _SignalWatcher(loop: self, number: number, observer: observer)
                    lifetime.observeEnded { watcher.closeFromAnyThread() }
                }
            }
            if !onLoopThread(begin) { observer.sendInterrupted() }
        }
    }
}

/// One watched signal of a `signals(_:)` run. Confined to the loop thread.
final class _SignalWatcher: _LoopOwnedHandle, @unchecked Sendable {  // Confined to the loop thread.
    let loop: EventLoop
    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let observer: Signal<Int32, Never>.Observer

    init(loop: EventLoop, number: Int32, observer: Signal<Int32, Never>.Observer) {
        self.loop = loop
        self.observer = observer
        let signal = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
        uv_signal_init(loop.uvLoop, signal)
        adopt(signal)
        let status = uv_signal_start(
            signal,
            { signal, number in
                _SignalWatcher.owner(of: signal).observer.send(value: number)
            }, number)
        _require(
            status == 0, "EventLoop.signals(_:): \(UVError(code: status, operation: "uv_signal_start(\(number))"))")
    }

    deinit { closeOrphanedHandle() }

    func handleWillClose(interrupted: Bool) {
        if interrupted { observer.sendInterrupted() }
    }
}

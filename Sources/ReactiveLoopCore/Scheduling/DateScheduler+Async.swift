// Async helpers on any DateScheduler: sleeping on its clock, and its timer as an AsyncStream.

import Dispatch
#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

extension DateScheduler {
    /// Suspends the calling task for `interval` on this scheduler's clock.
    ///
    /// The task stays on its actor: it resumes there directly, with no hop through the global
    /// executor (so a task on the main actor woken by a `TestScheduler` runs before the main
    /// actor's later work).
    ///
    /// - Throws: `CancellationError` if the task is cancelled first.
    public func sleep(
        for interval: DispatchTimeInterval, leeway: DispatchTimeInterval = .seconds(0),
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        try await sleep(until: currentDate.addingTimeInterval(interval.timeInterval), leeway: leeway)
    }

    /// Suspends the calling task until `deadline` on this scheduler's clock, on its actor; see
    /// `sleep(for:leeway:isolation:)`.
    ///
    /// - Throws: `CancellationError` if the task is cancelled first.
    public func sleep(
        until deadline: Date, leeway: DispatchTimeInterval = .seconds(0),
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        let slot = SerialDisposable()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Swift.Error>) in
                let resumed = _ResumeOnce(continuation)
                slot.inner = AnyDisposable { resumed.resume(throwing: CancellationError()) }
                let scheduled = schedule(after: deadline) { resumed.resume() }
                if slot.isDisposed { scheduled?.dispose() }
            }
        } onCancel: {
            slot.dispose()
        }
    }

    /// The dates of a repeating timer, as an async sequence; it stops when iteration stops.
    public func timer(interval: DispatchTimeInterval, leeway: DispatchTimeInterval = .seconds(0)) -> AsyncStream<Date> {
        AsyncStream { continuation in
            let timer = SerialDisposable()
            timer.inner = schedule(after: interval, interval: interval, leeway: leeway) { [unowned self] in
                continuation.yield(self.currentDate)
            }
            continuation.onTermination = { _ in timer.dispose() }
        }
    }
}

/// Resumes a continuation exactly once, whichever of completion and cancellation comes first.
final class _ResumeOnce: @unchecked Sendable {  // The lock protects `continuation`.
    private let lock = _Lock.make()
    // Protected by lock.
    private var continuation: CheckedContinuation<Void, any Swift.Error>?

    init(_ continuation: CheckedContinuation<Void, any Swift.Error>) {
        self.continuation = continuation
    }

    func resume(throwing error: (any Swift.Error)? = nil) {
        let taken: CheckedContinuation<Void, any Swift.Error>? = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        if let error { taken?.resume(throwing: error) } else { taken?.resume() }
    }
}

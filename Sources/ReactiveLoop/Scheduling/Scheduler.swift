import Dispatch
import Foundation

/// Runs actions somewhere: at once, on a queue, on the main queue, on an event loop, or in
/// virtual time.
///
/// ## Contract (every scheduler in this package passes `SchedulerConformance` in the tests)
/// - Actions run one at a time, in the order they were scheduled, unless a scheduler documents
///   otherwise (`ImmediateScheduler` runs each action inline).
/// - An action whose disposable is disposed before the action starts never runs. Disposing
///   works from any thread, any number of times.
/// - Scheduling from inside a running action is allowed; the new action runs after the
///   current one.
public protocol Scheduler: AnyObject {
    /// Runs `action` once, as soon as the scheduler can.
    ///
    /// - Returns: A disposable that cancels the action if it has not started, or `nil` if the
    ///   action cannot be cancelled (for example because it already ran).
    @discardableResult
    func schedule(_ action: @escaping () -> Void) -> (any Disposable)?
}

/// A scheduler that can run actions at a time, and repeatedly.
///
/// ## Time is monotonic
/// `Date` is the API type, for compatibility with ReactiveSwift, but deadlines are not kept
/// as wall-clock dates: a deadline is turned into a delay from `currentDate` when it is
/// scheduled, and the delay is measured on a monotonic clock. A wall-clock jump (NTP, a user
/// changing the clock) therefore neither fires an action early nor stalls it.
///
/// ## Contract, in addition to `Scheduler`'s
/// - Actions scheduled for the same deadline run in the order they were scheduled.
/// - An action disposed before its deadline never runs.
/// - A repeating timer runs until its disposable is disposed. Releasing the disposable without
///   disposing it does not cancel the timer: the scheduler keeps the timer alive.
/// - When a scheduler is released, actions already scheduled on it still run (a queue
///   scheduler's timers are owned by their disposables and by the queue), except on a
///   `TestScheduler`, whose pending actions are simply never run.
public protocol DateScheduler: Scheduler {
    /// The scheduler's idea of now (wall-clock for real schedulers, virtual for tests).
    var currentDate: Date { get }

    /// Runs `action` once at `date` (at once if `date` is not in the future).
    ///
    /// - Returns: A disposable that cancels the action if it has not started.
    @discardableResult
    func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)?

    /// Runs `action` at `date`, then every `interval`, until the disposable is disposed.
    ///
    /// - Parameters:
    ///   - leeway: How late an occurrence may run, to let the system coalesce timers.
    /// - Precondition: `interval` is positive.
    @discardableResult
    func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval,
        action: @escaping () -> Void
    ) -> (any Disposable)?
}

extension DateScheduler {
    /// Runs `action` after `delay`, then every `interval`, until the disposable is disposed.
    @discardableResult
    public func schedule(
        after delay: DispatchTimeInterval, interval: DispatchTimeInterval,
        leeway: DispatchTimeInterval = .seconds(0), action: @escaping () -> Void
    ) -> (any Disposable)? {
        schedule(
            after: currentDate.addingTimeInterval(delay.timeInterval), interval: interval, leeway: leeway,
            action: action)
    }

    /// Suspends the calling task for `interval` on this scheduler's clock.
    ///
    /// - Throws: `CancellationError` if the task is cancelled first.
    public func sleep(for interval: DispatchTimeInterval, leeway: DispatchTimeInterval = .seconds(0)) async throws {
        try await sleep(until: currentDate.addingTimeInterval(interval.timeInterval), leeway: leeway)
    }

    /// Suspends the calling task until `deadline` on this scheduler's clock.
    ///
    /// - Throws: `CancellationError` if the task is cancelled first.
    public func sleep(until deadline: Date, leeway: DispatchTimeInterval = .seconds(0)) async throws {
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
    private let lock = _Lock()
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

extension DispatchTimeInterval {
    /// The interval in seconds; `.never` is infinite.
    @usableFromInline
    var timeInterval: TimeInterval {
        switch self {
        case let .seconds(value): return TimeInterval(value)
        case let .milliseconds(value): return TimeInterval(value) / 1_000
        case let .microseconds(value): return TimeInterval(value) / 1_000_000
        case let .nanoseconds(value): return TimeInterval(value) / 1_000_000_000
        case .never: return .infinity
        @unknown default: return .infinity
        }
    }

    /// The interval in whole nanoseconds (saturating); `.never` is `Int.max`.
    @usableFromInline
    package var nanoseconds: Int {
        switch self {
        case let .seconds(value):
            return value.multipliedReportingOverflow(by: 1_000_000_000).overflow ? .max : value * 1_000_000_000
        case let .milliseconds(value):
            return value.multipliedReportingOverflow(by: 1_000_000).overflow ? .max : value * 1_000_000
        case let .microseconds(value):
            return value.multipliedReportingOverflow(by: 1_000).overflow ? .max : value * 1_000
        case let .nanoseconds(value): return value
        case .never: return .max
        @unknown default: return .max
        }
    }

    /// An interval of `seconds`, rounded to the nanosecond.
    @usableFromInline
    static func from(seconds: TimeInterval) -> DispatchTimeInterval {
        guard seconds.isFinite else { return .never }
        let nanoseconds = (seconds * 1_000_000_000).rounded()
        return .nanoseconds(nanoseconds >= Double(Int.max) ? .max : max(0, Int(nanoseconds)))
    }
}

extension DispatchTimeInterval {
    /// The interval as an exact `Duration`, or `nil` for `.never`.
    var duration: Duration? {
        switch self {
        case let .seconds(value): .seconds(value)
        case let .milliseconds(value): .milliseconds(value)
        case let .microseconds(value): .microseconds(value)
        case let .nanoseconds(value): .nanoseconds(value)
        case .never: nil
        @unknown default: nil
        }
    }
}

extension Duration {
    /// The duration in seconds, correctly rounded for whole nanoseconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// `seconds` (finite) rounded to the nanosecond, the resolution of the schedulers' clocks.
    static func rounded(seconds: Double) -> Duration {
        let whole = seconds.rounded(.down)
        return .seconds(Int64(whole)) + .nanoseconds(Int64(((seconds - whole) * 1e9).rounded()))
    }
}

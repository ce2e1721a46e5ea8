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
}

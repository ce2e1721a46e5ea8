import Foundation
import Synchronization

/// A date scheduler that also schedules on its own clock, with no wall-clock date in between.
///
/// Time operators compute deadlines as "now plus an interval". Through the public API that is
/// `currentDate.addingTimeInterval(interval)`, which a real-time scheduler turns back into a
/// monotonic deadline: a wall-clock read for the date, then two monotonic reads, another
/// wall-clock read and a lock to map it. Through this entry it is one monotonic read for "now"
/// and one to compare the deadline with. `QueueScheduler`, `LoopScheduler` and `TestScheduler`
/// adopt it; operators fall back to dates for any other `DateScheduler`.
///
/// Package access: shared with the runtime module, not part of the API.
@usableFromInline
package protocol _ClockScheduler: DateScheduler {
    /// Now on the scheduler's clock, in seconds: the monotonic clock (`DispatchTime`) for a
    /// real-time scheduler, virtual time (`currentDate`) for `TestScheduler`.
    var _clockNow: TimeInterval { get }

    /// Runs `action` once at `time` on the scheduler's clock. A time not in the future runs it
    /// as `schedule(after:action:)` runs a date not in the future (behind any timed action due
    /// at or before it); an infinitely distant time never runs it.
    @discardableResult
    func _schedule(atClock time: TimeInterval, action: @escaping () -> Void) -> (any Disposable)?
}

extension _ClockScheduler {
    /// The monotonic clock in seconds, for real-time schedulers.
    @inlinable
    package static var _monotonicSeconds: TimeInterval {
        Double(DispatchTime.now().uptimeNanoseconds) / 1e9
    }

    /// The monotonic deadline of `time` (seconds on the monotonic clock), or `nil` if it is
    /// infinitely far.
    @inlinable
    package static func _monotonicDeadline(_ time: TimeInterval) -> UInt64? {
        let nanoseconds = time * 1e9
        guard nanoseconds < Double(UInt64.max) else { return nil }
        return nanoseconds > 0 ? UInt64(nanoseconds) : 0
    }
}

/// How time operators read their scheduler's time, chosen when an operator's run starts.
/// Tests and benchmarks switch it to compare the clock entry with the date round trip.
@_spi(Testing)
public enum _TimeOperatorClock: UInt8, Sendable {
    /// The scheduler's own clock, when it offers one (`QueueScheduler`, `LoopScheduler`,
    /// `TestScheduler`).
    case schedulerClock = 0
    /// `currentDate` and `schedule(after:)`, as for any `DateScheduler`.
    case dates = 1

    private static let storage = Synchronization.Atomic<UInt8>(0)

    /// The choice for operator runs started from now on.
    public static var current: _TimeOperatorClock {
        get { _TimeOperatorClock(rawValue: storage.load(ordering: .relaxed)) ?? .schedulerClock }
        set { storage.store(newValue.rawValue, ordering: .relaxed) }
    }
}

/// Whether time operators started now use the scheduler's clock when it has one.
@usableFromInline
func _timeOperatorsUseSchedulerClock() -> Bool {
    _TimeOperatorClock.current == .schedulerClock
}

/// A time operator's view of its scheduler's time: seconds on the scheduler's own clock when
/// it has one, else seconds since the reference date through `currentDate`.
@usableFromInline
struct _SchedulerClock {
    @usableFromInline let scheduler: any DateScheduler
    @usableFromInline let clockScheduler: (any _ClockScheduler)?

    @inlinable
    init(_ scheduler: any DateScheduler) {
        self.scheduler = scheduler
        self.clockScheduler = _timeOperatorsUseSchedulerClock() ? scheduler as? any _ClockScheduler : nil
    }

    /// Now, in seconds on this clock.
    @inlinable
    var now: TimeInterval {
        if let clockScheduler { return clockScheduler._clockNow }
        return scheduler.currentDate.timeIntervalSinceReferenceDate
    }

    /// Runs `action` at `time` (seconds on this clock).
    @inlinable
    @discardableResult
    func schedule(at time: TimeInterval, _ action: @escaping () -> Void) -> (any Disposable)? {
        if let clockScheduler { return clockScheduler._schedule(atClock: time, action: action) }
        return scheduler.schedule(after: Date(timeIntervalSinceReferenceDate: time), action: action)
    }
}

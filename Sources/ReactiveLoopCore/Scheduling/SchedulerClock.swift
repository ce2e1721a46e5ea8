#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif
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

/// How time operators read their scheduler's time, chosen when an operator is applied.
/// Tests and benchmarks switch it to compare the clock entry with the date round trip.
@_spi(Testing)
public enum _TimeOperatorClock: UInt8, Sendable {
    /// The scheduler's own clock, when it offers one (`QueueScheduler`, `LoopScheduler`,
    /// `TestScheduler`).
    case schedulerClock = 0
    /// `currentDate` and `schedule(after:)`, as for any `DateScheduler`.
    case dates = 1

    private static let storage = Synchronization.Atomic<UInt8>(0)

    /// The choice for operators applied from now on.
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
        // Optional chaining borrows the stored scheduler; `if let` would copy (retain) it.
        if let now = clockScheduler?._clockNow { return now }
        return scheduler.currentDate.timeIntervalSinceReferenceDate
    }

    /// Runs `action` at `time` (seconds on this clock).
    @inlinable
    @discardableResult
    func schedule(at time: TimeInterval, _ action: @escaping () -> Void) -> (any Disposable)? {
        guard clockScheduler != nil else {
            return scheduler.schedule(after: Date(timeIntervalSinceReferenceDate: time), action: action)
        }
        return clockScheduler?._schedule(atClock: time, action: action)
    }
}

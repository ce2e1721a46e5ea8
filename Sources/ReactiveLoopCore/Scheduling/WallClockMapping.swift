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
import Synchronization

/// Turns wall-clock dates into deadlines on the monotonic clock (`CLOCK_MONOTONIC`, the clock of
/// `DispatchTime` and of libuv's `uv_hrtime`), for the schedulers that run on real time.
///
/// One offset (wall-clock seconds minus monotonic seconds) maps every date, so equal dates give
/// equal deadlines and keep their FIFO order. The offset changes only when the wall clock jumps:
/// the wall clock is read between two monotonic reads, so the true offset lies in a known
/// interval, and only an offset outside that interval (widened by a millisecond) is a jump. A
/// thread preempted between its reads widens the interval instead of looking like a jump.
///
/// Most dates are mapped with two clock reads and no lock: the wall clock, then the monotonic
/// clock, which bound the true offset from below; a known offset within a millisecond of that
/// bound is inside the interval the full check would find, so it is used as it is. Only when it
/// is not (a jump, or a thread preempted between the two reads) does the full check run, with
/// its third read and the lock.
///
/// Package access: the runtime module's scheduler shares it; not part of the API.
package final class _WallClockMapping: @unchecked Sendable {  // `offset` is protected by `lock`.
    /// Where a date falls.
    package enum Deadline: Equatable, Sendable {
        /// Not in the future by the wall clock: run it now.
        case now
        /// At this monotonic time, in nanoseconds.
        case at(UInt64)
        /// Infinitely far: never.
        case never
    }

    // nil: the system's wall clock, read directly.
    private let wallClock: (@Sendable () -> Date)?
    private let lock = _Lock.make()
    // Protected by lock.
    private var offset: Double?
    // A copy of `offset`'s bits for the lock-free check (NaN while there is none). Written under
    // `lock`; a stale value only sends a caller to the full check.
    private let knownOffsetBits = Synchronization.Atomic<UInt64>(Double.nan.bitPattern)
    private static let jumpThreshold: Double = 0.001

    /// A mapping that reads the wall clock with `wallClock` (tests inject jumps with it), or the
    /// system's wall clock directly if it is nil.
    package init(wallClock: (@Sendable () -> Date)? = nil) {
        self.wallClock = wallClock
    }

    /// The current wall-clock date.
    package var currentDate: Date { wallClock?() ?? Date() }

    /// The wall clock now, in seconds since the reference date.
    @inline(__always)
    private func wallSeconds() -> Double {
        if let wallClock { return wallClock().timeIntervalSinceReferenceDate }
        #if os(Linux)
            // `Date()` reads the same clock, through two more calls.
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            return (Double(now.tv_sec) - Date.timeIntervalBetween1970AndReferenceDate) + Double(now.tv_nsec) * 1e-9
        #else
            return Date().timeIntervalSinceReferenceDate
        #endif
    }

    /// The monotonic time now, in nanoseconds, on the clock of `DispatchTime`: on Linux that is
    /// `CLOCK_MONOTONIC`, read directly (Dispatch's own reading adds a conversion).
    package static var monotonicNow: UInt64 {
        #if os(Linux)
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
        #else
            DispatchTime.now().uptimeNanoseconds
        #endif
    }

    /// The monotonic time now, in seconds (for `_ClockScheduler`).
    package static var monotonicSeconds: TimeInterval {
        #if os(Linux)
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            // Read here rather than derived from `monotonicNow`: two small conversions and a
            // multiplication cost 7 to 11 instructions less than converting the 64-bit
            // nanoseconds, and this runs on every input of a time operator.
            return Double(now.tv_sec) + Double(now.tv_nsec) * 1e-9
        #else
            Double(monotonicNow) * 1e-9
        #endif
    }

    /// The monotonic deadline in nanoseconds of `time` (seconds on the monotonic clock), or
    /// `nil` if it is infinitely far.
    package static func monotonicDeadline(_ time: TimeInterval) -> UInt64? {
        let nanoseconds = time * 1e9
        guard nanoseconds < Double(UInt64.max) else { return nil }
        return nanoseconds > 0 ? UInt64(nanoseconds) : 0
    }

    /// The deadline of `date`, fixed now. "Not in the future" is judged on the wall clock the
    /// date comes from, not through the offset, which may lag it by up to a millisecond.
    ///
    /// - Precondition: `date` is not NaN (`api` names the caller in the message).
    package func deadline(for date: Date, _ api: @autoclosure () -> String) -> Deadline {
        _checkDate(date, api())
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds < .infinity else { return .never }
        let wall = wallSeconds()
        guard seconds > wall else { return .now }
        let after = Self.monotonicNow
        guard let known = knownOffset(wall: wall, after: after) else { return checkedDeadline(seconds) }
        return Self.deadline(seconds, offset: known, after: after)
    }

    /// `deadline(for:_:)` with the full check of the offset.
    private func checkedDeadline(_ seconds: Double) -> Deadline {
        let before = Self.monotonicNow
        let wall = wallSeconds()
        guard seconds > wall else { return .now }
        let after = Self.monotonicNow
        return Self.deadline(seconds, offset: offset(wall: wall, before: before, after: after), after: after)
    }

    private static func deadline(_ seconds: Double, offset: Double, after: UInt64) -> Deadline {
        let target = (seconds - offset) * 1e9
        guard target > nanoseconds(after) else { return .now }
        // Signed conversions are one instruction each; unsigned ones branch.
        if target < 0x1p62 { return .at(UInt64(Int64(target))) }
        return target >= Double(UInt64.max) ? .never : .at(UInt64(target))
    }

    /// `time` (monotonic nanoseconds, far below 2^63) as a `Double`.
    @inline(__always)
    private static func nanoseconds(_ time: UInt64) -> Double { Double(Int64(truncatingIfNeeded: time)) }

    /// The monotonic time of a finite `date` that is not in the future, through the same
    /// offset as `deadline(for:_:)`, so that it orders against the deadlines of dates in the
    /// future the way the dates do. Schedulers use it to queue a due action behind a pending
    /// one of the same or an earlier date.
    package func monotonicTime(ofPast date: Date) -> UInt64 {
        let wall = wallSeconds()
        let after = Self.monotonicNow
        let offset: Double
        if let known = knownOffset(wall: wall, after: after) {
            offset = known
        } else {
            let before = Self.monotonicNow
            let wall = wallSeconds()
            offset = self.offset(wall: wall, before: before, after: Self.monotonicNow)
        }
        let target = (date.timeIntervalSinceReferenceDate - offset) * 1e9
        // May be a little after `after`: the offset can lag the wall clock by a millisecond.
        return target >= Double(UInt64.max) ? UInt64.max : UInt64(max(target, 0))
    }

    /// The known offset, if it is within a millisecond of `wall` minus `after` (the monotonic
    /// clock read right after `wall`): then it lies in the interval the full check accepts,
    /// whatever the earlier monotonic reading would have been. `nil` sends the caller to the
    /// full check.
    @inline(__always)
    private func knownOffset(wall: Double, after: UInt64) -> Double? {
        let known = Double(bitPattern: knownOffsetBits.load(ordering: .relaxed))
        let lowest = wall - Self.nanoseconds(after) * 1e-9
        // False for NaN (no offset yet).
        guard known >= lowest - Self.jumpThreshold && known <= lowest + Self.jumpThreshold else { return nil }
        return known
    }

    /// The wall clock minus the monotonic clock, in seconds: the known offset while `wall`,
    /// read between the monotonic readings `before` and `after`, agrees with it (within a
    /// millisecond), else the observed one, kept from then on.
    private func offset(wall: Double, before: UInt64, after: UInt64) -> Double {
        let lowest = wall - Double(after) / 1e9
        let highest = wall - Double(before) / 1e9
        return lock.withLock {
            if let known = self.offset, known >= lowest - Self.jumpThreshold && known <= highest + Self.jumpThreshold {
                return known
            }
            let observed = (lowest + highest) / 2
            self.offset = observed
            knownOffsetBits.store(observed.bitPattern, ordering: .relaxed)
            return observed
        }
    }
}

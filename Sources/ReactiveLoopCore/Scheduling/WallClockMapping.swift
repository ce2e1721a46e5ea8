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
/// One offset (wall-clock time minus monotonic time) maps every date, so equal dates give equal
/// deadlines and keep their FIFO order. Both clocks run at the same rate (the kernel slews them
/// together), so the offset changes only when the wall clock is set or stepped (a leap second
/// and a resume from suspend are steps too).
///
/// On Linux, with the system's clocks, the offset is read exactly and cheaply: the kernel sets
/// its coarse wall clock and coarse monotonic clock (`CLOCK_REALTIME_COARSE`,
/// `CLOCK_MONOTONIC_COARSE`) at the same update, so their difference is the offset to the
/// nanosecond, and reading both costs a few nanoseconds against about 20 for one precise read.
/// A difference equal to the known offset is the offset. Any other (the clock was stepped, or
/// a timekeeping update fell between the two reads) is read again as monotonic, wall,
/// monotonic until both monotonic readings are equal (no update came between them), and that
/// difference becomes the offset. A date more than eight ticks of the coarse clock (at least
/// 50 ms) ahead of its coarse reading is in the future without a precise read: the coarse
/// clock lags the precise one by a tick or two, more when the kernel's timekeeping stalls (a
/// descheduled virtual CPU). A nearer date is judged as `Date` itself reads the wall clock: on
/// the precise monotonic clock plus the exact offset, converted as `Date` converts. So a date
/// costs two coarse reads and no lock, and a jump of any size is taken at the next date.
///
/// With an injected wall clock (tests), if the coarse clocks cannot be read, or if their
/// readings never settle, the offset is checked against precise reads instead (starting from
/// the coarse clocks' last offset, so that equal dates still map equally): the wall clock is read between two monotonic reads,
/// so the true offset lies in a known interval, and only an offset outside that interval
/// (widened by a millisecond) is a jump. A thread preempted between its reads widens the
/// interval instead of looking like a jump. Most dates take two reads and no lock there: the
/// wall clock, then the monotonic clock, which bound the true offset from below; a known offset
/// within a millisecond of that bound is inside the interval the full check would find. Only
/// when it is not does the full check run, with its third read and the lock.
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

    /// A reading of the coarse monotonic clock (`true`) or of the coarse wall clock, in
    /// nanoseconds (since boot, since 1970).
    package typealias CoarseClock = @Sendable (_ monotonic: Bool) -> Int64
    // nil: the system's coarse clocks (tests script them: steps, updates between reads, lag).
    private let coarseClock: CoarseClock?
    // The coarse clocks' last settled difference, in nanoseconds; `Int64.min` while there is
    // none. A stale value only sends a caller to re-read.
    private let knownCoarseOffset = Synchronization.Atomic<Int64>(.min)

    /// A mapping that reads the wall clock with `wallClock` (tests inject jumps with it), or the
    /// system's clocks directly if it is nil: on Linux, the coarse clocks for the offset, read
    /// with `coarseClock` if it is given (tests).
    package init(wallClock: (@Sendable () -> Date)? = nil, coarseClock: CoarseClock? = nil) {
        self.wallClock = wallClock
        self.coarseClock = coarseClock
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
            return Self.dateSeconds(seconds: Int64(now.tv_sec), nanoseconds: Int64(now.tv_nsec))
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
    /// date comes from: through the exact offset of the coarse clocks, or, on the precise
    /// check, on a wall-clock read (not through that check's offset, which may lag the wall
    /// clock by up to a millisecond).
    ///
    /// - Precondition: `date` is not NaN (`api` names the caller in the message).
    package func deadline(for date: Date, _ api: @autoclosure () -> String) -> Deadline {
        _checkDate(date, api())
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds < .infinity else { return .never }
        #if os(Linux)
            if wallClock == nil, let coarse = coarseOffset() {
                let target = (seconds - Self.offsetSeconds(coarse.offset)) * 1e9
                if target > Self.nanoseconds(coarse.monotonic) + Self.coarseMargin { return Self.at(target) }
                let now = Int64(truncatingIfNeeded: Self.monotonicNow)
                return Self.isInFuture(seconds, monotonicNow: now, offset: coarse.offset) ? Self.at(target) : .now
            }
        #endif
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
        return at(target)
    }

    /// The deadline at `target` monotonic nanoseconds (in the future).
    @inline(__always)
    private static func at(_ target: Double) -> Deadline {
        // Signed conversions are one instruction each; unsigned ones branch.
        if target < 0x1p62 { return .at(UInt64(Int64(target))) }
        return target >= Double(UInt64.max) ? .never : .at(UInt64(target))
    }

    /// `time` (monotonic nanoseconds, far below 2^63) as a `Double`.
    @inline(__always)
    private static func nanoseconds(_ time: UInt64) -> Double { Double(Int64(truncatingIfNeeded: time)) }

    /// `time` (monotonic nanoseconds) as a `Double`.
    @inline(__always)
    private static func nanoseconds(_ time: Int64) -> Double { Double(time) }

    /// A time since 1970 in seconds since the reference date, computed as `Date()` computes it
    /// from the clock's seconds and nanoseconds (so that the two compare exactly).
    @inline(__always)
    package static func dateSeconds(seconds: Int64, nanoseconds: Int64) -> Double {
        (Double(seconds) - Date.timeIntervalBetween1970AndReferenceDate) + Double(nanoseconds) * 1e-9
    }

    #if os(Linux)
        /// Nanoseconds from 1970 to the reference date of `Date`.
        private static let referenceDateNanoseconds: Int64 = 978_307_200_000_000_000

        /// How far ahead of the coarse monotonic reading a date must be to be in the future
        /// without a precise read, in nanoseconds: eight ticks, and at least 50 ms. The coarse
        /// clock trails the precise one by up to about two ticks, and the kernel lets its
        /// timekeeping stall for up to five before another CPU takes it over.
        private static let coarseMargin: Double = {
            var resolution = timespec()
            guard clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) == 0 else { return 50e6 }
            let tick = Double(resolution.tv_sec) * 1e9 + Double(resolution.tv_nsec)
            return Swift.max(8 * tick, 50e6)
        }()

        /// Whether a date (`seconds` since the reference date) is after the wall clock at the
        /// monotonic time `monotonicNow` (nanoseconds), given the exact `offset` (nanoseconds,
        /// wall since 1970 minus monotonic). The wall clock is read as `Date()` would read it
        /// (the precise wall clock is the precise monotonic clock plus the offset) and converted
        /// as `Date` converts, so that a date taken before is never in the future: comparing in
        /// monotonic time instead, through the offset in floating point, misjudged a quarter of
        /// such dates on some boots.
        @inline(__always)
        package static func isInFuture(_ seconds: Double, monotonicNow: Int64, offset: Int64) -> Bool {
            let wall = monotonicNow &+ offset
            return seconds > dateSeconds(seconds: wall / 1_000_000_000, nanoseconds: wall % 1_000_000_000)
        }

        /// Whether the system's coarse clocks can be read (a kernel without them refuses).
        private static let coarseClocksWork: Bool = {
            var time = timespec()
            return clock_gettime(CLOCK_REALTIME_COARSE, &time) == 0 && clock_gettime(CLOCK_MONOTONIC_COARSE, &time) == 0
        }()

        /// `offset` (nanoseconds, wall since 1970 minus monotonic) in seconds since the
        /// reference date.
        @inline(__always)
        private static func offsetSeconds(_ offset: Int64) -> Double {
            Double(offset &- referenceDateNanoseconds) * 1e-9
        }

        /// One coarse clock, in nanoseconds.
        @inline(__always)
        private func readCoarse(monotonic: Bool) -> Int64 {
            if let coarseClock { return coarseClock(monotonic) }
            var time = timespec()
            clock_gettime(monotonic ? CLOCK_MONOTONIC_COARSE : CLOCK_REALTIME_COARSE, &time)
            return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
        }

        /// The offset in nanoseconds (wall since 1970 minus monotonic), exact, and a coarse
        /// monotonic reading taken with it; nil if the coarse clocks cannot be read or their
        /// readings did not settle (the caller then takes the precise check).
        @inline(__always)
        private func coarseOffset() -> (offset: Int64, monotonic: Int64)? {
            guard coarseClock != nil || Self.coarseClocksWork else { return nil }
            let wall = readCoarse(monotonic: false)
            let monotonic = readCoarse(monotonic: true)
            let offset = wall &- monotonic
            if offset == knownCoarseOffset.load(ordering: .relaxed) { return (offset, monotonic) }
            return settleCoarseOffset()
        }

        /// The coarse clocks' difference from a wall reading between two equal monotonic ones
        /// (no timekeeping update came between them), kept from then on; nil if no such reading
        /// comes within a few tries.
        @inline(never)
        private func settleCoarseOffset() -> (offset: Int64, monotonic: Int64)? {
            for _ in 0..<4 {
                let before = readCoarse(monotonic: true)
                let wall = readCoarse(monotonic: false)
                guard readCoarse(monotonic: true) == before else { continue }
                let offset = wall &- before
                knownCoarseOffset.store(offset, ordering: .relaxed)
                // The precise check starts from the same offset, should it be needed.
                let seconds = Self.offsetSeconds(offset)
                lock.withLock {
                    self.offset = seconds
                    knownOffsetBits.store(seconds.bitPattern, ordering: .relaxed)
                }
                return (offset, before)
            }
            return nil
        }
    #endif

    /// The monotonic time of a finite `date` that is not in the future, through the same
    /// offset as `deadline(for:_:)`, so that it orders against the deadlines of dates in the
    /// future the way the dates do. Schedulers use it to queue a due action behind a pending
    /// one of the same or an earlier date.
    package func monotonicTime(ofPast date: Date) -> UInt64 {
        #if os(Linux)
            if wallClock == nil, let coarse = coarseOffset() {
                return Self.monotonicTime(of: date, offset: Self.offsetSeconds(coarse.offset))
            }
        #endif
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
        // May be a little after `after`: the offset can lag the wall clock by a millisecond.
        return Self.monotonicTime(of: date, offset: offset)
    }

    private static func monotonicTime(of date: Date, offset: Double) -> UInt64 {
        let target = (date.timeIntervalSinceReferenceDate - offset) * 1e9
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

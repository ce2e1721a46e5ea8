import Foundation
import ReactiveLoopTestSupport
import Synchronization
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// A wall clock that counts how often it is read.
final class CountingWallClock: Sendable {
    let reads = Synchronization.Atomic<Int>(0)

    func now() -> Date {
        reads.add(1, ordering: .relaxed)
        return Date()
    }
}

/// Time operators on a real-time scheduler compute deadlines on the scheduler's monotonic clock,
/// not through wall-clock dates; on `TestScheduler`, through its virtual time.
@Suite("Time operators on the scheduler's clock")
struct SchedulerClockTests {
    struct Failure: Error, Equatable {}

    /// Runs `delay`, `debounce`, `throttle` and `timeout` to completion on `scheduler` and returns
    /// what each delivered.
    static func runTimeOperators(on scheduler: QueueScheduler) -> [[Signal<Int, Failure>.Event]] {
        let source = SignalProducer<Int, Failure>([1, 2, 3])
        let operators: [SignalProducer<Int, Failure>] = [
            source.delay(0.01, on: scheduler),
            source.debounce(0.01, on: scheduler, discardWhenCompleted: false),
            // 1, 2 and 3 arrive on the queue before it can send (the latest goes), and the window
            // is re-armed.
            source.concat(.never).start(on: scheduler).throttle(0.01, on: scheduler).take(first: 1),
            SignalProducer<Int, Failure>.never.timeout(after: 0.01, raising: Failure(), on: scheduler),
        ]
        return operators.map { producer in
            let events = Box<[Signal<Int, Failure>.Event]>([])
            let done = DispatchSemaphore(value: 0)
            producer.start { event in
                events.value.append(event)
                if event.isTerminating { done.signal() }
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            return scheduler.queue.sync { events.value }
        }
    }

    @Test func timeOperatorsOnAQueueSchedulerNeverReadTheWallClock() {
        let expected: [[Signal<Int, Failure>.Event]] = [
            [.value(1), .value(2), .value(3), .completed],
            [.value(3), .completed],
            [.value(3), .completed],
            [.failed(Failure())],
        ]
        let wallClock = CountingWallClock()
        let scheduler = QueueScheduler(
            queue: DispatchQueue(label: "SchedulerClockTests"), name: "SchedulerClockTests",
            wallClock: { wallClock.now() })
        #expect(_TimeOperatorClock.current == .schedulerClock)
        #expect(Self.runTimeOperators(on: scheduler) == expected)
        #expect(wallClock.reads.load(ordering: .relaxed) == 0)

        // The date round trip, for comparison: it reads the wall clock on every deadline.
        _TimeOperatorClock.current = .dates
        defer { _TimeOperatorClock.current = .schedulerClock }
        #expect(Self.runTimeOperators(on: scheduler) == expected)
        #expect(wallClock.reads.load(ordering: .relaxed) >= 4)
    }

    @Test func aQueueSchedulerRunsClockActionsInDeadlineOrderAndNeverTheDisposedOrInfinite() {
        let scheduler = QueueScheduler(name: "SchedulerClockTests")
        let order = Box<[String]>([])
        let now = scheduler._clockNow
        let done = DispatchSemaphore(value: 0)
        scheduler._schedule(atClock: now + 0.05) {
            order.value.append("later")
            done.signal()
        }
        scheduler._schedule(atClock: now + 0.02) { order.value.append("sooner") }
        scheduler._schedule(atClock: now - 1) { order.value.append("past") }
        scheduler._schedule(atClock: .infinity) { order.value.append("never") }
        scheduler._schedule(atClock: now + 0.01) { order.value.append("disposed") }?.dispose()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(scheduler._clockNow >= now + 0.05)
        #expect(scheduler.queue.sync { order.value } == ["past", "sooner", "later"])
    }

    @Test func theMonotonicClockIsDispatchTimesClock() {
        for _ in 0..<1_000 {
            let before = DispatchTime.now().uptimeNanoseconds
            let now = _WallClockMapping.monotonicNow
            let after = DispatchTime.now().uptimeNanoseconds
            #expect(before <= now && now <= after)
            #expect(abs(_WallClockMapping.monotonicSeconds - Double(now) / 1e9) < 1)
        }
    }

    @Test func testSchedulerClockIsItsVirtualTime() {
        let scheduler = TestScheduler()
        let fired = Box<[TimeInterval]>([])
        let start = scheduler._clockNow
        #expect(start == scheduler.currentDate.timeIntervalSinceReferenceDate)
        scheduler._schedule(atClock: start + 2) { fired.value.append(scheduler._clockNow - start) }
        scheduler._schedule(atClock: start + 1) { fired.value.append(scheduler._clockNow - start) }
        scheduler.advance(by: .milliseconds(1_500))
        #expect(fired.value == [1])
        scheduler.run()
        #expect(fired.value == [1, 2])
    }
}

/// Dates mapped to monotonic deadlines: the offset between the clocks is checked on every date:
/// with the system's clocks, through the coarse clocks' exact difference; with an injected wall
/// clock, with one wall-clock read while it holds, and a full check when it seems not to.
@Suite("Wall clock to monotonic clock")
struct WallClockMappingTests {
    /// A wall clock that tests move, counting its reads.
    final class MovableWallClock: Sendable {
        let shift = Mutex<TimeInterval>(0)
        let delay = Mutex<TimeInterval>(0)
        let reads = Synchronization.Atomic<Int>(0)

        func now() -> Date {
            reads.add(1, ordering: .relaxed)
            let now = Date().addingTimeInterval(shift.withLock { $0 })
            // As if the reading thread were preempted right after the read.
            let delay = self.delay.withLock { $0 }
            if delay > 0 { Thread.sleep(forTimeInterval: delay) }
            return now
        }
    }

    /// Seconds from now on the monotonic clock to `deadline`.
    static func secondsAhead(_ deadline: _WallClockMapping.Deadline) -> Double? {
        guard case let .at(nanoseconds) = deadline else { return nil }
        return (Double(nanoseconds) - Double(_WallClockMapping.monotonicNow)) / 1e9
    }

    @Test func theSystemClockIsReadDirectlyAndAgreesWithDate() {
        let mapping = _WallClockMapping()
        for _ in 0..<100 {
            let before = Date()
            let now = mapping.currentDate
            #expect(before <= now && now.timeIntervalSince(before) < 1)
            let ahead = Self.secondsAhead(mapping.deadline(for: Date().addingTimeInterval(10), "test"))
            #expect(ahead.map { $0 > 9.9 && $0 <= 10.001 } == true, "\(String(describing: ahead))")
            #expect(mapping.deadline(for: Date().addingTimeInterval(-0.001), "test") == .now)
        }
    }

    @Test func whileTheOffsetHoldsADateCostsOneWallClockRead() {
        let wallClock = MovableWallClock()
        let mapping = _WallClockMapping(wallClock: { wallClock.now() })
        _ = mapping.deadline(for: wallClock.now().addingTimeInterval(5), "test")
        let start = wallClock.reads.load(ordering: .relaxed)
        for _ in 0..<1_000 {
            let ahead = Self.secondsAhead(mapping.deadline(for: Date().addingTimeInterval(5), "test"))
            #expect(ahead.map { $0 > 4.9 && $0 <= 5.002 } == true, "\(String(describing: ahead))")
        }
        // A few may take the full check if the thread is preempted between two reads.
        let reads = wallClock.reads.load(ordering: .relaxed) - start
        #expect(reads >= 1_000 && reads < 1_100, "\(reads) wall-clock reads for 1,000 dates")
    }

    @Test func aJumpIsTakenAtTheNextDateEitherWay() {
        let wallClock = MovableWallClock()
        let mapping = _WallClockMapping(wallClock: { wallClock.now() })
        #expect(Self.secondsAhead(mapping.deadline(for: wallClock.now().addingTimeInterval(5), "test")) != nil)
        for jump in [3_600.0, -7_200.0, 0.01, -0.01] {
            wallClock.shift.withLock { $0 += jump }
            // The date is 5 s ahead by the wall clock as it now reads: 5 s on the monotonic clock.
            let ahead = Self.secondsAhead(mapping.deadline(for: wallClock.now().addingTimeInterval(5), "test"))
            #expect(ahead.map { $0 > 4.9 && $0 <= 5.002 } == true, "after \(jump) s: \(String(describing: ahead))")
            let past = mapping.monotonicTime(ofPast: wallClock.now().addingTimeInterval(-1))
            let behind = (Double(_WallClockMapping.monotonicNow) - Double(past)) / 1e9
            #expect(behind > 0.99 && behind < 1.1, "after \(jump) s: \(behind)")
        }
    }

    @Test func aSlowWallClockReadIsNotTakenForAJump() {
        let wallClock = MovableWallClock()
        let mapping = _WallClockMapping(wallClock: { wallClock.now() })
        _ = mapping.deadline(for: wallClock.now().addingTimeInterval(5), "test")
        // Each read now returns a time 20 ms before the next monotonic read: without the full
        // check, that looks like a jump back of 20 ms, and the deadline would move later.
        wallClock.delay.withLock { $0 = 0.02 }
        let target = Date().addingTimeInterval(5)
        let monotonicTarget = Double(_WallClockMapping.monotonicNow) / 1e9 + 5
        guard case let .at(nanoseconds) = mapping.deadline(for: target, "test") else {
            Issue.record("not a deadline")
            return
        }
        #expect(abs(Double(nanoseconds) / 1e9 - monotonicTarget) < 0.005)
    }

    #if os(Linux)
        /// The system's coarse clocks, read directly, and disturbed as tests script: a step of
        /// the wall clock, timekeeping updates that fall between reads, a coarse clock that lags.
        final class ScriptedCoarseClocks: Sendable {
            /// Nanoseconds added to the wall clock.
            let step = Mutex<Int64>(0)
            /// Nanoseconds added to both clocks: an update moves both on by a tick (4 ms); a
            /// negative value makes them lag further behind the precise clocks.
            let shift = Mutex<Int64>(0)
            /// The reads (numbered from 1) after which an update comes.
            let updatesAfter = Mutex<Set<Int64>>([])
            let readings = Synchronization.Atomic<Int64>(0)

            func read(monotonic: Bool) -> Int64 {
                var time = timespec()
                clock_gettime(monotonic ? CLOCK_MONOTONIC_COARSE : CLOCK_REALTIME_COARSE, &time)
                let number = readings.add(1, ordering: .relaxed).newValue
                var value = Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec) + shift.withLock { $0 }
                if !monotonic { value += step.withLock { $0 } }
                if updatesAfter.withLock({ $0.contains(number) }) { shift.withLock { $0 += 4_000_000 } }
                return value
            }

            /// Updates after the next reads at `positions` (1: right after the next read).
            func update(afterNextReads positions: [Int64]) {
                let base = readings.load(ordering: .relaxed)
                updatesAfter.withLock { $0 = Set(positions.map { base + $0 }) }
            }

            /// The wall clock as the mapping now sees it.
            func now() -> Date { Date().addingTimeInterval(Double(step.withLock { $0 }) / 1e9) }
        }

        static func nanoseconds(_ deadline: _WallClockMapping.Deadline) -> Int64? {
            guard case let .at(nanoseconds) = deadline else { return nil }
            return Int64(nanoseconds)
        }

        /// Seconds from now on the monotonic clock to `deadline`.
        static func secondsAhead(_ deadline: Int64?) -> Double? {
            deadline.map { Double($0 - Int64(_WallClockMapping.monotonicNow)) / 1e9 }
        }

        @Test func theCoarseClocksGiveTheExactOffsetAndAStepOfAnySizeIsTakenAtTheNextDate() {
            let clocks = ScriptedCoarseClocks()
            let mapping = _WallClockMapping(coarseClock: { clocks.read(monotonic: $0) })
            let date = Date().addingTimeInterval(5)
            guard var expected = Self.nanoseconds(mapping.deadline(for: date, "test")) else {
                Issue.record("not a deadline")
                return
            }
            #expect(Self.nanoseconds(mapping.deadline(for: date, "test")) == expected)
            // Steps far below a millisecond: the wall clock reads later by `step`, so the same
            // date is `step` nearer (to Date's own precision, about 120 ns).
            for step: Int64 in [10_000, -25_000] {
                clocks.step.withLock { $0 += step }
                expected -= step
                let deadline = Self.nanoseconds(mapping.deadline(for: date, "test"))
                #expect(
                    deadline.map { abs($0 - expected) < 1_000 } == true,
                    "after \(step) ns: \(String(describing: deadline)), not \(expected)")
            }
            for step: Int64 in [3_600_000_000_000, -7_200_000_000_000] {
                clocks.step.withLock { $0 += step }
                let ahead = Self.secondsAhead(Self.nanoseconds(mapping.deadline(for: clocks.now() + 5, "test")))
                #expect(ahead.map { $0 > 4.9 && $0 <= 5.001 } == true, "after \(step) ns: \(String(describing: ahead))")
                let past = mapping.monotonicTime(ofPast: clocks.now().addingTimeInterval(-1))
                let behind = (Double(_WallClockMapping.monotonicNow) - Double(past)) / 1e9
                #expect(behind > 0.99 && behind < 1.1, "after \(step) ns: \(behind)")
                #expect(mapping.deadline(for: clocks.now().addingTimeInterval(-0.001), "test") == .now)
            }
        }

        @Test func whileTheOffsetHoldsADateTakesTwoCoarseReads() {
            let clocks = ScriptedCoarseClocks()
            let mapping = _WallClockMapping(coarseClock: { clocks.read(monotonic: $0) })
            _ = mapping.deadline(for: Date().addingTimeInterval(5), "test")
            let before = clocks.readings.load(ordering: .relaxed)
            for _ in 0..<1_000 {
                _ = mapping.deadline(for: Date().addingTimeInterval(5), "test")
                _ = mapping.monotonicTime(ofPast: Date().addingTimeInterval(-1))
            }
            // Two each; a timekeeping update falling between two reads now and then adds three.
            // (Settling every time would take at least five.)
            let readings = clocks.readings.load(ordering: .relaxed) - before
            #expect(readings >= 4_000 && readings < 5_000, "\(readings) reads for 2,000 mappings")
        }

        @Test func aTimekeepingUpdateBetweenTheReadsIsNotTakenForAStep() {
            let clocks = ScriptedCoarseClocks()
            let mapping = _WallClockMapping(coarseClock: { clocks.read(monotonic: $0) })
            let date = Date().addingTimeInterval(5)
            let first = Self.nanoseconds(mapping.deadline(for: date, "test"))
            #expect(first != nil)
            // Between the wall read and the monotonic read: the difference is a tick short.
            clocks.update(afterNextReads: [1])
            #expect(Self.nanoseconds(mapping.deadline(for: date, "test")) == first)
            // And between the reads that settle it, twice in a row: two readings that each
            // straddle an update agree with each other, a tick short, and must not be taken.
            clocks.update(afterNextReads: [1, 3, 5, 7])
            #expect(Self.nanoseconds(mapping.deadline(for: date, "test")) == first)
            #expect(Self.nanoseconds(mapping.deadline(for: date, "test")) == first)
        }

        @Test func coarseReadingsThatNeverSettleFallBackToThePreciseCheck() {
            let clocks = ScriptedCoarseClocks()
            let mapping = _WallClockMapping(coarseClock: { clocks.read(monotonic: $0) })
            let date = Date().addingTimeInterval(5)
            let first = Self.nanoseconds(mapping.deadline(for: date, "test"))
            for _ in 0..<10 {
                // An update after every read: no two monotonic readings are ever equal.
                clocks.update(afterNextReads: Array(1...100))
                let before = clocks.readings.load(ordering: .relaxed)
                let deadline = mapping.deadline(for: date, "test")
                let readings = clocks.readings.load(ordering: .relaxed) - before
                #expect(readings <= 14, "\(readings) readings")
                // The precise check starts from the offset the coarse clocks last gave, so the
                // same date keeps its deadline unless the clocks really moved apart.
                #expect(
                    Self.nanoseconds(deadline).map { abs($0 - first!) < 1_000_000 } == true,
                    "\(String(describing: deadline)) against \(String(describing: first))")
                let past = mapping.monotonicTime(ofPast: Date().addingTimeInterval(-1))
                let behind = (Double(_WallClockMapping.monotonicNow) - Double(past)) / 1e9
                #expect(behind > 0.99 && behind < 1.1, "\(behind)")
                #expect(mapping.deadline(for: Date().addingTimeInterval(-0.001), "test") == .now)
            }
        }

        @Test func aCoarseClockFarBehindStillJudgesADateNearNowOnThePreciseClock() {
            let clocks = ScriptedCoarseClocks()
            // 30 ms behind: more than a few ticks, as when the kernel's timekeeping stalls.
            clocks.shift.withLock { $0 = -30_000_000 }
            let mapping = _WallClockMapping(coarseClock: { clocks.read(monotonic: $0) })
            for _ in 0..<100 {
                #expect(mapping.deadline(for: Date().addingTimeInterval(-0.001), "test") == .now)
                let ahead = Self.secondsAhead(Self.nanoseconds(mapping.deadline(for: Date() + 0.02, "test")))
                #expect(ahead.map { $0 > 0 && $0 <= 0.0201 } == true, "\(String(describing: ahead))")
            }
        }

        @Test func aDateNoLaterThanTheWallClockIsNeverInTheFutureWhateverTheOffset() {
            // Offsets and instants at random: the dates `Date()` would give at, and a little
            // before, the wall clock's reading are not in the future; a microsecond after is.
            var random = SystemRandomNumberGenerator()
            var wrong = 0
            for _ in 0..<2_000 {
                let offset = Int64.random(in: 1_600_000_000_000_000_000...1_900_000_000_000_000_000, using: &random)
                for _ in 0..<200 {
                    let now = Int64.random(in: 1_000_000_000...2_000_000_000_000_000, using: &random)
                    for before: Int64 in [0, 40, 1_000] {
                        let wall = now + offset - before
                        let date = _WallClockMapping.dateSeconds(
                            seconds: wall / 1_000_000_000, nanoseconds: wall % 1_000_000_000)
                        if _WallClockMapping.isInFuture(date, monotonicNow: now, offset: offset) { wrong += 1 }
                    }
                    let later = now + offset + 1_000
                    let date = _WallClockMapping.dateSeconds(
                        seconds: later / 1_000_000_000, nanoseconds: later % 1_000_000_000)
                    if !_WallClockMapping.isInFuture(date, monotonicNow: now, offset: offset) { wrong += 1 }
                }
            }
            #expect(wrong == 0)
        }

        @Test func aDateTakenBeforeTheCallIsNeverInTheFuture() {
            // Judged on the wall clock exactly as `Date()` reads it: a date made from the
            // offset in floating point misjudged a quarter of these on some boots.
            let mapping = _WallClockMapping()
            var misjudged = 0
            for _ in 0..<100_000 where mapping.deadline(for: Date(), "test") != .now { misjudged += 1 }
            #expect(misjudged == 0, "\(misjudged) of 100,000")
        }
    #endif
}

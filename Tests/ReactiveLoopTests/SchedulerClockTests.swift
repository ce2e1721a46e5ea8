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

/// Dates mapped to monotonic deadlines: the offset between the clocks is checked on every date,
/// with one wall-clock read while it holds, and a full check when it seems not to.
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
}

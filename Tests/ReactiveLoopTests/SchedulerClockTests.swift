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

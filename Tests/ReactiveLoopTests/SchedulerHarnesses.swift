import Dispatch
import Foundation
import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// The shared conformance checks (ReactiveLoopTestSupport's `SchedulerConformance`) on the
/// schedulers of the core.
@Suite("Scheduler conformance", .serialized)
struct SchedulerConformanceTests {
    @Test(arguments: SchedulerConformance.cases(all: [.immediate, .test, .queue, .main], dated: [.test, .queue]))
    func conforms(check: SchedulerConformanceCheck, harness: SchedulerHarness) { check(harness) }
}

/// Wall-clock jumps, per scheduler with real dates (the loop scheduler's is in its own tests).
@Suite("Wall-clock jumps")
struct WallClockJumpTests {
    @Test func aWallClockJumpNeitherFiresEarlyNorStallsQueueTimers() {
        let offset = Box<TimeInterval>(0)
        let scheduler = QueueScheduler(
            queue: DispatchQueue(label: "jump"), name: "jump", wallClock: { Date().addingTimeInterval(offset.value) })
        let forward = Box(false)
        let backward = Box(false)
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.3)) { forward.value = true }
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.3)) { backward.value = true }
        offset.value = 3_600  // The clock jumps an hour ahead: nothing may fire early.
        Thread.sleep(forTimeInterval: 0.05)
        scheduler.queue.sync {}
        #expect(!forward.value)
        offset.value = -3_600  // And an hour back: nothing may stall.
        Thread.sleep(forTimeInterval: 0.6)
        scheduler.queue.sync {}
        #expect(forward.value)
        #expect(backward.value)
    }

    @Test func aWallClockJumpOnTheTestSchedulerKeepsRemainingDelays() {
        let scheduler = TestScheduler()
        let ran = Box(false)
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(10)) { ran.value = true }
        scheduler.rewind(by: .seconds(3_600))
        scheduler.advance(by: 9)
        #expect(!ran.value)
        scheduler.advance(by: 1)
        #expect(ran.value)
    }
}

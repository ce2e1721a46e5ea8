import Dispatch
import Foundation
import Testing
@testable import ReactiveLoop

@Suite("TestScheduler")
struct TestSchedulerTests {
    @Test func advanceRunsWhatFallsDueInDeadlineOrderWithTheClockAtEachDeadline() {
        let scheduler = TestScheduler(startDate: Date(timeIntervalSinceReferenceDate: 100))
        let log = Box<[String]>([])
        scheduler.schedule(after: .seconds(2)) {
            log.modify { $0.append("b@\(scheduler.currentDate.timeIntervalSinceReferenceDate)") }
        }
        scheduler.schedule(after: Date(timeIntervalSinceReferenceDate: 101)) {
            log.modify { $0.append("a@\(scheduler.currentDate.timeIntervalSinceReferenceDate)") }
            // Scheduled while advancing, due within this advance: runs in it.
            scheduler.schedule(after: .milliseconds(500)) { log.modify { $0.append("c") } }
        }
        scheduler.schedule { log.modify { $0.append("now") } }
        scheduler.advance()
        #expect(log.value == ["now"])
        scheduler.advance(by: 1.5)
        #expect(log.value == ["now", "a@101.0", "c"])
        scheduler.advance(to: Date(timeIntervalSinceReferenceDate: 102))
        #expect(log.value == ["now", "a@101.0", "c", "b@102.0"])
        #expect(scheduler.currentDate == Date(timeIntervalSinceReferenceDate: 102))
    }

    @Test func runDrainsEverythingAndRepeatingTimersTick() {
        let scheduler = TestScheduler()
        let ticks = Box(0)
        let timer = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(1), interval: .seconds(1)) {
            ticks.modify { $0 += 1 }
        }
        scheduler.advance(by: .milliseconds(3_500))
        #expect(ticks.value == 3)
        timer?.dispose()
        let ran = Box(false)
        scheduler.schedule(after: .seconds(1_000)) { ran.value = true }
        scheduler.run()
        #expect(ran.value)
        #expect(ticks.value == 3)
    }

    @Test func asyncFormsAdvanceOnTheMainActor() async {
        let scheduler = TestScheduler()
        let ran = Box(0)
        scheduler.schedule(after: .seconds(1)) { ran.modify { $0 += 1 } }
        scheduler.schedule(after: .seconds(3)) { ran.modify { $0 += 1 } }
        scheduler.schedule(after: .seconds(5)) { ran.modify { $0 += 1 } }
        await scheduler.advance()
        await scheduler.advance(by: .seconds(1))
        #expect(ran.value == 1)
        await scheduler.advance(by: 2.0)
        #expect(ran.value == 2)
        await scheduler.advance(to: scheduler.currentDate.addingTimeInterval(0.5))
        await scheduler.run()
        #expect(ran.value == 3)
    }

    @Test func sleepAndTimerFollowTheVirtualClock() async throws {
        let scheduler = TestScheduler()
        let woke = Box(false)
        let sleeper = Task {
            try await scheduler.sleep(for: .seconds(10))
            woke.value = true
        }
        // Give the task time to register its wake-up, then move the clock.
        for _ in 0..<100 where !woke.value {
            await scheduler.advance(by: 10.0)
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        try await sleeper.value
        #expect(woke.value)

        var dates: [Date] = []
        let timer = scheduler.timer(interval: .seconds(1))
        let ticker = Task {
            for await date in timer {
                dates.append(date)
                if dates.count == 3 { break }
            }
            return dates
        }
        for _ in 0..<200 {
            await scheduler.advance(by: 1.0)
            try await Task.sleep(nanoseconds: 1_000_000)
        }
        #expect(await ticker.value.count == 3)
    }

    @Test func cancellingASleepThrows() async {
        let scheduler = TestScheduler()
        let sleeper = Task { try await scheduler.sleep(for: .seconds(1)) }
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }
}

@Suite("Main and queue schedulers")
struct RealSchedulerTests {
    @Test func mainSchedulerQueuesWhenCalledOffTheMainThread() async {
        let scheduler = UIScheduler()
        let onMain = Box(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let disposable = scheduler.schedule {
                onMain.value = MainScheduler.isOnMain
                continuation.resume()
            }
            #expect(disposable != nil)
        }
        #expect(onMain.value)
    }

    /// Other tests queue work on the main queue concurrently, so an attempt may find something
    /// queued and (correctly) queue behind it; then the test lets the main queue drain and tries
    /// again. It fails only if the scheduler never runs inline in 200 attempts.
    @MainActor
    @Test func mainSchedulerRunsInlineOnTheMainThreadWhenNothingIsQueued() async throws {
        let scheduler = MainScheduler()
        for _ in 0..<200 {
            var ran = false
            if scheduler.schedule({ ran = true }) == nil {
                #expect(ran)
                return
            }
            #expect(!ran, "queued behind other work, so it must not have run yet")
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("MainScheduler never ran an action inline on the main thread")
    }

    @Test func queueSchedulerMainAndInitializers() {
        #expect(QueueScheduler.main.queue.label == DispatchQueue.main.label)
        let scheduler = QueueScheduler(qos: .userInitiated, name: "test")
        let ran = DispatchSemaphore(value: 0)
        scheduler.schedule(after: Date()) { ran.signal() }
        #expect(ran.wait(timeout: .now() + 5) == .success)
        let repeating = Box(0)
        let timer = scheduler.schedule(after: Date(), interval: .milliseconds(10)) { repeating.modify { $0 += 1 } }
        Thread.sleep(forTimeInterval: 0.2)
        timer?.dispose()
        #expect(repeating.value >= 2)
        #expect(abs(scheduler.currentDate.timeIntervalSinceNow) < 5)
    }
}

extension RealSchedulerTests {
    /// Regression guard for the bug RxSwift #393 describes: an action scheduled on the main
    /// queue from elsewhere must not be overtaken by one scheduled later from the main queue.
    @Test func mainSchedulerNeverLetsAnInlineActionOvertakeAQueuedOne() async {
        for _ in 0..<50 {
            let order = Box<[String]>([])
            let scheduler = MainScheduler()
            let queued = DispatchSemaphore(value: 0)
            Thread.detachNewThreadShim {
                scheduler.schedule { order.modify { $0.append("from background") } }
                queued.signal()
            }
            queued.wait()
            await MainActor.run {
                _ = scheduler.schedule { order.modify { $0.append("from main") } }
            }
            await MainActor.run {}
            #expect(order.value == ["from background", "from main"])
        }
    }
}

extension RealSchedulerTests {
    /// Regression: releasing a QueueScheduler dropped its pending timed actions, against the
    /// `DateScheduler` contract.
    @Test func timedActionsRunAfterTheQueueSchedulerIsReleased() {
        let ran = DispatchSemaphore(value: 0)
        do {
            let scheduler = QueueScheduler(name: "released")
            scheduler.schedule(after: Date().addingTimeInterval(0.05)) { ran.signal() }
        }
        #expect(ran.wait(timeout: .now() + 10) == .success)
    }
}

import Dispatch
import Foundation
import ReactiveLoop
import Testing

/// A scheduler under test and how to let its time pass. Each test target that runs the
/// conformance checks says which schedulers it tests (see its `SchedulerHarnesses.swift`).
public struct SchedulerHarness: CustomStringConvertible, Sendable {
    public let description: String
    public let make: @Sendable () -> any Scheduler
    /// Lets `seconds` of the scheduler's time pass and waits until what fell due has run.
    public let pass: @Sendable (_ scheduler: any Scheduler, _ seconds: TimeInterval) -> Void

    public init(
        description: String, make: @escaping @Sendable () -> any Scheduler,
        pass: @escaping @Sendable (_ scheduler: any Scheduler, _ seconds: TimeInterval) -> Void
    ) {
        self.description = description
        self.make = make
        self.pass = pass
    }

    public static let immediate = SchedulerHarness(
        description: "ImmediateScheduler", make: { ImmediateScheduler() }, pass: { _, _ in })

    public static let test = SchedulerHarness(
        description: "TestScheduler", make: { TestScheduler() },
        pass: { scheduler, seconds in (scheduler as! TestScheduler).advance(by: seconds) })

    public static let queue = SchedulerHarness(
        description: "QueueScheduler", make: { QueueScheduler(name: "conformance") },
        pass: { scheduler, seconds in
            // Generous: a timer that fell due may still be on its way to the queue.
            Thread.sleep(forTimeInterval: seconds)
            (scheduler as! QueueScheduler).queue.sync {}
            Thread.sleep(forTimeInterval: 0.02)
            (scheduler as! QueueScheduler).queue.sync {}
        })

    public static let main = SchedulerHarness(
        description: "MainScheduler", make: { MainScheduler() },
        pass: { _, _ in
            // The test runner's main thread drains the main queue; wait for it to get here.
            let drained = DispatchSemaphore(value: 0)
            DispatchQueue.main.async { drained.signal() }
            _ = drained.wait(timeout: .now() + 10)
        })
}

/// One check of the contract every scheduler must meet (see `Scheduler` and `DateScheduler`),
/// named after what it checks.
public struct SchedulerConformanceCheck: CustomStringConvertible, Sendable {
    public let description: String
    /// Whether the check needs a `DateScheduler`.
    let needsDates: Bool
    /// Whether the check holds for `ImmediateScheduler`, which runs every action inline.
    let holdsInline: Bool
    let run: @Sendable (SchedulerHarness) -> Void

    /// Runs the check on a scheduler made by `harness`.
    public func callAsFunction(_ harness: SchedulerHarness) { run(harness) }
}

/// The contract every scheduler must meet. A test target runs it on its schedulers with one
/// parameterized test, so that the checks are written once for every target:
///
/// ```swift
/// @Test(arguments: SchedulerConformance.cases(all: [.queue], dated: [.queue]))
/// func conforms(check: SchedulerConformanceCheck, harness: SchedulerHarness) { check(harness) }
/// ```
public enum SchedulerConformance {
    /// Each check paired with each harness it applies to: the checks of `Scheduler` with
    /// `all`, those of `DateScheduler` with `dated`.
    public static func cases(
        all: [SchedulerHarness], dated: [SchedulerHarness]
    ) -> [(SchedulerConformanceCheck, SchedulerHarness)] {
        checks.flatMap { check in
            (check.needsDates ? dated : all)
                .filter { check.holdsInline || $0.description != "ImmediateScheduler" }
                .map { (check, $0) }
        }
    }

    static let checks: [SchedulerConformanceCheck] = [
        .init(
            description: "actionsRunInTheOrderTheyWereScheduled", needsDates: false, holdsInline: true,
            run: actionsRunInTheOrderTheyWereScheduled),
        .init(
            description: "anActionDisposedBeforeItStartsNeverRuns", needsDates: false, holdsInline: false,
            run: anActionDisposedBeforeItStartsNeverRuns),
        .init(
            description: "schedulingFromInsideAnActionRunsAfterIt", needsDates: false, holdsInline: false,
            run: schedulingFromInsideAnActionRunsAfterIt),
        .init(
            description: "actionsForTheSameDeadlineRunInTheOrderTheyWereScheduled", needsDates: true,
            holdsInline: true, run: actionsForTheSameDeadlineRunInTheOrderTheyWereScheduled),
        .init(
            description: "aTimedActionDisposedBeforeItsDeadlineNeverRuns", needsDates: true, holdsInline: true,
            run: aTimedActionDisposedBeforeItsDeadlineNeverRuns),
        .init(
            description: "aRepeatingTimerRunsUntilDisposedFromAnotherThread", needsDates: true, holdsInline: true,
            run: aRepeatingTimerRunsUntilDisposedFromAnotherThread),
        .init(
            description: "droppingARepeatingTimersDisposableDoesNotCancelIt", needsDates: true, holdsInline: true,
            run: droppingARepeatingTimersDisposableDoesNotCancelIt),
    ]

    static func actionsRunInTheOrderTheyWereScheduled(harness: SchedulerHarness) {
        let scheduler = harness.make()
        let order = Box<[Int]>([])
        for index in 0...100 { scheduler.schedule { order.modify { $0.append(index) } } }
        harness.pass(scheduler, 0.01)
        #expect(order.value == Array(0...100))
    }

    static func anActionDisposedBeforeItStartsNeverRuns(harness: SchedulerHarness) {
        let scheduler = harness.make()
        let ran = Box<[Int]>([])
        // Block the scheduler first so that the disposal surely comes before the start.
        let gate = DispatchSemaphore(value: 0)
        if harness.description != "TestScheduler" { scheduler.schedule { gate.wait() } }
        let first = scheduler.schedule { ran.modify { $0.append(1) } }
        scheduler.schedule { ran.modify { $0.append(2) } }
        first?.dispose()
        first?.dispose()
        gate.signal()
        harness.pass(scheduler, 0.01)
        #expect(ran.value == [2])
    }

    /// `ImmediateScheduler` is the documented exception: it runs every action inline.
    static func schedulingFromInsideAnActionRunsAfterIt(harness: SchedulerHarness) {
        let scheduler = harness.make()
        let order = Box<[String]>([])
        scheduler.schedule {
            scheduler.schedule { order.modify { $0.append("inner") } }
            order.modify { $0.append("outer") }
        }
        harness.pass(scheduler, 0.01)
        harness.pass(scheduler, 0.01)
        #expect(order.value == ["outer", "inner"])
    }

    static func actionsForTheSameDeadlineRunInTheOrderTheyWereScheduled(harness: SchedulerHarness) {
        let scheduler = harness.make() as! any DateScheduler
        let order = Box<[Int]>([])
        let deadline = scheduler.currentDate.addingTimeInterval(0.05)
        for index in 0...100 { scheduler.schedule(after: deadline) { order.modify { $0.append(index) } } }
        harness.pass(scheduler, 0.01)
        #expect(order.value.isEmpty)
        harness.pass(scheduler, 0.2)
        #expect(order.value == Array(0...100))
    }

    static func aTimedActionDisposedBeforeItsDeadlineNeverRuns(harness: SchedulerHarness) {
        let scheduler = harness.make() as! any DateScheduler
        let ran = Box(0)
        let disposable = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.05)) {
            ran.modify { $0 += 1 }
        }
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.05)) { ran.modify { $0 += 10 } }
        disposable?.dispose()
        harness.pass(scheduler, 0.2)
        #expect(ran.value == 10)
    }

    static func aRepeatingTimerRunsUntilDisposedFromAnotherThread(harness: SchedulerHarness) {
        let scheduler = harness.make() as! any DateScheduler
        let ticks = Box(0)
        let disposable = Box(
            scheduler.schedule(after: .milliseconds(20), interval: .milliseconds(20)) { ticks.modify { $0 += 1 } })
        harness.pass(scheduler, 0.5)
        let whileRunning = ticks.value
        #expect(whileRunning >= 3)
        let disposed = DispatchSemaphore(value: 0)
        Thread.detachNewThreadShim {
            disposable.value?.dispose()
            disposed.signal()
        }
        disposed.wait()
        harness.pass(scheduler, 0.05)
        let afterDispose = ticks.value
        harness.pass(scheduler, 0.3)
        #expect(ticks.value == afterDispose)
    }

    static func droppingARepeatingTimersDisposableDoesNotCancelIt(harness: SchedulerHarness) {
        let scheduler = harness.make() as! any DateScheduler
        let ticks = Box(0)
        var kept: (any Disposable)?
        do {
            // The disposable goes out of scope at once.
            _ = scheduler.schedule(after: .milliseconds(20), interval: .milliseconds(20)) { ticks.modify { $0 += 1 } }
        }
        harness.pass(scheduler, 0.3)
        #expect(ticks.value >= 3)
        kept = nil
        _ = kept
    }
}

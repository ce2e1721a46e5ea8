import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopUV

/// One loop on its own thread for the conformance suite (each scheduler made on it).
let conformanceLoop = try! EventLoop.startOnNewThread(name: "conformance")

extension SchedulerHarness {
    static let loop = SchedulerHarness(
        description: "LoopScheduler", make: { LoopScheduler(loop: conformanceLoop) },
        pass: { scheduler, seconds in
            Thread.sleep(forTimeInterval: seconds)
            // Two round trips through the loop: what fell due has run, and what it queued too.
            for _ in 0..<2 {
                let drained = DispatchSemaphore(value: 0)
                (scheduler as! LoopScheduler).loop.execute { drained.signal() }
                drained.wait()
            }
        })
}

/// The shared conformance checks (ReactiveLoopTestSupport's `SchedulerConformance`) on the
/// loop's scheduler.
@Suite("Scheduler conformance", .serialized)
struct SchedulerConformanceTests {
    @Test(arguments: SchedulerConformance.cases(all: [.loop], dated: [.loop]))
    func conforms(check: SchedulerConformanceCheck, harness: SchedulerHarness) { check(harness) }
}

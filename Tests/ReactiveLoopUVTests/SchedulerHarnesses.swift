import Dispatch
import Foundation
import ReactiveLoop
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

    /// The schedulers the shared conformance suite (`SchedulerConformance.swift`) runs on here.
    static let all: [SchedulerHarness] = [.loop]
    static let dated: [SchedulerHarness] = [.loop]
}

// Helpers of this target alone: they reach the library's internals. What the test targets
// share is in ReactiveLoopTestSupport.

import Foundation
import ReactiveLoopTestSupport
@testable import ReactiveLoopCore

/// Serializes tests that switch `_SignalCoreKind.current`.
let coreKindLock = NSLock()

/// Serializes tests that redirect `_ContentionReport` (its wait and its output are global).
let contentionReportLock = NSLock()

#if DEBUG
    /// Deadlocks a send on purpose and returns the debug reports that name `marker`: the stream
    /// made by `makeStream` calls `onValue` for each delivered value; on value 1, a new thread
    /// sends 2 while the delivery waits for the report (30 s at most), which breaks the cycle.
    /// Reports come after 0.2 s of waiting, and go to the test instead of standard error.
    func contentionReports(
        naming marker: String, _ makeStream: (_ onValue: @escaping (Int) -> Void) -> @Sendable (Int) -> Void
    ) -> [String] {
        contentionReportLock.lock()
        defer { contentionReportLock.unlock() }
        let reports = Box<[String]>([])
        let reported = DispatchSemaphore(value: 0)
        let savedSeconds = _ContentionReport.seconds
        let savedReport = _ContentionReport.report
        _ContentionReport.seconds = 0.2
        _ContentionReport.report = { message in
            reports.modify { $0.append(message) }
            if message.contains("<\(marker),") { reported.signal() }
        }
        defer {
            _ContentionReport.seconds = savedSeconds
            _ContentionReport.report = savedReport
        }
        let send = Box<(@Sendable (Int) -> Void)?>(nil)
        let sent = DispatchSemaphore(value: 0)
        send.value = makeStream { value in
            guard value == 1 else { return }
            Thread.detachNewThread {
                send.value?(2)
                sent.signal()
            }
            // Waits for the new thread, whose send waits for this delivery.
            _ = reported.wait(timeout: .now() + 30)
        }
        send.value?(1)
        sent.wait()
        return reports.value.filter { $0.contains("<\(marker),") }
    }
#endif

import Foundation
@testable import ReactiveLoop

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

/// A mutable box that closures running on other threads can share (tests only).
final class Box<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T
    init(_ value: T) { _value = value }
    var value: T {
        get { lock.lock(); defer { lock.unlock() }; return _value }
        set { lock.lock(); defer { lock.unlock() }; _value = newValue }
    }
    func modify<R>(_ body: (inout T) -> R) -> R {
        lock.lock(); defer { lock.unlock() }
        return body(&_value)
    }
}

/// Runs `body` on a new thread with a stack of `stackSize` bytes and returns whether it finished
/// within `seconds`: a deadlock becomes a failure instead of a hung test run.
func runWithWatchdog(
    seconds: Double = 10, stackSize: Int = 8 << 20, _ body: @escaping @Sendable () -> Void
) -> Bool {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.stackSize = stackSize
    thread.start()
    return done.wait(timeout: .now() + seconds) == .success
}

/// Tracks whether an object was released.
final class Tracked: @unchecked Sendable {
    let onDeinit: () -> Void
    init(onDeinit: @escaping () -> Void = {}) { self.onDeinit = onDeinit }
    deinit { onDeinit() }
}

/// `DispatchQueue.concurrentPerform` without importing Dispatch in every test file.
enum DispatchQueueShim {
    static func concurrentPerform(iterations: Int, _ body: @Sendable (Int) -> Void) {
        DispatchQueue.concurrentPerform(iterations: iterations, execute: body)
    }
}

/// A semaphore for tests that must not import Dispatch everywhere.
final class DispatchSemaphoreShim: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func signal() { semaphore.signal() }
    func wait() { semaphore.wait() }
}

extension Thread {
    static func detachNewThreadShim(_ body: @escaping @Sendable () -> Void) {
        Thread.detachNewThread(body)
    }
}

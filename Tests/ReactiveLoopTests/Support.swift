import Foundation
@testable import ReactiveLoop

/// Serializes tests that switch `_SignalCoreKind.current`.
let coreKindLock = NSLock()

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

// Helpers that every test target shares: ReactiveLoopTests, ReactiveLoopUVTests and LoopdTests.
// Only public API of the library is used here, so this module needs no testable import.

import Foundation

/// A mutable box that closures running on other threads can share (tests only).
public final class Box<T>: @unchecked Sendable {  // Every access to `_value` takes `lock`.
    private let lock = NSLock()
    // Protected by lock.
    private var _value: T
    public init(_ value: T) { _value = value }
    public var value: T {
        get { lock.lock(); defer { lock.unlock() }; return _value }
        set { lock.lock(); defer { lock.unlock() }; _value = newValue }
    }
    public func modify<R>(_ body: (inout T) -> R) -> R {
        lock.lock(); defer { lock.unlock() }
        return body(&_value)
    }
}

/// Polls `condition` every `pollingInterval` seconds until it holds or `seconds` pass
/// (generous: a bound, not a measurement).
public func eventually(seconds: Double = 10, pollingEvery pollingInterval: Double = 0.001, _ condition: () -> Bool)
    -> Bool
{
    let deadline = Date(timeIntervalSinceNow: seconds)
    while !condition() {
        if Date() > deadline { return false }
        Thread.sleep(forTimeInterval: pollingInterval)
    }
    return true
}

/// Runs `body` on a new thread with a stack of `stackSize` bytes and returns whether it finished
/// within `seconds`: a deadlock becomes a failure instead of a hung test run.
public func runWithWatchdog(
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
public final class Tracked: @unchecked Sendable {  // Immutable.
    let onDeinit: () -> Void
    public init(onDeinit: @escaping () -> Void = {}) { self.onDeinit = onDeinit }
    deinit { onDeinit() }
}

/// `DispatchQueue.concurrentPerform` without importing Dispatch in every test file.
public enum DispatchQueueShim {
    public static func concurrentPerform(iterations: Int, _ body: @Sendable (Int) -> Void) {
        DispatchQueue.concurrentPerform(iterations: iterations, execute: body)
    }
}

/// A semaphore for tests that must not import Dispatch everywhere.
public final class DispatchSemaphoreShim: @unchecked Sendable {  // DispatchSemaphore is thread-safe.
    private let semaphore = DispatchSemaphore(value: 0)
    public init() {}
    public func signal() { semaphore.signal() }
    public func wait() { semaphore.wait() }
}

extension Thread {
    public static func detachNewThreadShim(_ body: @escaping @Sendable () -> Void) {
        Thread.detachNewThread(body)
    }
}

/// A Unix socket of `type` (`SOCK_DGRAM`, `SOCK_STREAM`) bound to `path`, listening if it is a
/// stream socket: its descriptor, which the caller closes.
public func bindUnixSocket(at path: String, type: __socket_type) -> Int32 {
    let fd = socket(AF_UNIX, Int32(type.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    if type == SOCK_STREAM { listen(fd, 4) }
    return fd
}

/// Leaves a Unix socket file of `type` at `path` that nobody listens on, as a process that was
/// killed leaves it.
public func leaveStaleUnixSocket(at path: String, type: __socket_type = SOCK_DGRAM) {
    close(bindUnixSocket(at: path, type: type))
}

/// A raw Unix stream socket connected to `path` (blocking), or -1.
public func connectUnixStream(to path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
    if status != 0 {
        close(fd)
        return -1
    }
    return fd
}

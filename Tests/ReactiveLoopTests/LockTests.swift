import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// The core's lock: one allocation holding its mutex; a condition variable made by the first
/// thread that waits.
@Suite("Lock")
struct LockTests {
    /// Locking, and a broadcast that finds no waiter, make no condition variable.
    @Test func aLockNobodyWaitsOnHasNoConditionVariable() {
        let lock = _Lock.make()
        lock.withLock { lock.broadcast() }
        #expect(lock.tryLock())
        lock.unlock()
        #expect(lock.withLock { lock.header.condition } == nil)
    }

    /// A thread waiting on a lock's first wait is woken by the next broadcast, and the condition
    /// variable made for it is kept for later waits.
    @Test(arguments: [false, true])
    func aWaiterIsWokenByABroadcast(spinning: Bool) {
        nonisolated(unsafe) let lock = _Lock.make(spinning: spinning)  // Thread safe, not `Sendable`.
        let flag = Box(false)  // Protected by lock.
        let waiting = DispatchSemaphore(value: 0)
        let woken = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            lock.lock()
            waiting.signal()
            while !flag.value { lock.wait() }
            lock.unlock()
            woken.signal()
        }
        waiting.wait()
        lock.withLock {
            flag.value = true
            lock.broadcast()
        }
        #expect(woken.wait(timeout: .now() + 30) == .success)
        let condition = lock.withLock { lock.header.condition }
        #expect(condition != nil)
        lock.withLock { _ = lock.wait(seconds: 0.001) }  // Times out, or wakes spuriously.
        #expect(lock.withLock { lock.header.condition } == condition)
    }
}

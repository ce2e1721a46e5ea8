#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A non-recursive mutex backed by `pthread_mutex_t`, with an optional condition variable.
///
/// We use pthreads rather than `Synchronization.Mutex` for the few locks the core takes
/// (observer registration, contended sends, disposables): on Linux `Mutex` parks on a
/// priority-inheritance futex, which ThreadSanitizer does not model, so contended runs
/// under `--sanitize=thread` report false races. The uncontended cost is the same single
/// atomic exchange. The mutex is heap-allocated once, at creation, so it never moves.
@usableFromInline
final class _Lock: @unchecked Sendable {  // Safe: every access goes through the pthread mutex.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let condition: UnsafeMutablePointer<pthread_cond_t>

    @usableFromInline
    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        let mutexResult = pthread_mutex_init(mutex, nil)
        precondition(mutexResult == 0, "_Lock.init: pthread_mutex_init failed with \(mutexResult)")
        let conditionResult = pthread_cond_init(condition, nil)
        precondition(conditionResult == 0, "_Lock.init: pthread_cond_init failed with \(conditionResult)")
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    @inlinable
    func lock() {
        let result = pthread_mutex_lock(mutex)
        assert(result == 0, "_Lock.lock: pthread_mutex_lock failed with \(result)")
    }

    @inlinable
    func tryLock() -> Bool {
        pthread_mutex_trylock(mutex) == 0
    }

    @inlinable
    func unlock() {
        let result = pthread_mutex_unlock(mutex)
        assert(result == 0, "_Lock.unlock: pthread_mutex_unlock failed with \(result)")
    }

    /// Blocks until `broadcast()`; the caller must hold the lock. Wakeups may be spurious.
    @inlinable
    func wait() {
        let result = pthread_cond_wait(condition, mutex)
        assert(result == 0, "_Lock.wait: pthread_cond_wait failed with \(result)")
    }

    @inlinable
    func broadcast() {
        pthread_cond_broadcast(condition)
    }

    @inlinable
    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A non-zero number that identifies the calling thread while it runs.
@inlinable
func _currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}

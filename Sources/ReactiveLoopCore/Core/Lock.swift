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
/// atomic exchange. The mutex (and the condition variable, for locks that wait) live in the
/// lock object's own allocation, after its header, so they never move and a lock is one
/// allocation. It is thread safe, though not `Sendable` (`ManagedBuffer` is not): what holds
/// one says so in its own `@unchecked Sendable`.
///
/// Package access: the runtime module and loopd share it; not part of the API.
@usableFromInline
package final class _Lock: ManagedBuffer<_Lock.Header, UInt64> {
    // The elements are raw words: the mutex is bound at their start, and the condition
    // variable, if any, right after it.

    /// What the lock holds besides its mutex.
    @usableFromInline
    package struct Header {
        /// Whether a condition variable follows the mutex.
        @usableFromInline let hasCondition: Bool
    }

    /// The condition variable's offset from the mutex, in bytes.
    @usableFromInline static var conditionOffset: Int {
        let alignment = MemoryLayout<pthread_cond_t>.alignment
        return (MemoryLayout<pthread_mutex_t>.size + alignment - 1) / alignment * alignment
    }

    /// Makes a lock; `withCondition` adds a condition variable for `wait()` and `broadcast()`.
    ///
    /// - Parameter spinning: On glibc, a thread that finds the lock taken spins a little before
    ///   it sleeps (an adaptive mutex), which suits a lock held for a few instructions by many
    ///   threads: sleeping and waking would cost more than the wait. Elsewhere it is ignored.
    package static func make(withCondition: Bool = false, spinning: Bool = false) -> _Lock {
        let bytes =
            withCondition ? conditionOffset + MemoryLayout<pthread_cond_t>.size : MemoryLayout<pthread_mutex_t>.size
        let word = MemoryLayout<UInt64>.stride
        let buffer = create(minimumCapacity: (bytes + word - 1) / word) { _ in Header(hasCondition: withCondition) }
        let lock = unsafeDowncast(buffer, to: _Lock.self)
        let raw = lock.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) }
        let mutex = raw.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        defer { pthread_mutexattr_destroy(&attributes) }
        #if canImport(Glibc)
            if spinning { pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)) }
        #endif
        let mutexResult = pthread_mutex_init(mutex, &attributes)
        _require(mutexResult == 0, "_Lock.make: pthread_mutex_init failed with \(mutexResult)")
        if withCondition {
            let condition = (raw + conditionOffset).bindMemory(to: pthread_cond_t.self, capacity: 1)
            let conditionResult = pthread_cond_init(condition, nil)
            _require(conditionResult == 0, "_Lock.make: pthread_cond_init failed with \(conditionResult)")
        }
        return lock
    }

    deinit {
        if header.hasCondition { pthread_cond_destroy(condition) }
        pthread_mutex_destroy(mutex)
    }

    /// The mutex, in this object's allocation.
    @inlinable
    var mutex: UnsafeMutablePointer<pthread_mutex_t> {
        withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0).assumingMemoryBound(to: pthread_mutex_t.self) }
    }

    /// The condition variable, after the mutex. - Precondition: the lock has one.
    @inlinable
    var condition: UnsafeMutablePointer<pthread_cond_t> {
        assert(header.hasCondition, "_Lock: this lock was made without a condition variable")
        return (UnsafeMutableRawPointer(mutex) + Self.conditionOffset).assumingMemoryBound(to: pthread_cond_t.self)
    }

    @inlinable
    package func lock() {
        let result = pthread_mutex_lock(mutex)
        assert(result == 0, "_Lock.lock: pthread_mutex_lock failed with \(result)")
    }

    @inlinable
    package func tryLock() -> Bool {
        pthread_mutex_trylock(mutex) == 0
    }

    @inlinable
    package func unlock() {
        let result = pthread_mutex_unlock(mutex)
        assert(result == 0, "_Lock.unlock: pthread_mutex_unlock failed with \(result)")
    }

    /// Blocks until `broadcast()`; the caller must hold the lock. Wakeups may be spurious.
    /// - Precondition: the lock was made `withCondition`.
    @inlinable
    package func wait() {
        let result = pthread_cond_wait(condition, mutex)
        assert(result == 0, "_Lock.wait: pthread_cond_wait failed with \(result)")
    }

    /// Like `wait()`, but gives up after `seconds`; returns `false` if it timed out.
    /// - Precondition: the lock was made `withCondition`.
    @usableFromInline
    package func wait(seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let whole = Int(seconds)
        var nanoseconds = Int(now.tv_nsec) + Int((seconds - Double(whole)) * 1e9)
        var deadline = now
        deadline.tv_sec += whole + nanoseconds / 1_000_000_000
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    /// Wakes every thread in `wait()`. - Precondition: the lock was made `withCondition`.
    @inlinable
    package func broadcast() {
        pthread_cond_broadcast(condition)
    }

    @inlinable
    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
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

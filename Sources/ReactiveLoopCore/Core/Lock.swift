#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A non-recursive mutex backed by `pthread_mutex_t`, with a condition variable for `wait()`
/// and `broadcast()`.
///
/// We use pthreads rather than `Synchronization.Mutex` for the few locks the core takes
/// (observer registration, contended sends, disposables): on Linux `Mutex` parks on a
/// priority-inheritance futex, which ThreadSanitizer does not model, so contended runs
/// under `--sanitize=thread` report false races. The uncontended cost is the same single
/// atomic exchange.
///
/// The mutex lives in the lock object's own allocation, after its header, so it never moves
/// and a lock is one allocation (64 bytes on Linux). The condition variable is made by the first
/// `wait()` (48 bytes more, kept until the lock goes): most locks never wait, and every
/// signal has one. It is thread safe, though not `Sendable` (`ManagedBuffer` is not): what
/// holds one says so in its own `@unchecked Sendable`.
///
/// Package access: the runtime module and loopd share it; not part of the API.
@usableFromInline
package final class _Lock: ManagedBuffer<_Lock.Header, UInt64> {
    // The elements are raw words, bound to the mutex.

    /// What the lock holds besides its mutex.
    @usableFromInline
    package struct Header {
        /// The condition variable, once a thread has waited. Protected by the mutex.
        @usableFromInline var condition: UnsafeMutablePointer<pthread_cond_t>?
    }

    /// Makes a lock.
    ///
    /// - Parameter spinning: On glibc, a thread that finds the lock taken spins a little before
    ///   it sleeps (an adaptive mutex), which suits a lock held for a few instructions by many
    ///   threads: sleeping and waking would cost more than the wait. Elsewhere it is ignored.
    package static func make(spinning: Bool = false) -> _Lock {
        let lock = unsafeDowncast(create(minimumCapacity: mutexWords) { _ in Header() }, to: _Lock.self)
        lock.withUnsafeMutablePointerToElements { initializeMutex(at: $0, spinning: spinning) }
        return lock
    }

    /// How many 8-byte words hold a `pthread_mutex_t`: the tail a `ManagedBuffer` that keeps its
    /// mutex in its own allocation asks for.
    @usableFromInline
    static var mutexWords: Int {
        let word = MemoryLayout<UInt64>.stride
        return (MemoryLayout<pthread_mutex_t>.size + word - 1) / word
    }

    /// Makes a mutex in the `mutexWords` words at `words` (see `make(spinning:)`); it must be
    /// destroyed with `pthread_mutex_destroy` before that memory goes.
    @usableFromInline
    static func initializeMutex(at words: UnsafeMutablePointer<UInt64>, spinning: Bool = false) {
        let mutex = UnsafeMutableRawPointer(words).bindMemory(to: pthread_mutex_t.self, capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        defer { pthread_mutexattr_destroy(&attributes) }
        #if canImport(Glibc)
            if spinning { pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP)) }
        #endif
        let result = pthread_mutex_init(mutex, &attributes)
        _require(result == 0, "_Lock.make: pthread_mutex_init failed with \(result)")
    }

    deinit {
        withUnsafeMutablePointerToHeader { header in
            if let condition = header.pointee.condition {
                pthread_cond_destroy(condition)
                condition.deallocate()
            }
        }
        pthread_mutex_destroy(mutex)
    }

    /// The mutex, in this object's allocation.
    @inlinable
    var mutex: UnsafeMutablePointer<pthread_mutex_t> {
        withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0).assumingMemoryBound(to: pthread_mutex_t.self) }
    }

    /// The condition variable, made now if no thread has waited yet. The caller holds the lock.
    @usableFromInline
    func conditionLocked() -> UnsafeMutablePointer<pthread_cond_t> {
        withUnsafeMutablePointerToHeader { header in
            if let condition = header.pointee.condition { return condition }
            let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
            let result = pthread_cond_init(condition, nil)
            _require(result == 0, "_Lock.wait: pthread_cond_init failed with \(result)")
            header.pointee.condition = condition
            return condition
        }
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
    @usableFromInline
    package func wait() {
        let result = pthread_cond_wait(conditionLocked(), mutex)
        assert(result == 0, "_Lock.wait: pthread_cond_wait failed with \(result)")
    }

    /// Like `wait()`, but gives up after `seconds`; returns `false` if it timed out.
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
        return pthread_cond_timedwait(conditionLocked(), mutex, &deadline) != ETIMEDOUT
    }

    /// Wakes every thread in `wait()`; the caller must hold the lock (a lock no thread has
    /// waited on has no condition variable, and nothing to wake).
    @inlinable
    package func broadcast() {
        withUnsafeMutablePointerToHeader { header in
            if let condition = header.pointee.condition { pthread_cond_broadcast(condition) }
        }
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

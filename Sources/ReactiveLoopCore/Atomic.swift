/// A value protected by a lock, for state that several threads read and change (ReactiveSwift's
/// `Atomic`).
///
/// Every access takes the lock; `modify` and `withValue` hold it for the whole closure, so a
/// read-modify-write is atomic. Do not access the same `Atomic` again from inside those
/// closures: the lock is not recursive.
///
/// - Note: The toolchain's `Synchronization` module also declares `Atomic` (lock-free, for
///   integers and pointers). A file that imports both names this one `ReactiveLoop.Atomic`.
public final class Atomic<Value> {
    private let lock = _Lock.make()
    // Protected by lock.
    private var _value: Value

    /// Creates an atomic holding `value`.
    public init(_ value: Value) {
        _value = value
    }

    /// The value, read or replaced atomically.
    public var value: Value {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }

    /// Changes the value in place while holding the lock, and returns `action`'s result.
    @discardableResult
    public func modify<Result>(_ action: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try action(&_value)
    }

    /// Runs `action` with the value while holding the lock, and returns its result.
    @discardableResult
    public func withValue<Result>(_ action: (Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try action(_value)
    }

    /// Replaces the value and returns the old one, atomically.
    @discardableResult
    public func swap(_ newValue: Value) -> Value {
        modify { value in
            defer { value = newValue }
            return value
        }
    }
}

extension Atomic: @unchecked Sendable {}  // Every access to the value goes through `lock`.

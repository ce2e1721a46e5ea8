import Synchronization

/// Something that can be disposed of: a subscription, a started producer, a scheduled action.
///
/// Disposing is idempotent and thread safe for every disposable in this module: the first call
/// does the work, later calls do nothing.
public protocol Disposable: AnyObject {
    /// Whether `dispose()` has been called.
    var isDisposed: Bool { get }
    /// Releases the resource. Calls after the first have no effect.
    func dispose()
}

/// A disposable that runs a closure once, on the first `dispose()`.
public final class AnyDisposable: Disposable {
    private let state = Synchronization.Atomic<Bool>(false)
    // Written in init, read and cleared only by the one caller that wins `state`.
    private var action: (() -> Void)?

    /// Whether `dispose()` has been called.
    public var isDisposed: Bool { state.load(ordering: .acquiring) }

    /// Creates a disposable that runs `action` on its first `dispose()`, then releases it.
    public init(_ action: @escaping () -> Void) {
        self.action = action
    }

    /// Creates a disposable that only records whether it was disposed.
    public init() {
        self.action = nil
    }

    /// Creates a disposable that disposes `disposable` on its first `dispose()`.
    public init(_ disposable: any Disposable) {
        self.action = disposable.dispose
    }

    /// Runs the action on the first call; later calls do nothing.
    public func dispose() {
        guard state.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let action = self.action
        self.action = nil
        action?()
    }
}

extension AnyDisposable: @unchecked Sendable {}  // `action` is handed over by the atomic `state`.

/// A disposable made of other disposables, disposed together in the order they were added.
///
/// Adding to a composite that is already disposed disposes the new item at once.
public final class CompositeDisposable: Disposable {
    private let lock = _Lock.make()
    // Protected by lock. `nil` once disposed.
    private var items: [(id: UInt64, disposable: any Disposable)]? = []
    // Protected by lock.
    private var nextID: UInt64 = 0

    /// Whether `dispose()` has been called.
    public var isDisposed: Bool { lock.withLock { items == nil } }

    /// Creates a composite holding `disposables`.
    public init<S: Sequence>(_ disposables: S) where S.Element == any Disposable {
        for disposable in disposables { _ = add(disposable) }
    }

    /// Creates a composite holding the non-nil members of `disposables`.
    public convenience init<S: Sequence>(_ disposables: S) where S.Element == (any Disposable)? {
        self.init(disposables.compactMap { $0 })
    }

    /// Creates an empty composite.
    public convenience init() {
        self.init([any Disposable]())
    }

    /// Disposes every member, in the order added. Later calls do nothing.
    public func dispose() {
        let taken: [(id: UInt64, disposable: any Disposable)]? = lock.withLock {
            defer { items = nil }
            return items
        }
        for item in taken ?? [] { item.disposable.dispose() }
    }

    /// Adds `disposable` to the composite.
    ///
    /// - Returns: A disposable that removes `disposable` from the composite without disposing
    ///   it, or `nil` when `disposable` is `nil` or the composite was already disposed (in which
    ///   case `disposable` has just been disposed).
    @discardableResult
    public func add(_ disposable: (any Disposable)?) -> (any Disposable)? {
        guard let disposable else { return nil }
        let id: UInt64? = lock.withLock {
            guard items != nil else { return nil }
            nextID += 1
            items!.append((nextID, disposable))
            return nextID
        }
        guard let id else {
            disposable.dispose()
            return nil
        }
        return AnyDisposable { [weak self] in self?.remove(id) }
    }

    /// Adds a closure to run when the composite is disposed; see `add(_:)` for the result.
    @discardableResult
    public func add(_ action: @escaping () -> Void) -> (any Disposable)? {
        add(AnyDisposable(action))
    }

    private func remove(_ id: UInt64) {
        lock.withLock {
            if let index = items?.firstIndex(where: { $0.id == id }) { items!.remove(at: index) }
        }
    }

    /// Adds `rhs` to `lhs`; see `add(_:)`.
    @discardableResult
    public static func += (lhs: CompositeDisposable, rhs: (any Disposable)?) -> (any Disposable)? {
        lhs.add(rhs)
    }

    /// Adds a closure to `lhs`; see `add(_:)`.
    @discardableResult
    public static func += (lhs: CompositeDisposable, rhs: @escaping () -> Void) -> (any Disposable)? {
        lhs.add(rhs)
    }
}

extension CompositeDisposable: @unchecked Sendable {}  // All state is protected by `lock`.

/// A disposable holding one inner disposable at a time: replacing the inner disposes the old
/// one, and once the serial disposable is disposed, any inner set later is disposed at once.
public final class SerialDisposable: Disposable {
    private let lock = _Lock.make()
    // Protected by lock.
    private var current: (any Disposable)?
    // Protected by lock.
    private var disposed = false

    /// Whether `dispose()` has been called.
    public var isDisposed: Bool { lock.withLock { disposed } }

    /// The current inner disposable. Setting it disposes the previous one.
    public var inner: (any Disposable)? {
        get { lock.withLock { current } }
        set {
            let (old, isDisposed): ((any Disposable)?, Bool) = lock.withLock {
                if disposed { return (nil, true) }
                defer { current = newValue }
                return (current, false)
            }
            old?.dispose()
            if isDisposed { newValue?.dispose() }
        }
    }

    /// Creates a serial disposable, optionally with a first inner disposable.
    public init(_ disposable: (any Disposable)? = nil) {
        current = disposable
    }

    /// Disposes the current inner disposable and every one set later.
    public func dispose() {
        let old: (any Disposable)? = lock.withLock {
            if disposed { return nil }
            disposed = true
            defer { current = nil }
            return current
        }
        old?.dispose()
    }
}

extension SerialDisposable: @unchecked Sendable {}  // All state is protected by `lock`.

/// Owns a disposable and disposes it when released (when the scope holding it ends).
public final class ScopedDisposable<Inner: Disposable>: Disposable {
    /// The disposable that is disposed with this one.
    public let inner: Inner

    /// Whether the inner disposable has been disposed.
    public var isDisposed: Bool { inner.isDisposed }

    /// Wraps `disposable`, disposing it on `dispose()` or when this object is released.
    public init(_ disposable: Inner) {
        inner = disposable
    }

    deinit { inner.dispose() }

    /// Disposes the inner disposable.
    public func dispose() { inner.dispose() }
}

extension ScopedDisposable where Inner == AnyDisposable {
    /// Wraps any disposable, disposing it when this object is released.
    public convenience init(_ disposable: any Disposable) {
        self.init(AnyDisposable(disposable))
    }
}

extension ScopedDisposable where Inner == CompositeDisposable {
    /// Adds `rhs` to the inner composite; see `CompositeDisposable.add(_:)`.
    @discardableResult
    public static func += (lhs: ScopedDisposable<CompositeDisposable>, rhs: (any Disposable)?) -> (any Disposable)? {
        lhs.inner.add(rhs)
    }

    /// Adds a closure to the inner composite; see `CompositeDisposable.add(_:)`.
    @discardableResult
    public static func += (lhs: ScopedDisposable<CompositeDisposable>, rhs: @escaping () -> Void) -> (any Disposable)? {
        lhs.inner.add(rhs)
    }
}

extension ScopedDisposable where Inner == SerialDisposable {
    /// The inner serial disposable's current disposable.
    public var inner: (any Disposable)? {
        get { (self as ScopedDisposable<SerialDisposable>).inner.inner }
        set { (self as ScopedDisposable<SerialDisposable>).inner.inner = newValue }
    }
}

extension ScopedDisposable: @unchecked Sendable {}  // Immutable; the inner disposable is thread safe.

import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Represents how long an object or an operation lives. When it ends, everything attached to it
/// with `+=` or `observeEnded` is disposed or run, in the order attached.
///
/// A lifetime ends when its `Token` is disposed or released. Bind work to an object by storing
/// the token in that object: when the object goes away, the work stops.
///
/// - Note: A lifetime costs one object until something is attached to it; the first attachment
///   adds the list that holds them (one object, with its mutex inside), and each attachment is
///   one object, which is also the disposable that detaches it. (The module's own first
///   attachment, such as a producer run's interruption or an operator's observation of its
///   upstream, takes an inline slot instead; a producer run has a second one.) Checking
///   `hasEnded` is one atomic load. A
///   producer's run is itself a lifetime (see `SignalProducer.start(_:)`; a property's
///   producer started with closures, or an observer of closures, makes no run), which is why this
///   class is not `final`; it is not `open`, so only this module subclasses it.
public class Lifetime {
    /// The lifetime that holds the state, when this one was made with `init(_ token:)`.
    @usableFromInline let _target: Lifetime?
    /// Bit 0: ended. The other bits: the address of the observer list (`_LifetimeObservers`,
    /// retained by this lifetime until deinit), or zero while nothing was attached.
    @usableFromInline let _state = Synchronization.Atomic<UInt>(0)
    /// The first attachment, when the module could make it without the list (`_attachFirst`):
    /// the address of a retained `_LifetimeEndHandler`, or zero. Whoever exchanges it for zero
    /// runs it, so it runs once.
    @usableFromInline let _first = Synchronization.Atomic<UInt>(0)

    /// Whether the lifetime has ended.
    @inlinable
    public var hasEnded: Bool {
        // Not `(_target ?? self)`: that makes a strong reference (a retain and a release) on
        // every check, and a synchronous producer checks after each value.
        if let _target { return _target._state.load(ordering: .acquiring) & 1 != 0 }
        return _state.load(ordering: .acquiring) & 1 != 0
    }

    /// A signal that completes when the lifetime ends, or that is already completed.
    public var ended: Signal<Never, Never> {
        Signal { observer, _ in
            if self.observeEnded(observer.sendCompleted) == nil { observer.sendCompleted() }
        }
    }

    @usableFromInline
    init(_target: Lifetime?) {
        self._target = _target?._target ?? _target
    }

    /// Creates a lifetime that ends with `token`.
    public convenience init(_ token: Token) {
        self.init(_target: token.lifetime)
    }

    /// Creates a lifetime and the token that ends it.
    public static func make() -> (lifetime: Lifetime, token: Token) {
        let token = Token()
        return (token.lifetime, token)
    }

    /// A lifetime that has already ended.
    public static let empty: Lifetime = {
        let lifetime = Lifetime(_target: nil)
        lifetime._end()
        return lifetime
    }()

    deinit {
        // A lifetime released before it ended (a producer's run nobody disposed) ends now;
        // one made from a token leaves that to the token.
        if _target == nil { _end() }
        let bits = _state.load(ordering: .acquiring) & ~1
        if bits != 0 { Unmanaged<_LifetimeObservers>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release() }
    }

    /// Runs `action` when the lifetime ends; if it has already ended, runs it now.
    ///
    /// - Returns: A disposable that cancels the observation, or `nil` if the lifetime had
    ///   already ended.
    @discardableResult
    public func observeEnded(_ action: @escaping () -> Void) -> (any Disposable)? {
        (_target ?? self)._attach(.action(action))
    }

    /// Disposes `disposable` when the lifetime ends (at once if it has ended).
    @discardableResult
    public static func += (lifetime: Lifetime, disposable: (any Disposable)?) -> (any Disposable)? {
        guard let disposable else { return nil }
        return (lifetime._target ?? lifetime)._attach(.disposable(disposable))
    }

    /// Attaches `work` to the list, creating the list on first use; runs it now if ended.
    final func _attach(_ work: _LifetimeEntry.Work) -> (any Disposable)? {
        var state = _state.load(ordering: .acquiring)
        while true {
            if state & 1 != 0 {
                work.run()
                return nil
            }
            if state != 0 { break }
            let created = _LifetimeObservers.make()
            let bits = UInt(bitPattern: Unmanaged.passRetained(created).toOpaque())
            let (exchanged, current) = _state.compareExchange(
                expected: 0, desired: bits, ordering: .acquiringAndReleasing)
            if exchanged {
                state = bits
                break
            }
            Unmanaged.passUnretained(created).release()
            state = current
        }
        // The list lives as long as this lifetime, so an unretained reference is enough here.
        let observers = Unmanaged<_LifetimeObservers>.fromOpaque(UnsafeRawPointer(bitPattern: state & ~1)!)
        return observers._withUnsafeGuaranteedRef { $0.append(_LifetimeEntry(work, in: $0)) }
    }

    /// Runs `handler.lifetimeEnded()` when the lifetime ends, or now if it has ended. While
    /// nothing is attached to the list yet, this costs no allocation: the handler takes the
    /// lifetime's inline slot (a producer run's serializing input takes it), or a producer
    /// run's second one. It cannot be detached.
    @usableFromInline
    final func _attachFirst(_ handler: _LifetimeEndHandler) {
        let lifetime = _target ?? self
        if lifetime._state.load(ordering: .sequentiallyConsistent) == 0 {
            let bits = UInt(bitPattern: Unmanaged.passRetained(handler).toOpaque())
            if lifetime._first.compareExchange(expected: 0, desired: bits, ordering: .sequentiallyConsistent).exchanged
            {
                // Ended meanwhile: `_end` may have looked at the slot before we filled it. Only
                // this slot: another one's handler is the ender's to run.
                if lifetime._state.load(ordering: .sequentiallyConsistent) & 1 != 0 { Self._runSlot(lifetime._first) }
                return
            }
            // The second slot only once the first is taken, so that they run in the order filled.
            if lifetime._fillSecondSlot(bits) { return }
            Unmanaged.passUnretained(handler).release()
        }
        _ = lifetime._attach(.action { handler.lifetimeEnded() })
    }

    /// Disposes `disposable` when the lifetime ends, as `+=` does, in an inline slot when it is
    /// one of the module's `Disposable`s that are also `_LifetimeEndHandler`s (a signal core's
    /// observation, a `QueueScheduler` action) and a slot is free: for the module's attachments
    /// whose detaching disposable nobody keeps.
    @usableFromInline
    final func _attachDisposing(_ disposable: (any Disposable)?) {
        guard let disposable else { return }
        if let handler = disposable as? _LifetimeEndHandler { return _attachFirst(handler) }
        _ = (_target ?? self)._attach(.disposable(disposable))
    }

    /// Puts the retained handler at `bits` in a second inline slot, if the lifetime has one and
    /// it is free (a producer run's, see `_RunLifetime`), running it at once if the lifetime
    /// ended meanwhile. Plain lifetimes have none: they stay one word smaller.
    @usableFromInline
    func _fillSecondSlot(_ bits: UInt) -> Bool { false }

    /// Runs the handler in the second inline slot, if there is one; `_end` calls it after the
    /// first slot's.
    @usableFromInline
    func _runSecondSlot() {}

    /// Runs the handler in `slot`, if nobody has taken it yet.
    static func _runSlot(_ slot: borrowing Synchronization.Atomic<UInt>) {
        // A load first: most lifetimes never fill a slot, and a load is cheaper than the
        // exchange. Sequentially consistent with `_attachFirst`'s publish-then-check, so either
        // the load sees the handler or the attacher sees the end and runs it itself.
        guard slot.load(ordering: .sequentiallyConsistent) != 0 else { return }
        let bits = slot.exchange(0, ordering: .sequentiallyConsistent)
        guard bits != 0 else { return }
        Unmanaged<_LifetimeEndHandler>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeRetainedValue()
            .lifetimeEnded()
    }

    /// Ends the lifetime: runs what is attached, in order (the inline slots, which are only
    /// filled while nothing else is attached, first). Later calls do nothing.
    @usableFromInline
    final func _end() {
        let previous = _state.bitwiseOr(1, ordering: .sequentiallyConsistent).oldValue
        guard previous & 1 == 0 else { return }
        Self._runSlot(_first)
        _runSecondSlot()
        guard previous != 0 else { return }
        Unmanaged<_LifetimeObservers>.fromOpaque(UnsafeRawPointer(bitPattern: previous)!)
            ._withUnsafeGuaranteedRef { $0.end() }
    }

    /// Ends a lifetime when disposed or released.
    public final class Token {
        /// The lifetime this token ends.
        @usableFromInline let lifetime = Lifetime(_target: nil)

        /// Creates a token, and with it a lifetime that has not ended.
        public init() {}

        deinit { lifetime._end() }

        /// Ends the lifetime now.
        public func dispose() { lifetime._end() }
    }
}

// The state is atomic; the observer list is protected by its own mutex.
extension Lifetime: @unchecked Sendable {}
extension Lifetime.Token: @unchecked Sendable {}  // Immutable.

/// Something the module attaches to a lifetime with `_attachFirst`: an object whose
/// `lifetimeEnded()` runs when the lifetime ends. Subclasses override it. A subclass that is
/// also a `Disposable` (a signal core's observation, a `QueueScheduler` action) disposes itself
/// there: `Lifetime._attachDisposing` relies on it.
@usableFromInline
class _LifetimeEndHandler {
    @usableFromInline
    init() {}

    /// Called once, when the lifetime ends.
    @usableFromInline
    func lifetimeEnded() {}
}

/// Something attached to a lifetime, and the disposable that detaches it.
final class _LifetimeEntry: Disposable {
    enum Work {
        case action(() -> Void)
        case disposable(any Disposable)

        func run() {
            switch self {
            case let .action(action): action()
            case let .disposable(disposable): disposable.dispose()
            }
        }
    }

    // Written in init; afterwards read and cleared only by the caller that wins `claimed`, so
    // that a detached entry releases what its action captured at once.
    private var work: Work?
    /// Set by whoever runs or detaches the entry first.
    let claimed = Synchronization.Atomic<Bool>(false)
    /// Strong: the list outlives the entry's detaching. The cycle (list -> entry -> list) is
    /// broken when the entry is unlinked, by `dispose()` or by the lifetime's end.
    let observers: _LifetimeObservers
    // Protected by observers' mutex.
    var next: _LifetimeEntry?
    // Protected by observers' mutex.
    unowned(unsafe) var previous: _LifetimeEntry?

    init(_ work: Work, in observers: _LifetimeObservers) {
        self.work = work
        self.observers = observers
    }

    var isDisposed: Bool { claimed.load(ordering: .acquiring) }

    /// Detaches the entry; it will not run.
    func dispose() {
        guard claim() else { return }
        work = nil
        observers.remove(self)
    }

    /// Runs the work if this caller is the first to run or detach the entry.
    func runIfUnclaimed() {
        guard claim() else { return }
        let work = self.work
        self.work = nil
        work?.run()
    }

    /// Whether this caller is the first to run or detach the entry.
    private func claim() -> Bool {
        claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }
}

extension _LifetimeEntry: @unchecked Sendable {}  // Links are protected by the list's mutex.

/// A lifetime's attachments, oldest first, in a doubly linked list behind a mutex that lives in
/// the same allocation. The mutex is taken only to attach, detach and end, never to check
/// `hasEnded`.
final class _LifetimeObservers: ManagedBuffer<_LifetimeObservers.Header, pthread_mutex_t> {
    struct Header {
        var head: _LifetimeEntry?
        unowned(unsafe) var tail: _LifetimeEntry?
        var ended = false
    }

    static func make() -> _LifetimeObservers {
        let buffer = create(minimumCapacity: 1) { _ in Header() }
        let observers = unsafeDowncast(buffer, to: _LifetimeObservers.self)
        observers.withUnsafeMutablePointerToElements { mutex in
            let result = pthread_mutex_init(mutex, nil)
            _require(result == 0, "Lifetime: pthread_mutex_init failed with \(result)")
        }
        return observers
    }

    deinit {
        withUnsafeMutablePointerToElements { mutex in _ = pthread_mutex_destroy(mutex) }
    }

    private func locked<R>(_ body: (inout Header) -> R) -> R {
        withUnsafeMutablePointers { header, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return body(&header.pointee)
        }
    }

    /// Appends `entry`, or runs it now if the lifetime has ended; returns the entry as the
    /// disposable that detaches it, or `nil` if it ran.
    func append(_ entry: _LifetimeEntry) -> (any Disposable)? {
        let appended = locked { header -> Bool in
            guard !header.ended else { return false }
            entry.previous = header.tail
            if let tail = header.tail { tail.next = entry } else { header.head = entry }
            header.tail = entry
            return true
        }
        if appended { return entry }
        entry.runIfUnclaimed()
        return nil
    }

    func remove(_ entry: _LifetimeEntry) {
        locked { header in
            guard !header.ended else { return }
            let next = entry.next
            if let previous = entry.previous { previous.next = next } else { header.head = next }
            if let next { next.previous = entry.previous } else { header.tail = entry.previous }
            entry.next = nil
            entry.previous = nil
        }
    }

    /// Takes every entry and runs those not detached, oldest first.
    func end() {
        var entry = locked { header -> _LifetimeEntry? in
            header.ended = true
            header.tail = nil
            defer { header.head = nil }
            return header.head
        }
        while let current = entry {
            entry = current.next
            current.next = nil
            current.runIfUnclaimed()
        }
    }
}

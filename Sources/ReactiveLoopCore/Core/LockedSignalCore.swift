import Synchronization

/// The delivery algorithm behind the signals that `Signal.init(_:)` and `Signal.pipe()` create.
/// Both pass the same tests; `lockFree` is the product, `locked` is the reference it is measured
/// and differentially tested against. Properties and operators always use the lock-free core.
@_spi(Testing)
public enum _SignalCoreKind: UInt8, Sendable {
    /// Delivery ownership is taken with one compare-and-swap; observers are owned by the
    /// delivering thread, so an uncontended send takes no lock and allocates nothing.
    case lockFree = 0
    /// ReactiveSwift's shape: a send lock held for the delivery and a state lock taken on every
    /// event to read the observers.
    case locked = 1

    private static let storage = Synchronization.Atomic<UInt8>(0)

    /// The kind given to signals created from now on (tests and benchmarks switch it).
    public static var current: _SignalCoreKind {
        get { _SignalCoreKind(rawValue: storage.load(ordering: .relaxed)) ?? .lockFree }
        set { storage.store(newValue.rawValue, ordering: .relaxed) }
    }
}

/// Whether new signals get the `locked` reference core (see `_SignalCoreKind.current`).
@usableFromInline
func _SignalCoreKindUsesLocks() -> Bool {
    _SignalCoreKind.current == .locked
}

/// The reference core: ReactiveSwift's shape, kept to measure the lock-free core against and to
/// test it differentially. A send lock is held for the whole delivery, and every event reads the
/// observers under a state lock. It keeps the lock-free core's contracts: a reentrant send is
/// queued and delivered before the outermost send returns, an observer registered from inside a
/// delivery sees only what is sent after it, a disposed observer gets nothing more, and the
/// terminal event comes once. Unlike the lock-free core, a terminal event sent while another
/// thread delivers waits for that delivery. Its code is specialized in the client, as the
/// lock-free core's is, so that the two compare as algorithms.
@usableFromInline
final class _LockedSignalCore<Value, Error: Swift.Error> {
    @usableFromInline typealias Event = Signal<Value, Error>.Event
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer
    @usableFromInline typealias Subscription = _Subscription<Value, Error>

    @usableFromInline let sendLock = _Lock.make()
    @usableFromInline let stateLock = _Lock.make()
    /// The thread delivering, or 0.
    @usableFromInline let owner = Synchronization.Atomic<UInt>(0)
    // Confined to the delivering thread.
    @usableFromInline var queue: [_Queued<Value, Error>] = []
    // Protected by stateLock.
    @usableFromInline var observers: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var isTerminated = false
    // Protected by stateLock.
    @usableFromInline var isReferenced = true
    // Protected by stateLock.
    @usableFromInline var resources: (any Disposable)?

    @inlinable
    init() {}

    @inlinable
    func send(_ event: Event) {
        let me = _currentThreadID()
        if owner.load(ordering: .relaxed) == me {
            queue.append(.event(event))
            return
        }
        sendLock.lock()
        owner.store(me, ordering: .relaxed)
        deliver(event)
        var head = 0
        while head < queue.count {
            switch queue[head] {
            case let .event(event): deliver(event)
            case let .registration(subscription): activate(subscription)
            }
            head += 1
        }
        if !queue.isEmpty { queue.removeAll(keepingCapacity: true) }
        owner.store(0, ordering: .relaxed)
        sendLock.unlock()
    }

    @inlinable
    func deliver(_ event: Event) {
        stateLock.lock()
        let wasTerminated = isTerminated
        let observers = self.observers
        var resources: (any Disposable)?
        if event.isTerminating && !wasTerminated {
            isTerminated = true
            self.observers = []
            resources = self.resources
            self.resources = nil
        }
        stateLock.unlock()
        guard !wasTerminated else { return }
        for subscription in observers where !subscription.isDisposed {
            if case let .value(value) = event, subscription.takesValuesByShortcut {
                subscription.valueAction(value)
            } else {
                subscription.action(event)
            }
        }
        resources?.dispose()
    }

    @inlinable
    func activate(_ subscription: Subscription) {
        guard !subscription.isDisposed else { return }
        stateLock.lock()
        let accepted = !isTerminated
        if accepted { observers.append(subscription) }
        stateLock.unlock()
        if !accepted { subscription.action(.interrupted) }
    }

    @inlinable
    func observe(_ observer: Observer) -> (any Disposable)? {
        let subscription = Subscription(observer)
        if owner.load(ordering: .relaxed) == _currentThreadID() && !queue.isEmpty {
            // Behind the events queued before this call.
            queue.append(.registration(subscription))
        } else {
            stateLock.lock()
            let accepted = !isTerminated
            if accepted { observers.append(subscription) }
            stateLock.unlock()
            guard accepted else {
                observer.send(.interrupted)
                return nil
            }
        }
        return AnyDisposable { [weak self] in self?.remove(subscription) }
    }

    @inlinable
    func remove(_ subscription: Subscription) {
        subscription.markDisposed()
        stateLock.lock()
        observers.removeAll { $0 === subscription }
        let shouldEnd = observers.isEmpty && !isReferenced && !isTerminated
        stateLock.unlock()
        if shouldEnd { send(.interrupted) }
    }

    @inlinable
    func signalReleased() {
        stateLock.lock()
        isReferenced = false
        let shouldEnd = observers.isEmpty && !isTerminated
        stateLock.unlock()
        if shouldEnd { send(.interrupted) }
    }

    @inlinable
    func setResources(_ disposable: any Disposable) {
        stateLock.lock()
        let alreadyTerminated = isTerminated
        if !alreadyTerminated { resources = disposable }
        stateLock.unlock()
        if alreadyTerminated { disposable.dispose() }
    }

    /// An input observer whose events go to this core; it interrupts the signal if released
    /// before terminating it.
    @inlinable
    func makeInput() -> Observer {
        let input = Input(self)
        return Observer { event in input.core.send(event) }
    }

    /// Held by the input observer's action: interrupts the signal when the input is released.
    @usableFromInline
    final class Input {
        @usableFromInline let core: _LockedSignalCore

        @inlinable
        init(_ core: _LockedSignalCore) { self.core = core }

        deinit { core.send(.interrupted) }
    }
}

extension _LockedSignalCore: @unchecked Sendable {}  // See the type's documentation for what guards each field.

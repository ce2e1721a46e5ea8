import Synchronization

/// The delivery algorithm behind a signal. Both pass the same tests; `lockFree` is the product,
/// `locked` is the reference it is measured and differentially tested against.
@_spi(Testing)
public enum _SignalCoreKind: UInt8, Sendable {
    /// Delivery ownership is taken with one compare-and-swap; observers are owned by the
    /// delivering thread, so an uncontended send takes no lock and allocates nothing.
    case lockFree = 0
    /// ReactiveSwift's shape: a send lock held for the delivery and a state lock taken on every
    /// event to read the observers.
    case locked = 1

    private static let storage = Atomic<UInt8>(0)

    /// The kind given to signals created from now on (tests and benchmarks switch it).
    public static var current: _SignalCoreKind {
        get { _SignalCoreKind(rawValue: storage.load(ordering: .relaxed)) ?? .lockFree }
        set { storage.store(newValue.rawValue, ordering: .relaxed) }
    }
}

/// Serial, reentrancy-safe delivery of events to a set of observers.
///
/// ## How it works
/// Exactly one thread at a time owns delivery (`owner` holds its thread id). A sender takes
/// ownership with one CAS, delivers, and gives it back; that is the whole uncontended path.
/// - Reentrant sends (the owner sending again from inside a callout) are queued in `queue`
///   and delivered, in order, before the outermost `send` returns.
/// - Contended value sends wait on `stateLock`'s condition until ownership is free, so `send`
///   still returns only after its event was delivered.
/// - Contended terminal events are posted to the mailbox and delivered by the current owner
///   right after its current event; they never block, so disposing from any thread is safe.
/// - `observe` and disposal never touch the observer array directly: they post additions and
///   removals under `stateLock` and set a mailbox bit; the owner applies them before its next
///   event. If nobody owns delivery, the caller takes ownership and applies them itself.
///
/// The owner checks the mailbox (one atomic load) before each event and after giving
/// ownership back, so nothing posted is ever left behind.
@usableFromInline
final class _SignalCore<Value, Error: Swift.Error> {
    @usableFromInline typealias Event = Signal<Value, Error>.Event
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer

    /// One observer registration.
    @usableFromInline
    final class Subscription {
        @usableFromInline let observer: Observer
        @usableFromInline let isDisposed = Atomic<Bool>(false)

        @usableFromInline
        init(_ observer: Observer) { self.observer = observer }
    }

    @usableFromInline static var registrationsPending: Int { 1 }
    @usableFromInline static var terminalPosted: Int { 2 }
    @usableFromInline static var oneWaiter: Int { 4 }

    /// Thread id of the delivering thread, or 0.
    @usableFromInline let owner = Atomic<UInt>(0)
    /// Bit 0: registrations pending; bit 1: a terminal event posted; bits 2...: blocked senders.
    @usableFromInline let mailbox = Atomic<Int>(0)
    @usableFromInline let usesLocks: Bool
    /// Held for the whole delivery in the `locked` kind only.
    @usableFromInline let sendLock: _Lock?
    @usableFromInline let stateLock = _Lock()

    // Confined to the owner of delivery.
    @usableFromInline var observers: ContiguousArray<Subscription> = []
    // Confined to the owner of delivery.
    @usableFromInline var queue: ContiguousArray<Event> = []
    // Confined to the owner of delivery.
    @usableFromInline var queueHead = 0
    // Written by the owner while holding stateLock; read by the owner, or under stateLock.
    @usableFromInline var isTerminated = false

    // Protected by stateLock.
    @usableFromInline var pendingAdds: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var pendingRemovals: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var postedTerminal: Event?
    // Protected by stateLock.
    @usableFromInline var observerCount = 0
    // Protected by stateLock. False once the `Signal` object was released.
    @usableFromInline var isReferenced = true
    // Protected by stateLock. Disposed after the terminal event was delivered.
    @usableFromInline var resources: (any Disposable)?

    /// A core of the kind selected by `_SignalCoreKind.current` (lock-free unless a test or
    /// benchmark selected the reference core).
    @usableFromInline
    convenience init() {
        self.init(kind: .current)
    }

    init(kind: _SignalCoreKind) {
        usesLocks = kind == .locked
        sendLock = usesLocks ? _Lock() : nil
    }

    // MARK: Sending

    /// Delivers `event` to every observer, or queues it if the calling thread is delivering.
    @inlinable
    func send(_ event: Event) {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) {
            deliver(event)
            release(me)
        } else {
            sendSlow(event, me)
        }
    }

    @usableFromInline
    func sendSlow(_ event: Event, _ me: UInt) {
        if owner.load(ordering: .relaxed) == me {
            enqueue(event)
        } else if event.isTerminating && !usesLocks {
            post(event, me)
        } else {
            acquireBlocking(me)
            deliver(event)
            release(me)
        }
    }

    /// Takes delivery ownership for an update that must be ordered with its own delivery
    /// (`MutableProperty`). Returns `false` when the calling thread already owns delivery.
    @inlinable
    func beginExclusive() -> Bool {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) { return true }
        if owner.load(ordering: .relaxed) == me { return false }
        acquireBlocking(me)
        return true
    }

    /// Ends what `beginExclusive()` began, delivering (or, when reentrant, queueing) `event`.
    @inlinable
    func endExclusive(delivering event: Event?, owned: Bool) {
        if owned {
            if let event { deliver(event) }
            release(_currentThreadID())
        } else if let event {
            enqueue(event)
        }
    }

    @inlinable
    func tryAcquire(_ me: UInt) -> Bool {
        if _slowPath(usesLocks) {
            guard sendLock.unsafelyUnwrapped.tryLock() else { return false }
            owner.store(me, ordering: .relaxed)
            return true
        }
        return owner.compareExchange(expected: 0, desired: me, ordering: .acquiring).exchanged
    }

    @usableFromInline
    func acquireBlocking(_ me: UInt) {
        if usesLocks {
            sendLock.unsafelyUnwrapped.lock()
            owner.store(me, ordering: .relaxed)
            return
        }
        stateLock.lock()
        mailbox.wrappingAdd(Self.oneWaiter, ordering: .sequentiallyConsistent)
        while !owner.compareExchange(expected: 0, desired: me, ordering: .sequentiallyConsistent).exchanged {
            stateLock.wait()
        }
        mailbox.wrappingSubtract(Self.oneWaiter, ordering: .sequentiallyConsistent)
        stateLock.unlock()
    }

    /// Gives ownership back after draining the reentrant queue, then serves the mailbox.
    @inlinable
    func release(_ me: UInt) {
        while true {
            if _slowPath(queueHead < queue.count) { drainQueue() }
            if _slowPath(usesLocks) {
                owner.store(0, ordering: .relaxed)
                sendLock.unsafelyUnwrapped.unlock()
                return
            }
            owner.store(0, ordering: .sequentiallyConsistent)
            let mail = mailbox.load(ordering: .sequentiallyConsistent)
            if _fastPath(mail == 0) { return }
            guard serveMailboxAfterRelease(mail, me) else { return }
        }
    }

    /// Wakes blocked senders and, if work was posted, takes ownership back to do it.
    /// Returns `true` if the caller owns delivery again and must release it again.
    @usableFromInline
    func serveMailboxAfterRelease(_ mail: Int, _ me: UInt) -> Bool {
        if mail >= Self.oneWaiter {
            stateLock.withLock { stateLock.broadcast() }
        }
        guard mail & (Self.registrationsPending | Self.terminalPosted) != 0, tryAcquire(me) else { return false }
        processMailbox()
        return true
    }

    @usableFromInline
    func post(_ event: Event, _ me: UInt) {
        stateLock.withLock {
            if postedTerminal == nil && !isTerminated {
                postedTerminal = event
                mailbox.bitwiseOr(Self.terminalPosted, ordering: .sequentiallyConsistent)
            }
        }
        // If the owner released before seeing the post, deliver it ourselves.
        if tryAcquire(me) {
            processMailbox()
            release(me)
        }
    }

    @usableFromInline
    func enqueue(_ event: Event) {
        queue.append(event)
    }

    @usableFromInline
    func drainQueue() {
        while queueHead < queue.count {
            let event = queue[queueHead]
            queueHead += 1
            deliver(event)
        }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
    }

    // MARK: Delivering (owner only)

    @inlinable
    func deliver(_ event: Event) {
        if _slowPath(usesLocks || mailbox.load(ordering: .acquiring) & 3 != 0) { processMailbox() }
        if _slowPath(isTerminated) { return }
        guard case .value = event else {
            deliverTerminal(event)
            return
        }
        for subscription in observers where !subscription.isDisposed.load(ordering: .relaxed) {
            subscription.observer.action(event)
        }
    }

    /// Applies posted registrations and delivers a posted terminal event.
    @usableFromInline
    func processMailbox() {
        stateLock.lock()
        let (adds, removals, terminal) = takePostedLocked()
        stateLock.unlock()
        apply(adds, removals)
        if let terminal { deliverTerminal(terminal) }
    }

    // Requires stateLock.
    @usableFromInline
    func takePostedLocked() -> ([Subscription], [Subscription], Event?) {
        defer {
            pendingAdds = []
            pendingRemovals = []
            postedTerminal = nil
            mailbox.bitwiseAnd(~(Self.registrationsPending | Self.terminalPosted), ordering: .sequentiallyConsistent)
        }
        return (pendingAdds, pendingRemovals, postedTerminal)
    }

    @usableFromInline
    func apply(_ adds: [Subscription], _ removals: [Subscription]) {
        if !removals.isEmpty {
            observers.removeAll { subscription in removals.contains { $0 === subscription } }
        }
        observers.append(contentsOf: adds)
    }

    @usableFromInline
    func deliverTerminal(_ event: Event) {
        guard !isTerminated else { return }
        stateLock.lock()
        isTerminated = true
        let (adds, removals, _) = takePostedLocked()
        observerCount = 0
        let resources = self.resources
        self.resources = nil
        stateLock.unlock()

        apply(adds, removals)
        let finalObservers = observers
        observers = []
        for subscription in finalObservers where !subscription.isDisposed.load(ordering: .relaxed) {
            subscription.observer.action(event)
        }
        resources?.dispose()
    }

    // MARK: Observers

    /// Registers `observer`; it sees events sent after this call (if this call happens during
    /// a delivery on the delivering thread, from the next event on).
    ///
    /// - Returns: A disposable that unregisters it, or `nil` if the signal had terminated, in
    ///   which case `observer` has just received `interrupted`.
    @usableFromInline
    func observe(_ observer: Observer) -> (any Disposable)? {
        let subscription = Subscription(observer)
        let accepted: Bool = stateLock.withLock {
            if isTerminated { return false }
            pendingAdds.append(subscription)
            observerCount += 1
            mailbox.bitwiseOr(Self.registrationsPending, ordering: .sequentiallyConsistent)
            return true
        }
        guard accepted else {
            observer.sendInterrupted()
            return nil
        }
        applyIfIdle()
        return AnyDisposable { [weak self] in self?.remove(subscription) }
    }

    @usableFromInline
    func remove(_ subscription: Subscription) {
        subscription.isDisposed.store(true, ordering: .releasing)
        let shouldEnd: Bool = stateLock.withLock {
            if isTerminated { return false }
            if let index = pendingAdds.firstIndex(where: { $0 === subscription }) {
                pendingAdds.remove(at: index)
            } else {
                pendingRemovals.append(subscription)
                mailbox.bitwiseOr(Self.registrationsPending, ordering: .sequentiallyConsistent)
            }
            observerCount -= 1
            return observerCount == 0 && !isReferenced
        }
        applyIfIdle()
        if shouldEnd { send(.interrupted) }
    }

    @usableFromInline
    func applyIfIdle() {
        let me = _currentThreadID()
        if tryAcquire(me) {
            processMailbox()
            release(me)
        }
    }

    /// The `Signal` object went away: with no observers left, nobody can ever see an event, so
    /// end the signal and release the generator's resources.
    @usableFromInline
    func signalReleased() {
        let shouldEnd: Bool = stateLock.withLock {
            isReferenced = false
            return observerCount == 0 && !isTerminated
        }
        if shouldEnd { send(.interrupted) }
    }

    /// Attaches resources that are disposed right after the terminal event is delivered.
    @usableFromInline
    func setResources(_ disposable: any Disposable) {
        let alreadyTerminated: Bool = stateLock.withLock {
            if isTerminated { return true }
            resources = disposable
            return false
        }
        if alreadyTerminated { disposable.dispose() }
    }

    /// An input observer whose events go to this core; it interrupts the signal if released
    /// before terminating it.
    @inlinable
    func makeInput() -> Observer {
        Observer(action: { [self] event in self.send(event) }, interruptsOnDeinit: true)
    }
}

extension _SignalCore: @unchecked Sendable {}  // See the type's documentation for what guards each field.

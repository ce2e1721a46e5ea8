import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

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

    private static let storage = Synchronization.Atomic<UInt8>(0)

    /// The kind given to signals created from now on (tests and benchmarks switch it).
    public static var current: _SignalCoreKind {
        get { _SignalCoreKind(rawValue: storage.load(ordering: .relaxed)) ?? .lockFree }
        set { storage.store(newValue.rawValue, ordering: .relaxed) }
    }
}

/// Whether new signal cores are of the `locked` kind (see `_SignalCoreKind.current`).
@usableFromInline
func _SignalCoreKindUsesLocks() -> Bool {
    _SignalCoreKind.current == .locked
}

/// Serial, reentrancy-safe delivery of events to a set of observers.
///
/// ## How it works
/// Exactly one thread at a time owns delivery. `state` holds the owner (its thread id, shifted
/// left by 5) and five flags in its low bits. A sender takes ownership with one CAS
/// (`0 -> owner`), delivers, and gives ownership back with one CAS (`owner -> 0`); that is the
/// whole uncontended path. The release CAS fails only if somebody raised a flag meanwhile, and
/// then the owner deals with it before leaving:
/// - Reentrant sends (the owner sending again from inside a callout) are queued in `queue`
///   (raising `flagQueued`) and delivered, in order, before the outermost `send` returns.
/// - Contended value sends raise `flagWaiters` and wait on `stateLock`'s condition until
///   ownership is free, so `send` still returns only after its event was delivered.
/// - Contended terminal events are posted (`flagTerminal`) and delivered by the current owner
///   right after its current event; they never block, so disposing from any thread is safe.
/// - `observe` and disposal never touch the observer array directly: they post additions and
///   removals under `stateLock` and raise `flagRegistrations`; the owner applies them before
///   its next event. If nobody owns delivery, the caller takes ownership and applies them.
///
/// The fast paths (one compare-and-swap to take ownership, one to give it back) are inlined
/// into the sender; everything else is out of line, but still `@inlinable` so that it runs
/// specialized in the client (unspecialized, a slow path pays generic metadata lookups). The
/// reference (`locked`) core branches to its locks before either CAS, and keeps
/// `flagReference` raised for its whole life so that a delivery's single flag check also routes
/// it to its locked read of the observer state.
@usableFromInline
final class _SignalCore<Value, Error: Swift.Error> {
    @usableFromInline typealias Event = Signal<Value, Error>.Event
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer

    /// One observer registration.
    @usableFromInline
    final class Subscription {
        /// The observer's action, held directly to save a hop on every event.
        @usableFromInline let action: Observer.Action
        /// The observer's `valueAction`, if it has one (then it receives values instead of
        /// `action`); else a closure never called. Not optional: calling an optional closure
        /// stored in a class copies and retains it, on every value.
        @usableFromInline let valueAction: (Value) -> Void
        @usableFromInline let hasValueShortcut: Bool
        @usableFromInline let observer: Observer
        @usableFromInline let isDisposed = Synchronization.Atomic<Bool>(false)

        @usableFromInline
        init(_ observer: Observer) {
            self.observer = observer
            self.action = observer.action
            if let valueAction = observer.valueAction {
                self.valueAction = valueAction
                self.hasValueShortcut = true
            } else {
                self.valueAction = { _ in }
                self.hasValueShortcut = false
            }
        }
    }

    @usableFromInline static var flagRegistrations: UInt { 1 }
    @usableFromInline static var flagTerminal: UInt { 2 }
    @usableFromInline static var flagWaiters: UInt { 4 }
    /// Always raised in the `locked` reference core, never in the lock-free one.
    @usableFromInline static var flagReference: UInt { 8 }
    /// Raised by the owner when it queues a reentrant event, so that the release CAS fails and
    /// the slow path drains the queue: the fast path never looks at the queue itself.
    @usableFromInline static var flagQueued: UInt { 16 }
    @usableFromInline static var flags: UInt { 31 }
    /// The flags a delivery must look at before calling out.
    @usableFromInline static var flagsBeforeDelivery: UInt { flagRegistrations | flagTerminal | flagReference }

    /// The owner of delivery (`ownerBits(threadID)`, or 0) and the flags.
    @usableFromInline let state = Synchronization.Atomic<UInt>(0)
    @usableFromInline let usesLocks: Bool
    /// Held for the whole delivery in the `locked` kind only.
    @usableFromInline let sendLock: _Lock?
    @usableFromInline let stateLock = _Lock(withCondition: true)

    /// What waits in the reentrant queue: an event, or an observer registered from inside a
    /// delivery while events were queued, which must see only the events queued after it.
    @usableFromInline
    enum Queued {
        case event(Event)
        case registration(Subscription)
    }

    /// What the owner of delivery works with on every event.
    @usableFromInline
    struct DeliveryState {
        // Confined to the owner of delivery. Owns the subscriptions; change it with `set(_:)`.
        @usableFromInline private(set) var observers: ContiguousArray<Subscription> = []
        // Confined to the owner of delivery. The same subscriptions in a plain buffer, iterated
        // on every event with no retain of the buffer or of a subscription (`observers` keeps
        // them alive). Only `set(_:)` replaces it, and it never runs during a callout: changes
        // are applied by the owner before or after an event, never in the middle of one.
        @usableFromInline private(set) var callouts: UnsafeMutablePointer<Unmanaged<Subscription>>?
        @usableFromInline private(set) var calloutCount = 0

        @inlinable
        mutating func set(_ newObservers: ContiguousArray<Subscription>) {
            observers = newObservers
            callouts?.deallocate()
            callouts = nil
            calloutCount = newObservers.count
            guard !newObservers.isEmpty else { return }
            let buffer = UnsafeMutablePointer<Unmanaged<Subscription>>.allocate(capacity: newObservers.count)
            for (index, subscription) in newObservers.enumerated() {
                (buffer + index).initialize(to: .passUnretained(subscription))
            }
            callouts = buffer
        }
        // Confined to the owner of delivery. Reentrant events, and observers registered
        // reentrantly behind them, oldest first from `queueHead`.
        @usableFromInline var queue: ContiguousArray<Queued> = []
        // Confined to the owner of delivery.
        @usableFromInline var queueHead = 0
        // Written by the owner while holding stateLock; read by the owner, or under stateLock.
        @usableFromInline var isTerminated = false

        @usableFromInline init() {}
    }

    /// The delivery state lives behind a pointer allocated once per core: a class's stored
    /// `var` costs a dynamic exclusivity check on every access, several per send, while the
    /// ownership protocol already guarantees exclusive access.
    @usableFromInline let delivery: UnsafeMutablePointer<DeliveryState>

    // Protected by stateLock.
    @usableFromInline var pendingAdds: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var pendingRemovals: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var postedTerminal: Event?
    // Protected by stateLock.
    @usableFromInline var waiterCount = 0
    // Protected by stateLock.
    @usableFromInline var observerCount = 0
    // Protected by stateLock. False once the `Signal` object was released.
    @usableFromInline var isReferenced = true
    // Protected by stateLock. Disposed after the terminal event was delivered.
    @usableFromInline var resources: (any Disposable)?
    // Protected by stateLock. Debug builds report a long wait once per signal.
    @usableFromInline var didReportLongWait = false

    /// A core of the kind selected by `_SignalCoreKind.current` (lock-free unless a test or
    /// benchmark selected the reference core).
    @inlinable
    convenience init() {
        self.init(usesLocks: _SignalCoreKindUsesLocks())
    }

    convenience init(kind: _SignalCoreKind) {
        self.init(usesLocks: kind == .locked)
    }

    /// Specialized in the client: a generic class's initializer run unspecialized looks up
    /// the metadata of every generic type it touches, on every signal or producer start.
    @inlinable
    init(usesLocks: Bool) {
        self.usesLocks = usesLocks
        sendLock = usesLocks ? _Lock() : nil
        delivery = .allocate(capacity: 1)
        delivery.initialize(to: DeliveryState())
        if usesLocks { state.store(Self.flagReference, ordering: .relaxed) }
    }

    deinit {
        delivery.pointee.set([])
        delivery.deinitialize(count: 1)
        delivery.deallocate()
    }

    // MARK: Ownership

    /// The owner value of thread `me` (thread ids are pointers, far below 2^59).
    @inlinable
    static func ownerBits(_ me: UInt) -> UInt { me &<< 5 }

    @inlinable
    func isOwner(_ me: UInt) -> Bool {
        state.load(ordering: .relaxed) & ~Self.flags == Self.ownerBits(me)
    }

    /// Debug builds: stops unless the calling thread owns delivery, which the delivery state
    /// (observers, queue, termination) is confined to.
    @inlinable
    func assertOwner(_ operation: StaticString) {
        assert(isOwner(_currentThreadID()), "_SignalCore.\(operation): the calling thread does not own delivery")
    }

    /// Takes ownership if nobody has it. The fast path is one compare-and-swap, inlined into
    /// the sender; anything else (a raised flag, the reference core) goes out of line.
    @inlinable @inline(__always)
    func tryAcquire(_ me: UInt) -> Bool {
        if _fastPath(
            !usesLocks
                && state.compareExchange(expected: 0, desired: Self.ownerBits(me), ordering: .acquiring).exchanged)
        {
            return true
        }
        return tryAcquireSlow(me)
    }

    @inlinable @inline(never)
    func tryAcquireSlow(_ me: UInt) -> Bool {
        if usesLocks {
            guard sendLock.unsafelyUnwrapped.tryLock() else { return false }
            state.bitwiseOr(Self.ownerBits(me), ordering: .sequentiallyConsistent)
            return true
        }
        return tryAcquireWithFlags(me)
    }

    /// Takes ownership if nobody has it, keeping whatever flags are raised.
    @inlinable @inline(never)
    func tryAcquireWithFlags(_ me: UInt) -> Bool {
        var current = state.load(ordering: .relaxed)
        while current & ~Self.flags == 0 {
            let (exchanged, original) = state.compareExchange(
                expected: current, desired: current | Self.ownerBits(me), ordering: .sequentiallyConsistent)
            if exchanged { return true }
            current = original
        }
        return false
    }

    @inlinable @inline(never)
    func acquireBlocking(_ me: UInt) {
        if usesLocks {
            sendLock.unsafelyUnwrapped.lock()
            state.bitwiseOr(Self.ownerBits(me), ordering: .sequentiallyConsistent)
            return
        }
        stateLock.lock()
        waiterCount += 1
        state.bitwiseOr(Self.flagWaiters, ordering: .sequentiallyConsistent)
        // The owner's release sees the flag, so it broadcasts after we wait: no lost wakeup.
        while !tryAcquireWithFlags(me) {
            #if DEBUG
                if !stateLock.wait(seconds: _ContentionReport.seconds) { reportLongWaitLocked(me) }
            #else
                stateLock.wait()
            #endif
        }
        waiterCount -= 1
        if waiterCount == 0 { state.bitwiseAnd(~Self.flagWaiters, ordering: .sequentiallyConsistent) }
        stateLock.unlock()
    }

    /// Debug builds: a send has waited `_ContentionReport.seconds` for another thread's
    /// delivery. Says once per signal what it waits on: if that delivery waits for this thread,
    /// the two are deadlocked (see "A send that waits for its own delivery" in APIContracts.md).
    /// Requires stateLock.
    @usableFromInline
    func reportLongWaitLocked(_ me: UInt) {
        guard !didReportLongWait else { return }
        didReportLongWait = true
        let owner = (state.load(ordering: .relaxed) & ~Self.flags) >> 5
        let hex = { (id: UInt) in "0x" + String(id, radix: 16) }
        _ContentionReport.report(
            "ReactiveLoop: a send on thread \(hex(me)) has waited \(_ContentionReport.seconds) s for a delivery of "
                + "Signal<\(Value.self), \(Error.self)> running on thread \(hex(owner)). If that delivery waits for "
                + "this thread, they are deadlocked: see \"A send that waits for its own delivery deadlocks\" in "
                + "docs/APIContracts.md.")
    }

    /// Gives ownership back after draining the reentrant queue and anything flagged. The fast
    /// path (no flag raised, so nothing queued either) is one compare-and-swap, inlined into the
    /// sender.
    @inlinable @inline(__always)
    func release(_ me: UInt) {
        if _fastPath(
            !usesLocks
                && state.compareExchange(expected: Self.ownerBits(me), desired: 0, ordering: .releasing).exchanged)
        {
            return
        }
        releaseSlow(me)
    }

    @inlinable @inline(never)
    func releaseSlow(_ me: UInt) {
        while true {
            if delivery.pointee.queueHead < delivery.pointee.queue.count { drainQueue() }
            // Only the owner queues, so with the queue drained the flag can be lowered.
            if state.load(ordering: .relaxed) & Self.flagQueued != 0 {
                state.bitwiseAnd(~Self.flagQueued, ordering: .relaxed)
            }
            if usesLocks {
                state.bitwiseAnd(Self.flags, ordering: .sequentiallyConsistent)
                sendLock.unsafelyUnwrapped.unlock()
                return
            }
            if state.compareExchange(expected: Self.ownerBits(me), desired: 0, ordering: .releasing).exchanged {
                return
            }
            guard releaseWithFlags(me) else { return }
        }
    }

    /// Handles raised flags at release. Returns `true` if the caller still owns delivery and
    /// must try to release again.
    @inlinable @inline(never)
    func releaseWithFlags(_ me: UInt) -> Bool {
        if state.load(ordering: .acquiring) & (Self.flagRegistrations | Self.flagTerminal) != 0 {
            processMailbox()
            return true
        }
        // Only waiters: give ownership up, keeping the flags, and wake them.
        let after = state.bitwiseAnd(Self.flags, ordering: .sequentiallyConsistent).newValue
        stateLock.withLock { stateLock.broadcast() }
        // Something posted between our check and the release: take it back if still free.
        if after & (Self.flagRegistrations | Self.flagTerminal) != 0 && tryAcquire(me) {
            processMailbox()
            return true
        }
        return false
    }

    // MARK: Sending

    /// Delivers `event` to every observer, or queues it if the calling thread is delivering.
    @inlinable @inline(__always)
    func send(_ event: Event) {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) {
            deliver(event)
            release(me)
        } else {
            sendSlow(event, me)
        }
    }

    @inlinable @inline(never)
    func sendSlow(_ event: Event, _ me: UInt) {
        if isOwner(me) {
            enqueue(event)
        } else if event.isTerminating && !usesLocks {
            post(event, me)
        } else {
            acquireBlocking(me)
            deliver(event)
            release(me)
        }
    }

    /// What `beginExclusive()` hands to `endExclusive`: whether this call took ownership
    /// (`false` when the calling thread already delivers), and the thread's id, read once.
    @usableFromInline
    struct Exclusive {
        @usableFromInline let owned: Bool
        @usableFromInline let me: UInt

        @inlinable
        init(owned: Bool, me: UInt) {
            self.owned = owned
            self.me = me
        }
    }

    /// Takes delivery ownership for an update that must be ordered with its own delivery
    /// (`MutableProperty`, stateful operators). Does not take it when the calling thread
    /// already owns delivery (a reentrant update).
    @inlinable
    func beginExclusive() -> Exclusive {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) { return Exclusive(owned: true, me: me) }
        if isOwner(me) { return Exclusive(owned: false, me: me) }
        acquireBlocking(me)
        return Exclusive(owned: true, me: me)
    }

    /// Ends what `beginExclusive()` began, delivering (or, when reentrant, queueing) `event`.
    @inlinable
    func endExclusive(delivering event: Event?, owned exclusive: Exclusive) {
        if exclusive.owned {
            if let event { deliver(event) }
            release(exclusive.me)
        } else if let event {
            enqueue(event)
        }
    }

    @inlinable
    func post(_ event: Event, _ me: UInt) {
        stateLock.withLock {
            if postedTerminal == nil && !delivery.pointee.isTerminated {
                postedTerminal = event
                state.bitwiseOr(Self.flagTerminal, ordering: .sequentiallyConsistent)
            }
        }
        // If the owner released before seeing the post, deliver it ourselves.
        if tryAcquire(me) {
            processMailbox()
            release(me)
        }
    }

    @inlinable
    func enqueue(_ event: Event) {
        assertOwner("enqueue")
        delivery.pointee.queue.append(.event(event))
        state.bitwiseOr(Self.flagQueued, ordering: .relaxed)
    }

    @inlinable
    func drainQueue() {
        assertOwner("drainQueue")
        while delivery.pointee.queueHead < delivery.pointee.queue.count {
            let queued = delivery.pointee.queue[delivery.pointee.queueHead]
            delivery.pointee.queueHead += 1
            switch queued {
            case let .event(event):
                deliver(event)
            case let .registration(subscription):
                guard !subscription.isDisposed.load(ordering: .relaxed) else { continue }
                if delivery.pointee.isTerminated {
                    subscription.observer.action(.interrupted)
                } else {
                    apply([subscription], [])
                }
            }
        }
        assert(delivery.pointee.queueHead == delivery.pointee.queue.count, "_SignalCore.drainQueue: queue not drained")
        delivery.pointee.queue.removeAll(keepingCapacity: true)
        delivery.pointee.queueHead = 0
    }

    // MARK: Delivering (owner only)

    @inlinable @inline(__always)
    func deliver(_ event: Event) {
        assertOwner("deliver")
        if _slowPath(state.load(ordering: .acquiring) & Self.flagsBeforeDelivery != 0) { prepareDelivery() }
        if _slowPath(delivery.pointee.isTerminated) { return }
        guard case let .value(value) = event else {
            deliverTerminal(event)
            return
        }
        let callouts = delivery.pointee.callouts
        let count = delivery.pointee.calloutCount
        var index = 0
        while index < count {
            callouts.unsafelyUnwrapped[index]._withUnsafeGuaranteedRef { subscription in
                if !subscription.isDisposed.load(ordering: .relaxed) {
                    if subscription.hasValueShortcut {
                        subscription.valueAction(value)
                    } else {
                        subscription.action(event)
                    }
                }
            }
            index &+= 1
        }
    }

    /// Applies what was posted before a delivery calls out.
    @inlinable @inline(never)
    func prepareDelivery() {
        if usesLocks {
            // The reference core reads its observer state under the state lock on every
            // event, as ReactiveSwift does.
            stateLock.lock()
            let flags = state.load(ordering: .relaxed)
            stateLock.unlock()
            if flags & (Self.flagRegistrations | Self.flagTerminal) != 0 { processMailbox() }
        } else {
            processMailbox()
        }
    }

    /// Applies posted registrations and delivers a posted terminal event.
    @inlinable
    func processMailbox() {
        stateLock.lock()
        let (adds, removals, terminal) = takePostedLocked()
        stateLock.unlock()
        apply(adds, removals)
        if let terminal { deliverTerminal(terminal) }
    }

    // Requires stateLock.
    @inlinable
    func takePostedLocked() -> ([Subscription], [Subscription], Event?) {
        defer {
            pendingAdds = []
            pendingRemovals = []
            postedTerminal = nil
            state.bitwiseAnd(~(Self.flagRegistrations | Self.flagTerminal), ordering: .sequentiallyConsistent)
        }
        return (pendingAdds, pendingRemovals, postedTerminal)
    }

    @inlinable
    func apply(_ adds: [Subscription], _ removals: [Subscription]) {
        assertOwner("apply")
        // Only touch `observers` when something changed: every change rebuilds `unretained`.
        guard !adds.isEmpty || !removals.isEmpty else { return }
        var observers = delivery.pointee.observers
        if !removals.isEmpty {
            observers.removeAll { subscription in removals.contains { $0 === subscription } }
        }
        observers.append(contentsOf: adds)
        delivery.pointee.set(observers)
    }

    @inlinable
    func deliverTerminal(_ event: Event) {
        guard !delivery.pointee.isTerminated else { return }
        stateLock.lock()
        delivery.pointee.isTerminated = true
        let (adds, removals, _) = takePostedLocked()
        observerCount = 0
        let resources = self.resources
        self.resources = nil
        stateLock.unlock()

        apply(adds, removals)
        let finalObservers = delivery.pointee.observers
        delivery.pointee.set([])
        for subscription in finalObservers where !subscription.isDisposed.load(ordering: .relaxed) {
            subscription.observer.action(event)
        }
        resources?.dispose()
    }

    // MARK: Observers

    /// Registers `observer`; it sees events sent after this call. Called from inside a delivery
    /// on the delivering thread, it sees the events sent from then on, and none of those queued
    /// before it (they were sent before this call).
    ///
    /// - Returns: A disposable that unregisters it, or `nil` if the signal had terminated, in
    ///   which case `observer` has just received `interrupted`.
    @inlinable
    func observe(_ observer: Observer) -> (any Disposable)? {
        observe(observer, ifTerminated: .interrupted)
    }

    /// Registers `observer`, or sends it `rejection` if the signal had terminated (a property's
    /// producer completes there, as its signal did).
    @inlinable
    func observe(_ observer: Observer, ifTerminated rejection: Event) -> (any Disposable)? {
        let subscription = Subscription(observer)
        // From inside a delivery with events queued: take a place in the queue behind them.
        // (The queue is read only once ownership is known.)
        let behindQueued =
            isOwner(_currentThreadID()) && delivery.pointee.queueHead < delivery.pointee.queue.count
        let accepted: Bool = stateLock.withLock {
            if delivery.pointee.isTerminated { return false }
            observerCount += 1
            if !behindQueued {
                pendingAdds.append(subscription)
                state.bitwiseOr(Self.flagRegistrations, ordering: .sequentiallyConsistent)
            }
            return true
        }
        if accepted && behindQueued {
            delivery.pointee.queue.append(.registration(subscription))
            return AnyDisposable { [weak self] in self?.remove(subscription) }
        }
        guard accepted else {
            observer.send(rejection)
            return nil
        }
        applyIfIdle()
        return AnyDisposable { [weak self] in self?.remove(subscription) }
    }

    /// Registers the one observer of a core that no other thread can see yet (a producer run's
    /// downstream observer): no lock, no pending registration, no disposable, since it stays
    /// until the core terminates.
    @inlinable
    func attachSole(_ observer: Observer) {
        observerCount = 1
        delivery.pointee.set([Subscription(observer)])
    }

    @inlinable
    func remove(_ subscription: Subscription) {
        subscription.isDisposed.store(true, ordering: .releasing)
        let shouldEnd: Bool = stateLock.withLock {
            if delivery.pointee.isTerminated { return false }
            if let index = pendingAdds.firstIndex(where: { $0 === subscription }) {
                pendingAdds.remove(at: index)
            } else {
                pendingRemovals.append(subscription)
                state.bitwiseOr(Self.flagRegistrations, ordering: .sequentiallyConsistent)
            }
            observerCount -= 1
            return observerCount == 0 && !isReferenced
        }
        applyIfIdle()
        if shouldEnd { send(.interrupted) }
    }

    @inlinable
    func applyIfIdle() {
        let me = _currentThreadID()
        if tryAcquire(me) {
            processMailbox()
            release(me)
        }
    }

    /// The `Signal` object went away: with no observers left, nobody can ever see an event, so
    /// end the signal and release the generator's resources.
    @inlinable
    func signalReleased() {
        let shouldEnd: Bool = stateLock.withLock {
            isReferenced = false
            return observerCount == 0 && !delivery.pointee.isTerminated
        }
        if shouldEnd { send(.interrupted) }
    }

    /// Whether the terminal event has been delivered (from any thread).
    @inlinable
    var hasTerminated: Bool {
        stateLock.withLock { delivery.pointee.isTerminated }
    }

    /// Attaches resources that are disposed right after the terminal event is delivered.
    @inlinable
    func setResources(_ disposable: any Disposable) {
        let alreadyTerminated: Bool = stateLock.withLock {
            if delivery.pointee.isTerminated { return true }
            resources = disposable
            return false
        }
        if alreadyTerminated { disposable.dispose() }
    }

    /// An input observer whose events go to this core; it interrupts the signal if released
    /// before terminating it.
    @inlinable
    func makeInput() -> Observer {
        Observer(inputOf: self)
    }
}

extension _SignalCore: @unchecked Sendable {}  // See the type's documentation for what guards each field.

/// Debug builds: how long a contended send waits before it reports what it waits on, and where
/// the report goes (standard error; tests capture it).
@usableFromInline
enum _ContentionReport {
    private static let lock = _Lock()
    nonisolated(unsafe) private static var _seconds: Double = 5
    nonisolated(unsafe) private static var _report: @Sendable (String) -> Void = { message in
        let line = message + "\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    /// Seconds a send waits before reporting (5 unless a test changes it).
    @usableFromInline
    static var seconds: Double {
        get { lock.withLock { _seconds } }
        set { lock.withLock { _seconds = newValue } }
    }

    /// Receives the report (standard error unless a test changes it).
    static var report: @Sendable (String) -> Void {
        get { lock.withLock { _report } }
        set { lock.withLock { _report = newValue } }
    }
}

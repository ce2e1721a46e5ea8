import Synchronization

/// One observer registration of a signal.
@usableFromInline
final class _Subscription<Value, Error: Swift.Error> {
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer

    /// The observer's action, held directly to save a hop on every event.
    @usableFromInline let action: Observer.Action
    /// The observer's `valueAction`, if it has one (then it receives values instead of
    /// `action`); else a closure never called. Not optional, so that the delivery reads one flag
    /// byte (disposed, has a shortcut) and calls a closure it never binds: binding an optional
    /// closure stored in a class to a constant copies it, a retain and a release per value.
    @usableFromInline let valueAction: (Value) -> Void
    /// The observer object, kept only when releasing it would do something: an input observer
    /// interrupts its signal when released. Any other observer is just its closures.
    @usableFromInline let keptObserver: Observer?
    /// `Self.disposed` once disposed, and `Self.hasValueShortcut` if values go to
    /// `valueAction`: one load tells a delivery both.
    @usableFromInline let flags: Synchronization.Atomic<UInt8>

    @inlinable static var disposed: UInt8 { 1 }
    @inlinable static var hasValueShortcut: UInt8 { 2 }

    @inlinable
    init(_ observer: Observer) {
        self.action = observer.action
        self.keptObserver = observer.core == nil ? nil : observer
        if let valueAction = observer.valueAction {
            self.valueAction = valueAction
            self.flags = Synchronization.Atomic(Self.hasValueShortcut)
        } else {
            self.valueAction = { _ in }
            self.flags = Synchronization.Atomic(0)
        }
    }

    /// A registration of closures with no observer object: `values` receives every value,
    /// `action` every other event.
    @inlinable
    init(values: @escaping (Value) -> Void, others action: @escaping Observer.Action) {
        self.action = action
        self.valueAction = values
        self.keptObserver = nil
        self.flags = Synchronization.Atomic(Self.hasValueShortcut)
    }

    /// A registration of one closure for every event, with no observer object.
    @inlinable
    init(events action: @escaping Observer.Action) {
        self.action = action
        self.valueAction = { _ in }
        self.keptObserver = nil
        self.flags = Synchronization.Atomic(0)
    }

    /// Whether the registration was disposed (it then receives nothing more).
    @inlinable
    var isDisposed: Bool { flags.load(ordering: .relaxed) & Self.disposed != 0 }

    /// Whether values go to `valueAction` rather than `action`.
    @inlinable
    var takesValuesByShortcut: Bool { flags.load(ordering: .relaxed) & Self.hasValueShortcut != 0 }

    @inlinable
    func markDisposed() {
        flags.bitwiseOr(Self.disposed, ordering: .releasing)
    }
}

/// Serial, reentrancy-safe delivery of events to a set of observers: the core of every signal
/// and property. The ownership protocol (who delivers, reentrant queue, posted terminal event,
/// waiters) is `_SerialDelivery`'s; this type adds the observers.
///
/// The observers are confined to the owner of delivery. `observe` and disposal never touch them
/// directly: they post additions and removals to the mailbox under `stateLock` and raise
/// `flagMailbox`; the owner applies them before its next event. If nobody owns delivery, the
/// caller takes ownership and applies them itself.
@usableFromInline
final class _SignalCore<Value, Error: Swift.Error>: _SerialDelivery {
    @usableFromInline typealias Failure = Error
    @usableFromInline typealias Event = Signal<Value, Error>.Event
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer
    @usableFromInline typealias Subscription = _Subscription<Value, Error>

    @usableFromInline let state = Synchronization.Atomic<UInt>(0)
    @usableFromInline @exclusivity(unchecked) var queue: ContiguousArray<_Queued<Value, Error>> = []
    @usableFromInline @exclusivity(unchecked) var queueHead = 0
    /// Guards the mailbox and the fields marked so; contended senders wait on its condition.
    @usableFromInline let stateLock = _Lock.make()
    // Protected by stateLock.
    @usableFromInline var posted: Event?
    // The small fields side by side, so that they share words (a signal is made per property
    // and per stateful operator: its size counts).
    // Protected by stateLock.
    @usableFromInline var waiterCount: Int32 = 0
    // Protected by stateLock.
    @usableFromInline var observerCount: Int32 = 0
    // Confined to the owner of delivery: how many subscriptions `onlyCallout` or `callouts` holds.
    @usableFromInline @exclusivity(unchecked) var calloutCount: Int32 = 0
    // Protected by stateLock.
    @usableFromInline var didReportLongWait = false
    // Protected by stateLock. False once the `Signal` object was released.
    @usableFromInline var isReferenced = true

    // Confined to the owner of delivery; change them with `set(_:)`. The subscriptions, each
    // retained by the core: with exactly one (most signals have one observer) it is
    // `onlyCallout`; with more, `callouts`, a plain buffer. A delivery iterates them with no
    // retain of the buffer or of a subscription. Only `set(_:)` replaces them, and never during
    // a callout: changes are applied by the owner before or after an event, never in the middle
    // of one.
    @usableFromInline @exclusivity(unchecked) var callouts: UnsafeMutablePointer<Unmanaged<Subscription>>?
    @usableFromInline @exclusivity(unchecked) var onlyCallout: Unmanaged<Subscription>?

    // Protected by stateLock.
    @usableFromInline var pendingAdds: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var pendingRemovals: [Subscription] = []
    // Protected by stateLock. Disposed after the terminal event was delivered.
    @usableFromInline var resources: (any Disposable)?

    /// Specialized in the client: a generic class's initializer run unspecialized looks up the
    /// metadata of every generic type it touches, on every signal or property.
    @inlinable
    init() {}

    deinit {
        set([])
    }

    @inlinable
    var parkingLock: _Lock { stateLock }

    @usableFromInline
    var reportName: String { "Signal<\(Value.self), \(Error.self)>" }

    /// The subscriptions, still the core's. Owner only.
    @inlinable
    var subscriptions: _SubscriptionList<Value, Error> {
        _SubscriptionList(only: onlyCallout, buffer: callouts, count: Int(calloutCount))
    }

    /// Replaces the subscriptions (retaining the new ones, then releasing the old ones). Owner
    /// only.
    @inlinable
    func set(_ newObservers: ContiguousArray<Subscription>) {
        let old = takeSubscriptions()
        calloutCount = Int32(newObservers.count)
        if newObservers.count == 1 {
            onlyCallout = .passRetained(newObservers[0])
        } else if newObservers.count > 1 {
            let buffer = UnsafeMutablePointer<Unmanaged<Subscription>>.allocate(capacity: newObservers.count)
            for (index, subscription) in newObservers.enumerated() {
                (buffer + index).initialize(to: .passRetained(subscription))
            }
            callouts = buffer
        }
        // Last: releasing a subscription can run code (an input observer's release interrupts
        // its signal), which must find this core consistent.
        old.release()
    }

    /// Leaves the core with no subscriptions and hands over the ones it had, still retained.
    @inlinable
    func takeSubscriptions() -> _SubscriptionList<Value, Error> {
        defer {
            onlyCallout = nil
            callouts = nil
            calloutCount = 0
        }
        return subscriptions
    }

    // MARK: Delivering (owner only)

    @inlinable @inline(__always)
    func deliver(value: Value, of event: Event) {
        let count = Int(calloutCount)
        if count == 1 {
            return onlyCallout.unsafelyUnwrapped._withUnsafeGuaranteedRef { callOut($0, value: value, of: event) }
        }
        let callouts = self.callouts
        var index = 0
        while index < count {
            callouts.unsafelyUnwrapped[index]._withUnsafeGuaranteedRef { callOut($0, value: value, of: event) }
            index &+= 1
        }
    }

    /// Delivers a value to one subscription, unless it was disposed.
    @inlinable @inline(__always)
    func callOut(_ subscription: Subscription, value: Value, of event: Event) {
        let flags = subscription.flags.load(ordering: .relaxed)
        guard flags & Subscription.disposed == 0 else { return }
        if flags & Subscription.hasValueShortcut != 0 {
            subscription.valueAction(value)
        } else {
            subscription.action(event)
        }
    }

    @inlinable @inline(never)
    func deliverTerminal(_ event: Event) {
        stateLock.lock()
        state.bitwiseOr(Self.flagTerminated, ordering: .sequentiallyConsistent)
        let (adds, removals) = takeRegistrationsLocked()
        observerCount = 0
        let resources = self.resources
        self.resources = nil
        stateLock.unlock()

        apply(adds, removals)
        let final = takeSubscriptions()
        final.forEach { subscription in
            if !subscription.isDisposed { subscription.action(event) }
        }
        // The generator's resources go first, then the observers (as they always have).
        resources?.dispose()
        final.release()
    }

    @inlinable @inline(never)
    func applyMailbox() {
        stateLock.lock()
        let (adds, removals) = takeRegistrationsLocked()
        stateLock.unlock()
        apply(adds, removals)
    }

    @inlinable
    func activate(_ subscription: Subscription) {
        guard !subscription.isDisposed else { return }
        if hasTerminated {
            subscription.action(.interrupted)
        } else {
            apply([subscription], [])
        }
    }

    // Requires stateLock.
    @inlinable
    func takeRegistrationsLocked() -> ([Subscription], [Subscription]) {
        defer {
            pendingAdds = []
            pendingRemovals = []
            state.bitwiseAnd(~Self.flagMailbox, ordering: .sequentiallyConsistent)
        }
        return (pendingAdds, pendingRemovals)
    }

    @inlinable
    func apply(_ adds: [Subscription], _ removals: [Subscription]) {
        assertOwner("_SignalCore.apply")
        // Only when something changed: every change rebuilds the subscriptions.
        guard !adds.isEmpty || !removals.isEmpty else { return }
        var observers = ContiguousArray<Subscription>()
        observers.reserveCapacity(Int(calloutCount) + adds.count)
        subscriptions.forEach { subscription in
            if !removals.contains(where: { $0 === subscription }) { observers.append(subscription) }
        }
        observers.append(contentsOf: adds)
        set(observers)
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
        register(Subscription(observer), ifTerminated: rejection)
    }

    /// Registers `action` for values only (no observer object); see `observe(_:)`.
    @inlinable
    func observe(values action: @escaping (Value) -> Void) -> (any Disposable)? {
        register(Subscription(values: action, others: { _ in }), ifTerminated: .interrupted)
    }

    /// Registers `action` for every event (no observer object); see `observe(_:)`.
    @inlinable
    func observe(events action: @escaping Observer.Action) -> (any Disposable)? {
        register(Subscription(events: action), ifTerminated: .interrupted)
    }

    /// Registers `subscription`, or sends it `rejection` if the signal had terminated.
    @inlinable
    func register(_ subscription: Subscription, ifTerminated rejection: Event) -> (any Disposable)? {
        guard enroll(subscription, ifTerminated: rejection) else { return nil }
        return _Unsubscriber(core: self, subscription: subscription)
    }

    /// Registers `subscription` and returns `true`, or returns `false` if the signal had
    /// terminated, after sending it `rejection` if there is one.
    @inlinable
    func enroll(_ subscription: Subscription, ifTerminated rejection: Event?) -> Bool {
        // From inside a delivery with events queued: take a place in the queue behind them.
        // (The queue is read only once ownership is known.)
        let behindQueued = isOwner(_currentThreadID()) && queueHead < queue.count
        stateLock.lock()
        let accepted = state.load(ordering: .relaxed) & Self.flagTerminated == 0
        if accepted {
            observerCount += 1
            if !behindQueued {
                pendingAdds.append(subscription)
                state.bitwiseOr(Self.flagMailbox, ordering: .sequentiallyConsistent)
            }
        }
        stateLock.unlock()
        guard accepted else {
            if let rejection { subscription.action(rejection) }
            return false
        }
        if behindQueued {
            queue.append(.registration(subscription))
        } else {
            applyPostedIfIdle()
        }
        return true
    }

    @inlinable
    func remove(_ subscription: Subscription) {
        subscription.markDisposed()
        stateLock.lock()
        var shouldEnd = false
        if state.load(ordering: .relaxed) & Self.flagTerminated == 0 {
            if let index = pendingAdds.firstIndex(where: { $0 === subscription }) {
                pendingAdds.remove(at: index)
            } else {
                pendingRemovals.append(subscription)
                state.bitwiseOr(Self.flagMailbox, ordering: .sequentiallyConsistent)
            }
            observerCount -= 1
            shouldEnd = observerCount == 0 && !isReferenced
        }
        stateLock.unlock()
        applyPostedIfIdle()
        if shouldEnd { send(.interrupted) }
    }

    /// The `Signal` object went away: with no observers left, nobody can ever see an event, so
    /// end the signal and release the generator's resources.
    @inlinable
    func signalReleased() {
        stateLock.lock()
        isReferenced = false
        let shouldEnd = observerCount == 0 && state.load(ordering: .relaxed) & Self.flagTerminated == 0
        stateLock.unlock()
        if shouldEnd { send(.interrupted) }
    }

    /// Attaches resources that are disposed right after the terminal event is delivered.
    @inlinable
    func setResources(_ disposable: any Disposable) {
        stateLock.lock()
        let alreadyTerminated = state.load(ordering: .relaxed) & Self.flagTerminated != 0
        if !alreadyTerminated { resources = disposable }
        stateLock.unlock()
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

/// A signal core's subscriptions, as the core holds them (each retained once, for the core):
/// the one subscription, or a buffer of them.
@usableFromInline
struct _SubscriptionList<Value, Error: Swift.Error> {
    @usableFromInline let only: Unmanaged<_Subscription<Value, Error>>?
    @usableFromInline let buffer: UnsafeMutablePointer<Unmanaged<_Subscription<Value, Error>>>?
    @usableFromInline let count: Int

    @inlinable
    init(
        only: Unmanaged<_Subscription<Value, Error>>?,
        buffer: UnsafeMutablePointer<Unmanaged<_Subscription<Value, Error>>>?,
        count: Int
    ) {
        self.only = only
        self.buffer = buffer
        self.count = count
    }

    /// Calls `body` with each, in order of registration.
    @inlinable
    func forEach(_ body: (_Subscription<Value, Error>) -> Void) {
        if let only { return only._withUnsafeGuaranteedRef(body) }
        guard let buffer else { return }
        for index in 0..<count { buffer[index]._withUnsafeGuaranteedRef(body) }
    }

    /// Releases each, and the buffer: only for a list taken out of its core, once.
    @inlinable
    func release() {
        only?.release()
        guard let buffer else { return }
        for index in 0..<count { buffer[index].release() }
        buffer.deallocate()
    }
}

/// The disposable `observe` returns: on the first `dispose()` it removes its subscription from
/// the core, if the core is still there, and lets go of the subscription (and so of the
/// observer and what its closures capture), even while the disposable itself is kept.
///
/// Until then it keeps the subscription, even after the signal terminated: stateful operators
/// keep their upstream's disposable in their own lifetime, and rely on it to keep the adapter
/// (and the output's input it holds) for as long as they can still send. A run that ends with
/// its signal (a property's values started without an observer) lets go of it at the end
/// instead: see `signalEnded()`.
///
/// One allocation where a closure-based disposable with a weak capture took three.
@usableFromInline
final class _Unsubscriber<Value, Error: Swift.Error>: _LifetimeEndHandler, Disposable {
    /// `disposedBit` once `dispose()` was called, `endedBit` once `signalEnded()` was; whichever
    /// is set first takes `subscription`.
    @usableFromInline let state = Synchronization.Atomic<UInt8>(0)
    @usableFromInline weak var core: _SignalCore<Value, Error>?
    // Set before the subscription is registered; read and cleared only by the one caller that
    // sets the first bit of `state`.
    @usableFromInline var subscription: _Subscription<Value, Error>?

    @inlinable static var disposedBit: UInt8 { 1 }
    @inlinable static var endedBit: UInt8 { 2 }

    @inlinable
    init(core: _SignalCore<Value, Error>, subscription: _Subscription<Value, Error>?) {
        self.core = core
        self.subscription = subscription
        super.init()
    }

    /// Attached to a lifetime's inline slot (`Lifetime._attachDisposing`): disposes.
    @inlinable
    override func lifetimeEnded() {
        dispose()
    }

    /// Whether `dispose()` has been called.
    @inlinable
    var isDisposed: Bool { state.load(ordering: .acquiring) & Self.disposedBit != 0 }

    /// Removes the subscription on the first call; later calls do nothing, and neither does a
    /// call after `signalEnded()` (beyond `isDisposed`).
    @inlinable
    func dispose() {
        guard state.bitwiseOr(Self.disposedBit, ordering: .acquiringAndReleasing).oldValue == 0 else { return }
        let subscription = self.subscription.unsafelyUnwrapped
        self.subscription = nil
        core?.remove(subscription)
    }

    /// The signal delivered its terminal event to the subscription (or refused it, having
    /// terminated): lets go of the subscription, so that a disposable kept after the end does
    /// not keep the closures. `isDisposed` stays `false`, as for a run that ended by itself.
    @inlinable
    func signalEnded() {
        guard state.bitwiseOr(Self.endedBit, ordering: .acquiringAndReleasing).oldValue == 0 else { return }
        subscription = nil
    }
}

extension _Unsubscriber: @unchecked Sendable {}  // `subscription` is handed over by the atomic `state`.

import Synchronization

/// One observer registration of a signal.
@usableFromInline
final class _Subscription<Value, Error: Swift.Error> {
    @usableFromInline typealias Observer = Signal<Value, Error>.Observer

    /// The observer's action, held directly to save a hop on every event.
    @usableFromInline let action: Observer.Action
    /// The observer's `valueAction`, if it has one (then it receives values instead of
    /// `action`); else a closure never called. Not optional: calling an optional closure stored
    /// in a class copies and retains it, on every value.
    @usableFromInline let valueAction: (Value) -> Void
    @usableFromInline let hasValueShortcut: Bool
    @usableFromInline let observer: Observer
    @usableFromInline let isDisposed = Synchronization.Atomic<Bool>(false)

    @inlinable
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
    // Protected by stateLock.
    @usableFromInline var waiterCount = 0
    // Protected by stateLock.
    @usableFromInline var didReportLongWait = false

    // Confined to the owner of delivery. Owns the subscriptions; change it with `set(_:)`.
    @usableFromInline @exclusivity(unchecked) var observers: ContiguousArray<Subscription> = []
    // Confined to the owner of delivery. The same subscriptions in a plain buffer, iterated on
    // every event with no retain of the buffer or of a subscription (`observers` keeps them
    // alive). Only `set(_:)` replaces it, and never during a callout: changes are applied by
    // the owner before or after an event, never in the middle of one. With exactly one
    // subscription there is no buffer: it is `onlyCallout` (most signals have one observer).
    @usableFromInline @exclusivity(unchecked) var callouts: UnsafeMutablePointer<Unmanaged<Subscription>>?
    @usableFromInline @exclusivity(unchecked) var onlyCallout: Unmanaged<Subscription>?
    @usableFromInline @exclusivity(unchecked) var calloutCount = 0

    // Protected by stateLock.
    @usableFromInline var pendingAdds: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var pendingRemovals: [Subscription] = []
    // Protected by stateLock.
    @usableFromInline var observerCount = 0
    // Protected by stateLock. False once the `Signal` object was released.
    @usableFromInline var isReferenced = true
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

    /// Replaces the observers and the plain buffer iterated on every event.
    @inlinable
    func set(_ newObservers: ContiguousArray<Subscription>) {
        observers = newObservers
        callouts?.deallocate()
        callouts = nil
        onlyCallout = nil
        calloutCount = newObservers.count
        if newObservers.count == 1 { onlyCallout = .passUnretained(newObservers[0]) }
        guard newObservers.count > 1 else { return }
        let buffer = UnsafeMutablePointer<Unmanaged<Subscription>>.allocate(capacity: newObservers.count)
        for (index, subscription) in newObservers.enumerated() {
            (buffer + index).initialize(to: .passUnretained(subscription))
        }
        callouts = buffer
    }

    // MARK: Delivering (owner only)

    @inlinable @inline(__always)
    func deliver(value: Value, of event: Event) {
        let count = calloutCount
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
        guard !subscription.isDisposed.load(ordering: .relaxed) else { return }
        if subscription.hasValueShortcut {
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
        let finalObservers = observers
        set([])
        for subscription in finalObservers where !subscription.isDisposed.load(ordering: .relaxed) {
            subscription.observer.action(event)
        }
        resources?.dispose()
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
        guard !subscription.isDisposed.load(ordering: .relaxed) else { return }
        if hasTerminated {
            subscription.observer.action(.interrupted)
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
        // Only touch `observers` when something changed: every change rebuilds `callouts`.
        guard !adds.isEmpty || !removals.isEmpty else { return }
        var observers = self.observers
        if !removals.isEmpty {
            observers.removeAll { subscription in removals.contains { $0 === subscription } }
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
        let subscription = Subscription(observer)
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
            observer.send(rejection)
            return nil
        }
        if behindQueued {
            queue.append(.registration(subscription))
        } else {
            applyPostedIfIdle()
        }
        return _Unsubscriber(core: self, subscription: subscription)
    }

    @inlinable
    func remove(_ subscription: Subscription) {
        subscription.isDisposed.store(true, ordering: .releasing)
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

/// The disposable `observe` returns: on the first `dispose()` it removes its subscription from
/// the core, if the core is still there, and lets go of the subscription (and so of the
/// observer and what its closures capture), even while the disposable itself is kept.
///
/// One allocation where a closure-based disposable with a weak capture took three.
@usableFromInline
final class _Unsubscriber<Value, Error: Swift.Error>: Disposable {
    @usableFromInline let state = Synchronization.Atomic<Bool>(false)
    @usableFromInline weak var core: _SignalCore<Value, Error>?
    // Written in init, read and cleared only by the one caller that wins `state`.
    @usableFromInline var subscription: _Subscription<Value, Error>?

    @inlinable
    init(core: _SignalCore<Value, Error>, subscription: _Subscription<Value, Error>) {
        self.core = core
        self.subscription = subscription
    }

    /// Whether `dispose()` has been called.
    @inlinable
    var isDisposed: Bool { state.load(ordering: .acquiring) }

    /// Removes the subscription on the first call; later calls do nothing.
    @inlinable
    func dispose() {
        guard state.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let subscription = self.subscription.unsafelyUnwrapped
        self.subscription = nil
        core?.remove(subscription)
    }
}

extension _Unsubscriber: @unchecked Sendable {}  // `subscription` is handed over by the atomic `state`.

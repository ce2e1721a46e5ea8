import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value and the signal of its changes, updated so that observers see changes in exactly the
/// order they were made.
///
/// A change takes the signal core's delivery ownership, stores the value, and delivers it
/// before giving ownership back; a change made from inside a delivery (on the delivering
/// thread) stores at once, so reads see it, and is delivered right after the current delivery.
///
/// The storage holds the core, not a `Signal` handle: whoever owns the property holds the
/// handle, so that the run feeding a derived property can hold its storage strongly (no weak
/// load per change) without keeping the streams alive.
///
/// It is thread safe, though not `Sendable` (`ManagedBuffer` is not): what holds one says so in
/// its own `@unchecked Sendable`.
@usableFromInline
final class _PropertyStorage<Value>: ManagedBuffer<Value, UInt64> {
    // The buffer's header is the current value (protected by the mutex; changed only by the
    // owner of the core's delivery). Its elements are words: the first holds the signal core,
    // retained by the storage and unmanaged, so that a change calls the core without retaining
    // it (a core is weakly referenced by its observers' disposables, so its reference count
    // lives in a side table, where every retain is slow); the next ones hold the mutex that
    // guards the value, in the storage's own allocation (one object where a lock object made
    // two). Each is reached through its own pointer, so that no access to one overlaps another.

    /// Makes a storage holding `initial`, delivering its changes through `core`.
    @inlinable
    static func make(_ initial: Value, core: _SignalCore<Value, Never> = _SignalCore()) -> _PropertyStorage {
        let made = create(minimumCapacity: 1 + _Lock.mutexWords) { _ in initial }
        let storage = unsafeDowncast(made, to: _PropertyStorage.self)
        storage.withUnsafeMutablePointerToElements { words in
            UnsafeMutableRawPointer(words).storeBytes(
                of: .passRetained(core), as: Unmanaged<_SignalCore<Value, Never>>.self)
            _Lock.initializeMutex(at: words + 1)
        }
        return storage
    }

    deinit {
        pthread_mutex_destroy(mutex)
        unmanagedCore.release()
    }

    /// The signal core, not retained (the storage keeps it).
    @inlinable
    var unmanagedCore: Unmanaged<_SignalCore<Value, Never>> {
        withUnsafeMutablePointerToElements { UnsafeRawPointer($0).load(as: Unmanaged<_SignalCore<Value, Never>>.self) }
    }

    /// The signal core the changes go through.
    @inlinable
    var core: _SignalCore<Value, Never> { unmanagedCore.takeUnretainedValue() }

    /// Calls `body` with the core, not retained.
    @inlinable @inline(__always)
    func withCore<Result>(_ body: (_SignalCore<Value, Never>) throws -> Result) rethrows -> Result {
        try unmanagedCore._withUnsafeGuaranteedRef(body)
    }

    /// The mutex guarding the value, in this object's allocation.
    @inlinable
    var mutex: UnsafeMutablePointer<pthread_mutex_t> {
        withUnsafeMutablePointerToElements {
            UnsafeMutableRawPointer($0 + 1).assumingMemoryBound(to: pthread_mutex_t.self)
        }
    }

    @inlinable
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try withUnsafeMutablePointerToHeader { try body(&$0.pointee) }
    }

    @inlinable
    var value: Value { withLock { $0 } }

    @inlinable
    func set(_ newValue: Value) {
        withCore { core in
            let owned = core.beginExclusive()
            withLock { $0 = newValue }
            core.endExclusive(delivering: .value(newValue), owned: owned)
        }
    }

    @inlinable
    func swap(_ newValue: Value) -> Value {
        withCore { core in
            let owned = core.beginExclusive()
            let old: Value = withLock { current in
                defer { current = newValue }
                return current
            }
            core.endExclusive(delivering: .value(newValue), owned: owned)
            return old
        }
    }

    /// Changes the value with `action` and delivers the new value, unless `delivers`, asked
    /// while owning the delivery, says that nothing observes it (building and delivering a
    /// value to no observer is work an owner that knows better can skip).
    @inlinable
    func modify<Result>(
        delivering delivers: () -> Bool = { true }, _ action: (inout Value) throws -> Result
    ) rethrows -> Result {
        try withCore { core in
            let owned = core.beginExclusive()
            var event: Signal<Value, Never>.Event?
            defer { core.endExclusive(delivering: event, owned: owned) }
            return try withLock { current in
                let result = try action(&current)
                if delivers() { event = .value(current) }
                return result
            }
        }
    }

    @inlinable
    func withValue<Result>(_ action: (Value) throws -> Result) rethrows -> Result {
        try withCore { core in
            let owned = core.beginExclusive()
            defer { core.endExclusive(delivering: nil, owned: owned) }
            return try action(value)
        }
    }

    func complete() { core.send(.completed) }

    /// The current value, then every change, with nothing lost or repeated in between (see
    /// `_PropertySource`).
    ///
    /// - Parameter signal: The property's signal handle, which the producer keeps alive so that
    ///   the streams outlive the property object for as long as the producer is held.
    ///
    /// Inlinable, so that the run specializes for the value's type in the caller (generic code
    /// run unspecialized makes a context for each closure it forms, for the type's metadata).
    @inlinable
    func producer(keeping signal: Signal<Value, Never>) -> SignalProducer<Value, Never> {
        let source = _PropertySource(storage: self, signal: signal)
        return SignalProducer(
            ._serialized { [source] sink, lifetime in source.run(sink, lifetime) }, shape: .property(source))
    }
}

/// What a property's producer starts from: the storage, and the signal handle it keeps.
///
/// A run registers its observer and sends the current value under the core's delivery
/// ownership, so that no change is lost or repeated in between. Registering first means a
/// change made from inside the delivery of the current value is queued behind it, and reaches
/// the new observer too. Started from inside a delivery of this property, after a reentrant
/// change, the current value already includes the changes still queued for delivery; the
/// observer is registered behind them, so it sees the newest value once, not twice.
///
/// `startWithValues` on the producer calls `startValues(_:)`, which registers the closure on
/// the core with no run, sink or observer around it: the disposable it returns is the one a
/// signal observation returns, and lets go of the closure when the property's streams end.
/// `start(_:)` with a closure or an observer of closures, and the other convenience starts,
/// call `startEvents(_:)`, which registers a `_PropertyRun` the same way.
@usableFromInline
final class _PropertySource<Value> {
    @usableFromInline let storage: _PropertyStorage<Value>
    @usableFromInline let signal: Signal<Value, Never>

    @inlinable
    init(storage: _PropertyStorage<Value>, signal: Signal<Value, Never>) {
        self.storage = storage
        self.signal = signal
    }

    /// One run of the producer, delivering to `sink` (the run's serializing sink) until
    /// `lifetime` ends or the property's streams complete.
    @inlinable
    func run(_ sink: _SerialSink<Value, Never>, _ lifetime: Lifetime) {
        storage.withCore { core in
            let owned = core.beginExclusive()
            defer { core.endExclusive(delivering: nil, owned: owned) }
            // A property's producer completes, as its signal does: a registration that comes
            // behind the signal's queued completion (started from inside a delivery, as the
            // property went away) gets `interrupted` from the core, and passes on `completed`.
            let subscription = _Subscription<Value, Never>(
                values: { [sink] value in sink.send(value: value) },
                others: { [sink] event in
                    if case .interrupted = event { sink.send(.completed) } else { sink.send(event) }
                })
            let enrolled = core.enroll(subscription, ifTerminated: nil)
            sink.send(value: storage.value)
            guard enrolled else { return sink.send(.completed) }
            lifetime._attachDisposing(_Unsubscriber(core: core, subscription: subscription))
        }
    }

    /// `startWithValues(action)` on the producer: the current value, then every change, to
    /// `action`, until the returned disposable is disposed or the property's streams complete.
    @inlinable
    func startValues(_ action: @escaping (Value) -> Void) -> any Disposable {
        storage.withCore { core in
            let owned = core.beginExclusive()
            defer { core.endExclusive(delivering: nil, owned: owned) }
            // The subscription and its disposable refer to each other until one of them ends it:
            // the disposable when disposed, the subscription when the signal ends.
            let unsubscriber = _Unsubscriber<Value, Never>(core: core, subscription: nil)
            let subscription = _Subscription<Value, Never>(
                values: action, others: { [unsubscriber] _ in unsubscriber.signalEnded() })
            unsubscriber.subscription = subscription
            let enrolled = core.enroll(subscription, ifTerminated: nil)
            action(storage.value)
            if !enrolled { unsubscriber.signalEnded() }
            return unsubscriber
        }
    }
}

extension _PropertySource {
    /// `start(_:)` on the producer, with a closure or with an observer that keeps no signal
    /// core, and the convenience starts other than `startWithValues`: the current value,
    /// then every change, then `completed` when the property's streams end, to `events`, until
    /// the returned disposable is disposed (which sends `interrupted`).
    @inlinable
    func startEvents<Error>(_ events: @escaping (Signal<Value, Error>.Event) -> Void) -> any Disposable {
        storage.withCore { core in
            let owned = core.beginExclusive()
            defer { core.endExclusive(delivering: nil, owned: owned) }
            let run = _PropertyRun<Value, Error>(events, core: core)
            let subscription = _Subscription<Value, Never>(events: { [run] event in run.receive(event) })
            run.subscription = subscription
            let enrolled = core.enroll(subscription, ifTerminated: nil)
            // Through the subscription, as the core delivers: a direct call of the run's
            // `receive` from here was compiled with a reabstraction thunk for the closure, one
            // allocation per start.
            subscription.action(.value(storage.value))
            // A property's producer completes, as its signal does (see `run(_:_:)`).
            if !enrolled { subscription.action(.completed) }
            return run
        }
    }
}

/// A run of a property's producer that delivers every event to one closure: its own serial
/// guard, and the disposable `start` returns, in one object, registered on the property's
/// signal core with no run, serializing sink or observer around it.
///
/// The core delivers one event at a time. What the run adds is the order between those
/// deliveries and `dispose()`, which any thread may call: one atomic byte says whether a
/// delivery is in progress, whether the run was disposed, and whether it ended. Whoever sets
/// `disposedBit` or `endedBit` first decides how the run ends:
/// - a delivery that finds the run disposed or ended delivers nothing;
/// - `dispose()` during a delivery (from inside the closure, or from another thread) leaves
///   `interrupted` to the delivery, which sends it when the closure returns; otherwise
///   `dispose()` sends it;
/// - the property's `completed` sets `endedBit` as its delivery begins, so that a `dispose()`
///   after it sends nothing.
/// The subscription (which refers back to this run) is let go of as the terminal event is
/// delivered, and the closure once that delivery returns.
@usableFromInline
final class _PropertyRun<Value, Error: Swift.Error>: Disposable {
    // Used only by whoever delivers (the bits above say who); replaced by a closure that does
    // nothing as the terminal event is delivered, and released once that delivery returns.
    @usableFromInline @exclusivity(unchecked) var events: (Signal<Value, Error>.Event) -> Void
    @usableFromInline weak var core: _SignalCore<Value, Never>?
    // Set before the subscription is registered; cleared by whichever of the terminal
    // delivery and `dispose()` sets its bit first.
    @usableFromInline @exclusivity(unchecked) var subscription: _Subscription<Value, Never>?
    @usableFromInline let state = Synchronization.Atomic<UInt8>(0)

    @inlinable static var deliveringBit: UInt8 { 1 }
    @inlinable static var disposedBit: UInt8 { 2 }
    @inlinable static var endedBit: UInt8 { 4 }

    @inlinable
    init(_ events: @escaping (Signal<Value, Error>.Event) -> Void, core: _SignalCore<Value, Never>) {
        self.events = events
        self.core = core
    }

    /// Whether `dispose()` has been called.
    @inlinable
    var isDisposed: Bool { state.load(ordering: .acquiring) & Self.disposedBit != 0 }

    /// Delivers one event of the property's signal (a core's `interrupted`, given to a
    /// registration behind the signal's end, passes on as `completed`).
    @inlinable
    func receive(_ event: Signal<Value, Never>.Event) {
        guard case let .value(value) = event else { return end() }
        // Marks the delivery, unless the run has ended or was disposed (then nothing is marked).
        var current = state.load(ordering: .relaxed)
        while true {
            guard current & (Self.disposedBit | Self.endedBit) == 0 else { return }
            assert(current & Self.deliveringBit == 0, "_PropertyRun: a delivery inside or beside another")
            let (exchanged, original) = state.compareExchange(
                expected: current, desired: current | Self.deliveringBit, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
        events(.value(value))
        let after = state.bitwiseAnd(~Self.deliveringBit, ordering: .acquiringAndReleasing).oldValue
        if _slowPath(after & Self.disposedBit != 0) { deliverLast(.interrupted) }
    }

    @inlinable @inline(never)
    func end() {
        let before = state.bitwiseOr(Self.endedBit, ordering: .acquiringAndReleasing).oldValue
        guard before & (Self.disposedBit | Self.endedBit) == 0 else { return }
        subscription = nil
        deliverLast(.completed)
    }

    /// Sends the run's terminal event, and lets go of the closure.
    @inlinable
    func deliverLast(_ event: Signal<Value, Error>.Event) {
        let events = self.events
        self.events = { _ in }
        events(event)
    }

    /// Ends the run: it receives `interrupted` (at once, or when a delivery in progress
    /// returns) unless it has ended; nothing is delivered after that. Then the subscription
    /// leaves the core (after `interrupted`, as a run's end does it, unless a delivery in
    /// progress sends that later).
    @inlinable
    func dispose() {
        let before = state.bitwiseOr(Self.disposedBit, ordering: .acquiringAndReleasing).oldValue
        guard before & (Self.disposedBit | Self.endedBit) == 0 else { return }
        let subscription = self.subscription.unsafelyUnwrapped
        self.subscription = nil
        if before & Self.deliveringBit == 0 { deliverLast(.interrupted) }
        core?.remove(subscription)
    }
}

// The atomic byte decides who uses `events` and `subscription` (see the fields).
extension _PropertyRun: @unchecked Sendable {}

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

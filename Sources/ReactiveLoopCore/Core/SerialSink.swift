import Synchronization

/// Serial, reentrancy-safe delivery of events to one downstream observer: the input of every
/// producer run that more than one party can send to (a start handler's observer, flatten,
/// combineLatest, the time operators), and of stateful signal operators.
///
/// `send(computing:)` runs its body while holding delivery ownership, so an operator's state
/// changes happen in the same order as the deliveries they produce, with no lock of their own:
/// state kept for a sink is confined to "whoever owns delivery", one thread at a time.
///
/// The ownership protocol is `_SerialDelivery`'s, shared with signal cores. A sink adds one
/// downstream observer, released after the terminal event, and nothing else: no observer list,
/// no mailbox and no lock of its own (contended senders park on one of a few shared locks), so
/// a run costs one object until a send is contended or reentrant.
@usableFromInline
final class _SerialSink<Value, Error: Swift.Error>: _LifetimeEndHandler, _SerialDelivery {
    @usableFromInline typealias Failure = Error
    @usableFromInline typealias Event = Signal<Value, Error>.Event

    @usableFromInline let state = Synchronization.Atomic<UInt>(0)
    /// The observer events go to, retained; `nil` once the terminal event was delivered.
    /// Confined to the owner of delivery. Unmanaged so that a delivery does not retain it.
    @usableFromInline @exclusivity(unchecked) var downstream: Unmanaged<Signal<Value, Error>.Observer>?
    @usableFromInline @exclusivity(unchecked) var queue: ContiguousArray<_Queued<Value, Error>> = []
    @usableFromInline @exclusivity(unchecked) var queueHead = 0
    // Protected by `parkingLock`.
    @usableFromInline var posted: Event?
    // Protected by `parkingLock`.
    @usableFromInline var waiterCount: Int32 = 0
    // Protected by `parkingLock`.
    @usableFromInline var didReportLongWait = false

    /// A sink delivering to `downstream`.
    @inlinable
    init(_ downstream: Signal<Value, Error>.Observer) {
        self.downstream = .passRetained(downstream)
        super.init()
    }

    /// The run's lifetime ended: interrupt it (nothing happens if it already terminated).
    @inlinable
    override func lifetimeEnded() {
        send(.interrupted)
    }

    deinit {
        downstream?.release()
    }

    /// An observer whose events go to this sink (and that keeps it alive). Its values take the
    /// shortcut `send(value:)`.
    @inlinable
    var input: Signal<Value, Error>.Observer {
        Signal<Value, Error>.Observer(
            { [self] event in self.send(event) }, values: { [self] value in send(value: value) })
    }

    /// `send(.value(value))`, without making the event unless the send is contended or
    /// reentrant: taking delivery from idle means nothing is pending and the output has not
    /// ended, so the value goes straight to the downstream observer's value shortcut, as
    /// `deliverUncontended` would send it.
    @inlinable @inline(__always)
    func send(value: Value) {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) {
            assertOwner("_SerialSink.send(value:)")
            downstream.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.send(value: value) }
            release(me)
        } else {
            sendSlow(.value(value), me)
        }
    }

    /// The parking lock this sink's waiters and posted events use.
    @inlinable
    var parkingLock: _Lock { _SinkParking.lock(for: self) }

    @usableFromInline
    var reportName: String { "SignalProducer<\(Value.self), \(Error.self)>" }

    // MARK: Delivering (owner only)

    @inlinable @inline(__always)
    func deliver(value: Value, of event: Event) {
        downstream.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.send(value: value) }
    }

    @inlinable @inline(never)
    func deliverTerminal(_ event: Event) {
        guard let downstream else { return }
        self.downstream = nil
        state.bitwiseOr(Self.flagTerminated, ordering: .releasing)
        downstream.takeRetainedValue().send(event)
    }

    /// A sink has no mailbox: nothing raises `flagMailbox`.
    @inlinable
    func applyMailbox() {
        state.bitwiseAnd(~Self.flagMailbox, ordering: .relaxed)
    }

    /// A sink has no observers to register: nothing queues a registration.
    @inlinable
    func activate(_ subscription: _Subscription<Value, Error>) {
        preconditionFailure("_SerialSink.activate: a sink has one observer and registers none")
    }
}

extension _SerialSink: @unchecked Sendable {}  // See the type's documentation for what guards each field.

extension Signal {
    /// A signal whose generator gets a serializing sink instead of a plain observer.
    @inlinable
    static func _serialized(_ generator: (_SerialSink<Value, Error>, Lifetime) -> Void) -> Signal {
        let (lifetime, token) = Lifetime.make()
        let (source, input) = makeCore(resources: AnyDisposable(token.dispose))
        let signal = Signal(source: source)
        // The sink holds the core's input: released without a terminal event, it interrupts.
        generator(_SerialSink(input), lifetime)
        return signal
    }
}

extension SignalProducer {
    /// A producer whose runs get a serializing sink delivering to the downstream observer.
    @inlinable
    static func _serialized(_ body: @escaping (_SerialSink<Value, Error>, Lifetime) -> Void) -> SignalProducer {
        SignalProducer(.run) { downstream, lifetime in
            let sink = _SerialSink(downstream)
            // Strong: the run keeps itself alive until it terminates or is disposed, whether or
            // not the start handler keeps its observer. The cycle (lifetime -> sink -> downstream
            // -> the run) is broken when the lifetime ends, which the run does on its terminal
            // event and on disposal. The lifetime's inline slot: no allocation.
            lifetime._attachFirst(sink)
            body(sink, lifetime)
        }
    }
}

import Synchronization

/// Serial, reentrancy-safe delivery of events to one downstream observer: the input of every
/// producer run that more than one party can send to (a start handler's observer, flatten,
/// combineLatest, the time operators), and of stateful signal operators.
///
/// `send(computing:)` runs its body while holding delivery ownership, so an operator's state
/// changes happen in the same order as the deliveries they produce, with no lock of their own:
/// state kept for a sink is confined to "whoever owns delivery", one thread at a time.
///
/// ## How it works
/// The protocol is `_SignalCore`'s, cut down to one observer and one allocation. `state` holds
/// the owner (its thread id, shifted left by 4) and four flags. A sender takes ownership with
/// one compare-and-swap (`0 -> owner`), delivers, and gives it back with one (`owner -> 0`).
/// The release CAS fails only if a flag was raised meanwhile:
/// - A reentrant send (the owner sending from inside a delivery) is queued (`flagQueued`) and
///   delivered, in order, before the outermost send returns.
/// - A contended value waits (`flagWaiters`) on one of a few shared parking locks until
///   ownership is free, so `send` returns only after its event was delivered.
/// - A contended terminal event is posted (`flagPosted`) and delivered by the owner right after
///   its current event; it never blocks, so disposing from any thread is safe.
/// - After the terminal event (`flagTerminated`), everything else is dropped, and the
///   downstream observer is released.
/// - A scheduling operator's run that is disposed is cancelled (`flagCancelled`): from then on
///   every send is dropped, including those already queued or scheduled, and the one event
///   still delivered is the `interrupted` that `cancel(deliveringInterruptedOn:)` schedules.
///
/// Unlike a signal's core, a sink has no observer list, no registration mailbox and no lock of
/// its own: one object per run, and nothing else until a send is contended or reentrant.
@usableFromInline
final class _SerialSink<Value, Error: Swift.Error>: _LifetimeEndHandler {
    @usableFromInline typealias Event = Signal<Value, Error>.Event

    @usableFromInline static var flagWaiters: UInt { 1 }
    @usableFromInline static var flagPosted: UInt { 2 }
    @usableFromInline static var flagQueued: UInt { 4 }
    @usableFromInline static var flagTerminated: UInt { 8 }
    @usableFromInline static var flagCancelled: UInt { 16 }
    @usableFromInline static var flags: UInt { 31 }
    /// The flags after which a send is dropped.
    @usableFromInline static var flagsEnded: UInt { flagTerminated | flagCancelled }

    /// The owner of delivery (`ownerBits(threadID)`, or 0) and the flags.
    @usableFromInline let state = Synchronization.Atomic<UInt>(0)
    /// The observer events go to, retained; `nil` once the terminal event was delivered.
    /// Confined to the owner of delivery. Unmanaged so that a delivery does not retain it.
    @usableFromInline @exclusivity(unchecked) var downstream: Unmanaged<Signal<Value, Error>.Observer>?
    /// Reentrant events, oldest first from `queueHead`. Confined to the owner of delivery.
    @usableFromInline @exclusivity(unchecked) var queue: ContiguousArray<Event> = []
    // Confined to the owner of delivery.
    @usableFromInline @exclusivity(unchecked) var queueHead = 0
    // Protected by `parkingLock`.
    @usableFromInline var posted: Event?
    // Protected by `parkingLock`.
    @usableFromInline var waiterCount = 0
    // Protected by `parkingLock`. Debug builds report a long wait once per sink.
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

    /// An observer whose events go to this sink (and that keeps it alive).
    @inlinable
    var input: Signal<Value, Error>.Observer {
        Signal<Value, Error>.Observer { [self] event in self.send(event) }
    }

    /// Whether the terminal event has been delivered (from any thread).
    @inlinable
    var hasTerminated: Bool { state.load(ordering: .acquiring) & Self.flagTerminated != 0 }

    // MARK: Sending

    /// Delivers `event`, or queues it if the calling thread is delivering.
    @inlinable @inline(__always)
    func send(_ event: Event) {
        let me = _currentThreadID()
        if _fastPath(state.compareExchange(expected: 0, desired: Self.ownerBits(me), ordering: .acquiring).exchanged) {
            deliver(event)
            release(me)
        } else {
            sendSlow(event, me)
        }
    }

    @inlinable @inline(never)
    func sendSlow(_ event: Event, _ me: UInt) {
        let current = state.load(ordering: .acquiring)
        if current & Self.flagsEnded != 0 { return }
        if current & ~Self.flags == Self.ownerBits(me) {
            enqueue(event)
        } else if event.isTerminating {
            post(event, me)
        } else {
            acquireBlocking(me)
            // Cancelled while this send waited: it was not delivered before the cancellation.
            if state.load(ordering: .acquiring) & Self.flagCancelled == 0 { deliver(event) }
            release(me)
        }
    }

    /// Runs `body` with delivery ownership and delivers the event it returns, if any. A body
    /// that runs reentrantly (on the delivering thread) runs at once, and its event is queued
    /// behind the current one. `body` runs even after the output has ended (an operator's
    /// clean-up may depend on it); its event is then dropped.
    @inlinable
    func send(computing body: () -> Event?) {
        let me = _currentThreadID()
        if _fastPath(state.compareExchange(expected: 0, desired: Self.ownerBits(me), ordering: .acquiring).exchanged) {
            if let event = body() { deliver(event) }
            release(me)
        } else {
            sendSlow(computing: body, me)
        }
    }

    @inlinable @inline(never)
    func sendSlow(computing body: () -> Event?, _ me: UInt) {
        if state.load(ordering: .relaxed) & ~Self.flags == Self.ownerBits(me) {
            if let event = body() { enqueue(event) }
        } else {
            acquireBlocking(me)
            if let event = body(), state.load(ordering: .acquiring) & Self.flagCancelled == 0 { deliver(event) }
            release(me)
        }
    }

    /// Cancels the output of a disposed run of a scheduling operator, as ReactiveSwift's
    /// asynchronous operators do: from this call on every send is dropped, including sends that
    /// are already queued or scheduled, and `interrupted` is delivered by an action scheduled on
    /// `scheduler`, never inside this call (unless `scheduler` runs actions at once). Does nothing
    /// once the output has terminated or was cancelled.
    @inlinable @inline(never)
    func cancel(deliveringInterruptedOn scheduler: any Scheduler) {
        let before = state.bitwiseOr(Self.flagCancelled, ordering: .sequentiallyConsistent).oldValue
        guard before & Self.flagsEnded == 0 else { return }
        scheduler.schedule { [self] in deliverCancellation() }
    }

    /// Delivers the `interrupted` of a cancelled output: posted (replacing any terminal event
    /// posted before the cancellation), so that an owner delivering right now, on this thread or
    /// another, delivers it when its current event is done.
    @usableFromInline
    func deliverCancellation() {
        let lock = parkingLock
        lock.withLock {
            posted = .interrupted
            state.bitwiseOr(Self.flagPosted, ordering: .sequentiallyConsistent)
        }
        let me = _currentThreadID()
        if tryAcquireWithFlags(me) { releaseSlow(me) }
    }

    // MARK: Ownership

    /// The owner value of thread `me` (thread ids are pointers, far below 2^59).
    @inlinable
    static func ownerBits(_ me: UInt) -> UInt { me &<< 5 }

    @inlinable
    func assertOwner(_ operation: StaticString) {
        assert(
            state.load(ordering: .relaxed) & ~Self.flags == Self.ownerBits(_currentThreadID()),
            "_SerialSink.\(operation): the calling thread does not own delivery")
    }

    /// Takes ownership if nobody has it, keeping whatever flags are raised.
    @inlinable
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

    /// The parking lock this sink's waiters and posted events use.
    @inlinable
    var parkingLock: _Lock { _SinkParking.lock(for: self) }

    /// Waits until ownership is free and takes it.
    @inlinable @inline(never)
    func acquireBlocking(_ me: UInt) {
        // Free but flagged (a terminated sink, waiters about to wake): no need to park.
        if tryAcquireWithFlags(me) { return }
        let lock = parkingLock
        lock.lock()
        waiterCount += 1
        state.bitwiseOr(Self.flagWaiters, ordering: .sequentiallyConsistent)
        // The owner's release sees the flag, so it broadcasts after we wait: no lost wakeup.
        while !tryAcquireWithFlags(me) {
            #if DEBUG
                if !lock.wait(seconds: _ContentionReport.seconds) { reportLongWaitLocked(me) }
            #else
                lock.wait()
            #endif
        }
        waiterCount -= 1
        if waiterCount == 0 { state.bitwiseAnd(~Self.flagWaiters, ordering: .sequentiallyConsistent) }
        lock.unlock()
    }

    /// Debug builds: a send has waited `_ContentionReport.seconds` for another thread's
    /// delivery; says once per sink what it waits on. Requires `parkingLock`.
    @usableFromInline
    func reportLongWaitLocked(_ me: UInt) {
        guard !didReportLongWait else { return }
        didReportLongWait = true
        let owner = (state.load(ordering: .relaxed) & ~Self.flags) >> 5
        let hex = { (id: UInt) in "0x" + String(id, radix: 16) }
        _ContentionReport.report(
            "ReactiveLoop: a send on thread \(hex(me)) has waited \(_ContentionReport.seconds) s for a delivery of "
                + "SignalProducer<\(Value.self), \(Error.self)> running on thread \(hex(owner)). If that delivery "
                + "waits for this thread, they are deadlocked: see \"A send that waits for its own delivery "
                + "deadlocks\" in docs/APIContracts.md.")
    }

    /// Gives ownership back; the fast path (no flag raised) is one compare-and-swap.
    @inlinable @inline(__always)
    func release(_ me: UInt) {
        if _fastPath(state.compareExchange(expected: Self.ownerBits(me), desired: 0, ordering: .releasing).exchanged) {
            return
        }
        releaseSlow(me)
    }

    /// Delivers what was queued or posted, then gives ownership back and wakes any waiter.
    @inlinable @inline(never)
    func releaseSlow(_ me: UInt) {
        while true {
            drainQueue()
            if state.load(ordering: .acquiring) & Self.flagPosted != 0 {
                deliverPosted()
                continue
            }
            // Only the owner queues, so with the queue drained the flag can be lowered, and
            // ownership given up keeping the other flags.
            let after = state.bitwiseAnd(Self.flags & ~Self.flagQueued, ordering: .sequentiallyConsistent).newValue
            if after & Self.flagWaiters != 0 {
                let lock = parkingLock
                lock.withLock { lock.broadcast() }
            }
            // Posted after our check: take ownership back to deliver it, if still free.
            guard after & Self.flagPosted != 0 && tryAcquireWithFlags(me) else { return }
        }
    }

    @inlinable
    func enqueue(_ event: Event) {
        assertOwner("enqueue")
        queue.append(event)
        state.bitwiseOr(Self.flagQueued, ordering: .relaxed)
    }

    @inlinable
    func drainQueue() {
        assertOwner("drainQueue")
        guard queueHead < queue.count else { return }
        while queueHead < queue.count {
            // A terminal event posted from another thread goes before what is still queued;
            // after a cancellation, nothing queued is delivered.
            let flags = state.load(ordering: .acquiring)
            if flags & Self.flagPosted != 0 { deliverPosted() }
            if flags & Self.flagCancelled != 0 { break }
            let event = queue[queueHead]
            queueHead += 1
            deliver(event)
        }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
    }

    /// Posts a terminal event from a thread that does not own delivery; the owner delivers it.
    @inlinable @inline(never)
    func post(_ event: Event, _ me: UInt) {
        let lock = parkingLock
        lock.withLock {
            if posted == nil && state.load(ordering: .relaxed) & Self.flagCancelled == 0 {
                posted = event
                state.bitwiseOr(Self.flagPosted, ordering: .sequentiallyConsistent)
            }
        }
        // If the owner released before seeing the post, deliver it ourselves.
        if tryAcquireWithFlags(me) { releaseSlow(me) }
    }

    @inlinable
    func deliverPosted() {
        let lock = parkingLock
        let event: Event? = lock.withLock {
            state.bitwiseAnd(~Self.flagPosted, ordering: .relaxed)
            defer { posted = nil }
            return posted
        }
        if let event { deliver(event) }
    }

    // MARK: Delivering (owner only)

    @inlinable @inline(__always)
    func deliver(_ event: Event) {
        assertOwner("deliver")
        guard let downstream else { return }
        guard case let .value(value) = event else { return deliverTerminal(event, downstream) }
        downstream._withUnsafeGuaranteedRef { $0.send(value: value) }
    }

    @inlinable @inline(never)
    func deliverTerminal(_ event: Event, _ downstream: Unmanaged<Signal<Value, Error>.Observer>) {
        self.downstream = nil
        state.bitwiseOr(Self.flagTerminated, ordering: .releasing)
        downstream.takeRetainedValue().send(event)
    }
}

extension _SerialSink: @unchecked Sendable {}  // See the type's documentation for what guards each field.

/// The locks contended sinks wait on, shared by all sinks: contention on a producer run is
/// rare, and a lock per run would cost an allocation on every start.
@usableFromInline
enum _SinkParking {
    @usableFromInline static let locks: [_Lock] = (0..<16).map { _ in _Lock(withCondition: true) }

    /// The lock for `object`, picked by its address.
    @inlinable
    static func lock(for object: AnyObject) -> _Lock {
        let address = UInt(bitPattern: ObjectIdentifier(object).hashValue)
        return locks[Int((address >> 5) & 15)]
    }
}

extension Signal {
    /// A signal whose generator gets a serializing sink instead of a plain observer.
    @inlinable
    static func _serialized(_ generator: (_SerialSink<Value, Error>, Lifetime) -> Void) -> Signal {
        let core = _SignalCore<Value, Error>()
        let signal = Signal(source: .core(core))
        let (lifetime, token) = Lifetime.make()
        core.setResources(AnyDisposable(token.dispose))
        // The sink holds the core's input: released without a terminal event, it interrupts.
        generator(_SerialSink(core.makeInput()), lifetime)
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

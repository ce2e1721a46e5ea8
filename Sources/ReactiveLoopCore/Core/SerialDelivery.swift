import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Serial, reentrancy-safe delivery of events: the one ownership mechanism behind a signal's
/// core (`_SignalCore`, many observers) and a serial sink (`_SerialSink`, one observer: a
/// producer run's input, a stateful operator's output). A conforming class supplies storage
/// and says how a value and the terminal event reach its observers; everything about who
/// delivers, and when, is written once, here.
///
/// ## How it works
/// Exactly one thread at a time owns delivery. `state` holds the owner (its thread id, shifted
/// left by `ownerShift`) and six flags in its low bits. A sender takes ownership with one
/// compare-and-swap (`0 -> owner`), delivers, and gives ownership back with one
/// (`owner -> 0`); that is the whole uncontended path, inlined into the sender. Because the
/// first CAS expects exactly 0, a sender that wins it knows that no flag is raised: nothing is
/// pending and the output has not ended, so it delivers without looking further. Any raised
/// flag makes both CASes fail, and the slow paths deal with it:
/// - A reentrant send (the owner sending from inside a delivery) is queued (`flagQueued`) and
///   delivered, in order, before the outermost send returns.
/// - A contended value waits (`flagWaiters`) on `parkingLock`'s condition until ownership is
///   free, so `send` returns only after its event was delivered.
/// - A contended terminal event is posted (`flagPosted`) and delivered by the owner before
///   anything else it has still to deliver; it never blocks, so disposing from any thread is
///   safe.
/// - Changes to a signal's observers made from other threads are posted to its mailbox
///   (`flagMailbox`) and applied by the owner before its next delivery.
/// - After the terminal event (`flagTerminated`), every send is dropped.
/// - A scheduling operator's run that is disposed is cancelled (`flagCancelled`): from then on
///   every send is dropped, including those already queued or scheduled, and the one event
///   still delivered is the `interrupted` that `cancel(deliveringInterruptedOn:)` schedules.
///
/// Every delivery other than the uncontended one goes through `deliver(_:)`, which first
/// applies the mailbox and a posted terminal event, then drops the event if the output has
/// ended. So a posted terminal event overtakes queued events wherever they are delivered.
@usableFromInline
protocol _SerialDelivery<Value, Failure>: AnyObject {
    associatedtype Value
    associatedtype Failure: Swift.Error
    typealias Event = Signal<Value, Failure>.Event

    /// The owner of delivery (`ownerBits(threadID)`, or 0) and the flags.
    var state: Synchronization.Atomic<UInt> { get }
    /// Reentrant events (and, in a signal core, observers registered behind them), oldest first
    /// from `queueHead`. Confined to the owner of delivery.
    var queue: ContiguousArray<_Queued<Value, Failure>> { get set }
    /// Confined to the owner of delivery.
    var queueHead: Int { get set }
    /// Guards `posted`, `waiterCount` and `didReportLongWait`; contended senders wait on its
    /// condition.
    var parkingLock: _Lock { get }
    /// A terminal event posted by a thread that does not own delivery. Guarded by `parkingLock`.
    var posted: Event? { get set }
    /// Senders waiting for ownership. Guarded by `parkingLock`.
    var waiterCount: Int32 { get set }
    /// Debug builds report a long wait once per delivery. Guarded by `parkingLock`.
    var didReportLongWait: Bool { get set }
    /// How a report of a long wait names what it waits for.
    var reportName: String { get }

    /// Delivers `value` (which `event` wraps) to the observers. Owner only, before the end.
    func deliver(value: Value, of event: Event)
    /// Delivers the terminal event, raising `flagTerminated` first. Owner only, once.
    func deliverTerminal(_ event: Event)
    /// Applies what was posted to the mailbox and lowers `flagMailbox`. Owner only.
    func applyMailbox()
    /// Registers an observer that waited in the queue behind earlier events. Owner only.
    func activate(_ subscription: _Subscription<Value, Failure>)
}

/// What waits in a delivery's reentrant queue.
@usableFromInline
enum _Queued<Value, Failure: Swift.Error> {
    case event(Signal<Value, Failure>.Event)
    /// An observer registered from inside a delivery while events were queued: it must see only
    /// the events queued after it (signal cores only).
    case registration(_Subscription<Value, Failure>)
}

/// What `beginExclusive()` hands to `endExclusive`: whether that call took ownership (`false`
/// when the calling thread already delivers), and the thread's id, read once.
@usableFromInline
struct _ExclusiveDelivery {
    @usableFromInline let owned: Bool
    @usableFromInline let me: UInt

    @inlinable
    init(owned: Bool, me: UInt) {
        self.owned = owned
        self.me = me
    }
}

extension _SerialDelivery {
    @inlinable static var flagWaiters: UInt { 1 }
    @inlinable static var flagPosted: UInt { 2 }
    @inlinable static var flagQueued: UInt { 4 }
    @inlinable static var flagTerminated: UInt { 8 }
    @inlinable static var flagCancelled: UInt { 16 }
    @inlinable static var flagMailbox: UInt { 32 }
    @inlinable static var flags: UInt { 63 }
    @inlinable static var ownerShift: UInt { 6 }
    /// The flags after which a send is dropped.
    @inlinable static var flagsEnded: UInt { flagTerminated | flagCancelled }
    /// The flags a delivery looks at before calling out.
    @inlinable static var flagsBeforeDelivery: UInt { flagPosted | flagMailbox | flagsEnded }

    // MARK: Ownership

    /// The owner value of thread `me` (thread ids are pointers, far below 2^58).
    @inlinable
    static func ownerBits(_ me: UInt) -> UInt { me &<< ownerShift }

    @inlinable
    func isOwner(_ me: UInt) -> Bool {
        state.load(ordering: .relaxed) & ~Self.flags == Self.ownerBits(me)
    }

    /// Debug builds: stops unless the calling thread owns delivery, which the delivery state
    /// (observers, queue, the downstream observer) is confined to.
    @inlinable
    func assertOwner(_ operation: StaticString) {
        assert(isOwner(_currentThreadID()), "\(operation): the calling thread does not own delivery")
    }

    /// Whether the terminal event has been delivered (from any thread).
    @inlinable
    var hasTerminated: Bool { state.load(ordering: .acquiring) & Self.flagTerminated != 0 }

    /// Takes ownership if nobody has it and no flag is raised: one compare-and-swap.
    @inlinable @inline(__always)
    func tryAcquire(_ me: UInt) -> Bool {
        state.compareExchange(expected: 0, desired: Self.ownerBits(me), ordering: .acquiring).exchanged
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

    /// Waits until ownership is free and takes it.
    @inlinable @inline(never)
    func acquireBlocking(_ me: UInt) {
        // Free but flagged (an ended output, waiters about to wake): no need to park.
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
    /// delivery. Says once what it waits on: if that delivery waits for this thread, the two are
    /// deadlocked (see "A send that waits for its own delivery" in APIContracts.md). Requires
    /// `parkingLock`.
    @inlinable
    func reportLongWaitLocked(_ me: UInt) {
        guard !didReportLongWait else { return }
        didReportLongWait = true
        let owner = (state.load(ordering: .relaxed) & ~Self.flags) >> Self.ownerShift
        _ContentionReport.reportLongWait(sender: me, owner: owner, of: reportName)
    }

    /// Gives ownership back; the fast path (no flag raised, so nothing queued or posted) is one
    /// compare-and-swap.
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
            if state.load(ordering: .acquiring) & (Self.flagPosted | Self.flagMailbox) != 0 {
                applyPosted()
                continue
            }
            // Only the owner queues, so with the queue drained the flag can be lowered, and
            // ownership given up keeping the other flags.
            let after = state.bitwiseAnd(Self.flags & ~Self.flagQueued, ordering: .sequentiallyConsistent).newValue
            if after & Self.flagWaiters != 0 {
                let lock = parkingLock
                lock.lock()
                lock.broadcast()
                lock.unlock()
            }
            // Posted after our check: take ownership back to apply it, if still free.
            guard after & (Self.flagPosted | Self.flagMailbox) != 0 && tryAcquireWithFlags(me) else { return }
        }
    }

    // MARK: Sending

    /// Delivers `event`, or queues it if the calling thread is delivering.
    @inlinable @inline(__always)
    func send(_ event: Event) {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) {
            deliverUncontended(event)
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
            deliver(event)
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
        if _fastPath(tryAcquire(me)) {
            if let event = body() { deliverUncontended(event) }
            release(me)
        } else {
            sendSlow(computing: body, me)
        }
    }

    @inlinable @inline(never)
    func sendSlow(computing body: () -> Event?, _ me: UInt) {
        if isOwner(me) {
            if let event = body() { enqueue(event) }
        } else {
            acquireBlocking(me)
            if let event = body() { deliver(event) }
            release(me)
        }
    }

    /// Takes delivery ownership for an update that must be ordered with its own delivery
    /// (`MutableProperty`, `replayLazily`). Does not take it when the calling thread already
    /// owns delivery (a reentrant update).
    @inlinable
    func beginExclusive() -> _ExclusiveDelivery {
        let me = _currentThreadID()
        if _fastPath(tryAcquire(me)) { return _ExclusiveDelivery(owned: true, me: me) }
        if isOwner(me) { return _ExclusiveDelivery(owned: false, me: me) }
        acquireBlocking(me)
        return _ExclusiveDelivery(owned: true, me: me)
    }

    /// Ends what `beginExclusive()` began, delivering (or, when reentrant, queueing) `event`.
    @inlinable
    func endExclusive(delivering event: Event?, owned exclusive: _ExclusiveDelivery) {
        if exclusive.owned {
            if let event { deliver(event) }
            release(exclusive.me)
        } else if let event {
            enqueue(event)
        }
    }

    /// Applies the mailbox and delivers a posted terminal event, if the calling thread can take
    /// ownership; otherwise the owner does it before its next delivery or when it releases.
    @inlinable
    func applyPostedIfIdle() {
        let me = _currentThreadID()
        if tryAcquireWithFlags(me) { releaseSlow(me) }
    }

    /// Cancels the output of a disposed run of a scheduling operator, as ReactiveSwift's
    /// asynchronous operators do: from this call on every send is dropped, including sends that
    /// are already queued or scheduled, and `interrupted` is delivered by an action scheduled on
    /// `scheduler`, never inside this call (unless `scheduler` runs actions at once). Does nothing
    /// once the output has terminated or was cancelled.
    @inlinable @inline(never)
    func cancel(deliveringInterruptedOn scheduler: any Scheduler) {
        let lock = parkingLock
        lock.lock()
        let before = state.bitwiseOr(Self.flagCancelled, ordering: .sequentiallyConsistent).oldValue
        if before & Self.flagsEnded == 0 {
            // A terminal event posted before the cancellation was not delivered before it either.
            posted = nil
            state.bitwiseAnd(~Self.flagPosted, ordering: .sequentiallyConsistent)
        }
        lock.unlock()
        guard before & Self.flagsEnded == 0 else { return }
        scheduler.schedule { [self] in deliverCancellation() }
    }

    /// Delivers the `interrupted` of a cancelled output: posted (replacing any terminal event
    /// posted before the cancellation), so that an owner delivering right now, on this thread or
    /// another, delivers it when its current event is done.
    @inlinable @inline(never)
    func deliverCancellation() {
        let lock = parkingLock
        lock.lock()
        posted = .interrupted
        state.bitwiseOr(Self.flagPosted, ordering: .sequentiallyConsistent)
        lock.unlock()
        applyPostedIfIdle()
    }

    /// Posts a terminal event from a thread that does not own delivery; the owner delivers it.
    @inlinable @inline(never)
    func post(_ event: Event, _ me: UInt) {
        let lock = parkingLock
        lock.lock()
        if posted == nil && state.load(ordering: .relaxed) & Self.flagsEnded == 0 {
            posted = event
            state.bitwiseOr(Self.flagPosted, ordering: .sequentiallyConsistent)
        }
        lock.unlock()
        // If the owner released before seeing the post, deliver it ourselves.
        if tryAcquireWithFlags(me) { releaseSlow(me) }
    }

    @inlinable
    func enqueue(_ event: Event) {
        assertOwner("_SerialDelivery.enqueue")
        queue.append(.event(event))
        state.bitwiseOr(Self.flagQueued, ordering: .relaxed)
    }

    @inlinable
    func drainQueue() {
        assertOwner("_SerialDelivery.drainQueue")
        guard queueHead < queue.count else { return }
        while queueHead < queue.count {
            let queued = queue[queueHead]
            queueHead += 1
            switch queued {
            case let .event(event): deliver(event)
            case let .registration(subscription): activate(subscription)
            }
        }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
    }

    // MARK: Delivering (owner only)

    /// Delivers `event` right after taking ownership from 0: no flag was raised, so nothing is
    /// pending and the output has not ended.
    @inlinable @inline(__always)
    func deliverUncontended(_ event: Event) {
        assertOwner("_SerialDelivery.deliver")
        guard case let .value(value) = event else { return deliverTerminal(event) }
        deliver(value: value, of: event)
    }

    /// Delivers `event` after what was posted; drops it if the output has ended.
    @inlinable
    func deliver(_ event: Event) {
        if _slowPath(state.load(ordering: .acquiring) & Self.flagsBeforeDelivery != 0) {
            applyPosted()
            if state.load(ordering: .acquiring) & Self.flagsEnded != 0 { return }
        }
        deliverUncontended(event)
    }

    /// Applies the mailbox, then delivers a posted terminal event.
    @inlinable @inline(never)
    func applyPosted() {
        if state.load(ordering: .acquiring) & Self.flagMailbox != 0 { applyMailbox() }
        guard state.load(ordering: .acquiring) & Self.flagPosted != 0 else { return }
        let lock = parkingLock
        lock.lock()
        state.bitwiseAnd(~Self.flagPosted, ordering: .relaxed)
        let event = posted
        posted = nil
        lock.unlock()
        if let event, state.load(ordering: .relaxed) & Self.flagTerminated == 0 { deliverUncontended(event) }
    }
}

/// The locks contended serial sinks wait on, shared by all sinks: contention on a producer run
/// is rare, and a lock per run would cost an allocation on every start.
@usableFromInline
enum _SinkParking {
    // Safe to share: a lock is thread safe (it is not `Sendable` only because `ManagedBuffer` is not).
    @usableFromInline nonisolated(unsafe) static let locks: [_Lock] = (0..<16).map { _ in
        _Lock.make()
    }

    /// The lock for `object`, picked by its address.
    @inlinable
    static func lock(for object: AnyObject) -> _Lock {
        let address = UInt(bitPattern: ObjectIdentifier(object).hashValue)
        return locks[Int((address >> 5) & 15)]
    }
}

/// Debug builds: how long a contended send waits before it reports what it waits on, and where
/// the report goes (standard error; tests capture it).
@usableFromInline
enum _ContentionReport {
    nonisolated(unsafe) private static let lock = _Lock.make()  // Thread safe; see `_SinkParking.locks`.
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

    /// Reports that a send on thread `sender` has waited `seconds` for a delivery of `name`
    /// running on thread `owner`.
    @usableFromInline
    static func reportLongWait(sender: UInt, owner: UInt, of name: String) {
        let hex = { (id: UInt) in "0x" + String(id, radix: 16) }
        report(
            "ReactiveLoop: a send on thread \(hex(sender)) has waited \(seconds) s for a delivery of \(name) running "
                + "on thread \(hex(owner)). If that delivery waits for this thread, they are deadlocked: see \"A send "
                + "that waits for its own delivery deadlocks\" in docs/APIContracts.md.")
    }
}

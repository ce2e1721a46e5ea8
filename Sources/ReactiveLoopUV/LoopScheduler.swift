import CLibUV
import Dispatch
import Foundation
@_spi(ReactiveLoopRuntime) import ReactiveLoop
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A `DateScheduler` whose actions run on an `EventLoop`'s thread.
///
/// `schedule(_:)` is `loop.execute`: actions run in the order they were scheduled (per
/// scheduling thread), after the current callback. Timed actions do not get a libuv timer each:
/// the scheduler keeps a binary heap of small entries (deadline, sequence number, slot) on the
/// loop thread, driven by one timer armed for the earliest deadline, so actions with the
/// same deadline run in the order they were scheduled. Disposing an action releases it at once
/// (on the loop thread); the heap drops the dead entry later and is compacted when more than
/// half of it is dead, so schedule-and-cancel cycles keep memory flat.
///
/// Deadlines are on the monotonic clock, fixed when the action is scheduled: a wall-clock jump
/// neither fires an action early nor stalls it. The timer is a Linux `timerfd` polled by the loop,
/// not a libuv timer (libuv counts whole milliseconds): it expires at the deadline to the
/// nanosecond, without timer slack, so a timed action runs when the loop thread wakes after its
/// deadline (tens of microseconds later on an idle loop), never earlier.
///
/// Scheduling onto a stopped loop returns `nil` and the action never runs. When the loop stops,
/// pending timed actions are dropped, unrun.
public final class LoopScheduler: DateScheduler, @unchecked Sendable {  // Loop-thread state is marked below.
    /// The loop the actions run on.
    public let loop: EventLoop
    private let clock: _WallClockMapping

    /// One heap entry: plain values only, so the heap is one contiguous array.
    private struct Entry: _HeapElement {
        var deadline: UInt64
        var sequence: UInt64
        var slot: Int32

        func precedes(_ other: Entry) -> Bool { (deadline, sequence) < (other.deadline, other.sequence) }
    }

    // Confined to the loop thread. A min-heap on (deadline, sequence).
    private var heap = _BinaryHeap<Entry>()
    // Confined to the loop thread. The action each live entry runs; `nil` slots are free.
    private var slots: [_LoopTimedAction?] = []
    // Confined to the loop thread.
    private var freeSlots: [Int32] = []
    // Confined to the loop thread. Heap entries whose action was disposed.
    private var deadEntries = 0
    // Confined to the loop thread.
    private var nextSequence: UInt64 = 0
    // Confined to the loop thread. Polls `timerFD`; created on first use, nil after the loop
    // shut down.
    private var timer: UnsafeMutablePointer<uv_poll_t>?
    // Confined to the loop thread. The timerfd for the earliest deadline.
    private var timerFD: Int32 = -1
    // Confined to the loop thread. The deadline the timer is armed for.
    private var armedFor: UInt64?
    // Confined to the loop thread.
    private var isShutDown = false
    // Confined to the loop thread. Set while timed actions are pending: they run even if the
    // scheduler is released (the `DateScheduler` contract), and the armed timer's callback
    // never finds the scheduler gone.
    private var keepAlive: LoopScheduler?

    /// A scheduler on `loop`.
    public convenience init(loop: EventLoop) {
        self.init(loop: loop, wallClock: { Date() })
    }

    /// A scheduler on `loop` whose `currentDate` comes from `wallClock` (tests inject jumps).
    @_spi(Testing)
    public init(loop: EventLoop, wallClock: @escaping @Sendable () -> Date) {
        self.loop = loop
        self.clock = _WallClockMapping(wallClock: wallClock)
    }

    deinit {
        // The timer handle holds no reference to the scheduler. Its shutdown action closes it;
        // run that action now, on the loop thread, or the loop runs it when it shuts down.
        let key = ObjectIdentifier(self)
        let loop = self.loop
        loop.execute { loop.removeShutdownAction(key)?() }
    }

    /// The current wall-clock date.
    public var currentDate: Date { clock.currentDate }

    /// Runs `action` on the loop thread after the work already queued.
    ///
    /// - Returns: A disposable that cancels the action if it has not started, or `nil` if the
    ///   loop was stopped (the action never runs).
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        let item = _LoopAction(action)
        let accepted = loop.execute { item.run() }
        return accepted ? item : nil
    }

    /// Runs `action` on the loop thread at `date` (at once, as `schedule(_:)` does, if `date` is
    /// not in the future; never if `date` is infinitely far).
    ///
    /// - Precondition: `date` is not NaN.
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        switch clock.deadline(for: date, "LoopScheduler.schedule(after:action:)") {
        case .now: return schedule(action)
        case .never: return AnyDisposable()
        case let .at(deadline): return add(_LoopTimedAction(action, interval: 0, scheduler: self), at: deadline)
        }
    }

    /// Runs `action` at `date`, then every `interval`, until the disposable is disposed.
    /// Releasing the disposable without disposing it does not stop the timer.
    ///
    /// - Precondition: `interval` is positive and finite, `leeway` is finite and not negative,
    ///   and `date` is not NaN. The leeway is not used: the loop's timer is already coarse.
    @discardableResult
    public func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval, action: @escaping () -> Void
    ) -> (any Disposable)? {
        let api = "LoopScheduler.schedule(after:interval:leeway:action:)"
        _checkRepeating(date: date, interval: interval, leeway: leeway, api)
        let period = UInt64(interval._saturatingNanoseconds)
        let item = _LoopTimedAction(action, interval: period, scheduler: self)
        switch clock.deadline(for: date, api) {
        case .now: return add(item, at: uv_hrtime())
        case .never: return AnyDisposable()
        case let .at(deadline): return add(item, at: deadline)
        }
    }

    private func add(_ item: _LoopTimedAction, at deadline: UInt64) -> (any Disposable)? {
        if loop.inEventLoop {
            insert(item, at: deadline)
            return item
        }
        return loop.execute { [self] in insert(item, at: deadline) } ? item : nil
    }

    // MARK: Loop thread

    /// Heap entries and slots in use (loop thread only; tests check memory stays bounded).
    var storageSizes: (heap: Int, slots: Int) { (heap.count, slots.count - freeSlots.count) }

    private func insert(_ item: _LoopTimedAction, at deadline: UInt64) {
        guard !isShutDown, !item.isDisposed else { return }
        if timer == nil { startTimer() }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = item
        } else {
            slot = Int32(slots.count)
            slots.append(item)
        }
        item.slot = slot
        push(Entry(deadline: deadline, sequence: nextSequence, slot: slot), for: item)
        arm()
    }

    private func push(_ entry: Entry, for item: _LoopTimedAction) {
        item.sequence = entry.sequence
        nextSequence += 1
        heap.insert(entry)
    }

    /// Releases a disposed action at once; its heap entry is dropped when it comes up.
    fileprivate func remove(_ item: _LoopTimedAction) {
        guard item.slot >= 0 else { return }
        slots[Int(item.slot)] = nil
        freeSlots.append(item.slot)
        item.slot = -1
        deadEntries += 1
        if deadEntries > 64 && deadEntries * 2 > heap.count { compact() }
        if deadEntries == heap.count { arm() }
    }

    /// Whether `entry` still names a live action.
    private func isLive(_ entry: Entry) -> Bool {
        guard let item = slots[Int(entry.slot)] else { return false }
        return item.sequence == entry.sequence
    }

    private func compact() {
        heap.removeAll { !isLive($0) }
        deadEntries = 0
    }

    private func startTimer() {
        let fd = clibuv_timerfd_create()
        let handle = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
        let status = fd < 0 ? fd : uv_poll_init(loop.uvLoop, handle, fd)
        // Out of descriptors: nothing could wake the loop for timed actions; say so at once.
        _require(status == 0, "LoopScheduler: cannot create its timer: \(UVError(code: status, operation: "timerfd"))")
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        timer = handle
        timerFD = fd
        uv_poll_start(handle, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            // `fire` may drop `keepAlive`, the last reference: hold one for the call.
            let scheduler = Unmanaged<LoopScheduler>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            withExtendedLifetime(scheduler) { scheduler.fire() }
        }
        let timer = _Unchecked((handle, fd))
        loop.onShutdown(ObjectIdentifier(self)) { [weak self] in
            self?.dropPendingActions()
            LoopScheduler.close(timer.value.0, fd: timer.value.1)
        }
    }

    /// Arms the timer for the earliest live deadline, to the nanosecond: a timerfd on the
    /// monotonic clock (the clock of `uv_hrtime`), which the loop polls. The kernel adds no timer
    /// slack to a timerfd, so the action runs as soon as the loop thread wakes.
    private func arm() {
        while let first = heap.first, !isLive(first) {
            popFirst()
            deadEntries = max(0, deadEntries - 1)
        }
        guard timer != nil else { return }
        guard let first = heap.first else {
            if armedFor != nil { clibuv_timerfd_arm(timerFD, 0) }
            armedFor = nil
            keepAlive = nil
            return
        }
        keepAlive = self
        if let armedFor, armedFor == first.deadline { return }
        armedFor = first.deadline
        // A deadline in the past expires at once; 0 would disarm.
        clibuv_timerfd_arm(timerFD, max(first.deadline, 1))
    }

    private func fire() {
        _ = clibuv_read_counter(timerFD)
        armedFor = nil
        let now = uv_hrtime()
        while let first = heap.first, first.deadline <= now || !isLive(first) {
            popFirst()
            guard let item = slots[Int(first.slot)], item.sequence == first.sequence else {
                deadEntries = max(0, deadEntries - 1)
                continue
            }
            if item.interval == 0 {
                slots[Int(first.slot)] = nil
                freeSlots.append(first.slot)
                item.slot = -1
            } else {
                // Next occurrence from the planned deadline, so a late tick does not drift.
                var next = first.deadline &+ item.interval
                if next <= now { next = now &+ item.interval - (now - first.deadline) % item.interval }
                push(Entry(deadline: next, sequence: nextSequence, slot: first.slot), for: item)
            }
            item.action()
        }
        arm()
    }

    private func popFirst() {
        heap.remove(at: 0)
    }

    /// The loop is shutting down: drop every pending action, unrun; the timer is closed next.
    private func dropPendingActions() {
        isShutDown = true
        heap.removeAll()
        slots = []
        freeSlots = []
        timer = nil
        keepAlive = nil
    }

    private static func close(_ timer: UnsafeMutablePointer<uv_poll_t>, fd: Int32) {
        uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self)) { handle in
            UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_poll_t.self).deallocate()
        }
        // Closing the handle stopped polling the descriptor; nothing in libuv uses it any more.
        Glibc.close(fd)
    }
}

/// An action scheduled with `schedule(_:)`: its own disposable.
final class _LoopAction: Disposable, @unchecked Sendable {  // `action` is handed over by `state`.
    private let state = Atomic<Bool>(false)
    // Read once by the winner of `state`.
    private var action: (() -> Void)?

    init(_ action: @escaping () -> Void) { self.action = action }

    var isDisposed: Bool { state.load(ordering: .acquiring) }

    /// Runs the action unless it was disposed first.
    func run() {
        guard state.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let action = self.action
        self.action = nil
        action?()
    }

    func dispose() {
        guard state.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        action = nil
    }
}

/// A timed action of a `LoopScheduler`, and its disposable.
final class _LoopTimedAction: Disposable, @unchecked Sendable {  // Vars: confined to the loop thread.
    let action: () -> Void
    /// Nanoseconds between occurrences; 0 for a one-shot action.
    let interval: UInt64
    private let disposed = Atomic<Bool>(false)
    private weak var scheduler: LoopScheduler?
    // Confined to the loop thread. The slot holding this action, or -1.
    var slot: Int32 = -1
    // Confined to the loop thread. The sequence number of this action's heap entry.
    var sequence: UInt64 = 0

    init(_ action: @escaping () -> Void, interval: UInt64, scheduler: LoopScheduler) {
        self.action = action
        self.interval = interval
        self.scheduler = scheduler
    }

    var isDisposed: Bool { disposed.load(ordering: .acquiring) }

    /// Cancels the action (any occurrence that has not started) and releases it on the loop
    /// thread.
    func dispose() {
        guard disposed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged,
            let scheduler
        else { return }
        if scheduler.loop.inEventLoop {
            scheduler.remove(self)
        } else {
            scheduler.loop.execute { [self] in scheduler.remove(self) }
        }
    }
}

/// A value handed to the loop thread that the type system cannot prove safe to share.
struct _Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

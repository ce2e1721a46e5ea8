import CLibUV
import Dispatch
import ReactiveLoopCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
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
/// Order: an action never overtakes one scheduled before it for the same or an earlier date.
/// A date not in the future runs the action as `schedule(_:)` does, unless a timed action for
/// the same or an earlier date is still pending (the loop ran late): then it runs right after
/// that one.
///
/// Deadlines are on the monotonic clock, fixed when the action is scheduled: a wall-clock jump
/// neither fires an action early nor stalls it. The timer is a Linux `timerfd` polled by the loop,
/// not a libuv timer (libuv counts whole milliseconds): it expires at the deadline to the
/// nanosecond, without timer slack, so a timed action runs when the loop thread wakes after its
/// deadline (tens of microseconds later on an idle loop), never earlier. If no descriptor can be
/// had for it (the process is out of them), the scheduler falls back to a libuv timer, rounded
/// up to the next millisecond.
///
/// Pending timed actions run even if the scheduler is released (the loop holds them until they
/// have run or are disposed; before the loop first runs, they are kept by the scheduler).
/// Scheduling onto a stopped loop returns `nil` and the action never runs. When the loop stops,
/// pending timed actions are dropped, unrun.
public final class LoopScheduler: DateScheduler, @unchecked Sendable {  // Loop-thread state is marked below.
    /// The loop the actions run on.
    public let loop: EventLoop
    private let clock: _WallClockMapping
    /// The timed actions and their timer (opened on the loop thread at the first timed action).
    private let timers: _LoopTimers

    /// A scheduler on `loop`.
    public convenience init(loop: EventLoop) {
        self.init(loop: loop, wallClock: { Date() })
    }

    /// A scheduler on `loop` whose `currentDate` comes from `wallClock` (tests inject jumps).
    @_spi(Testing)
    public init(loop: EventLoop, wallClock: @escaping @Sendable () -> Date) {
        self.loop = loop
        self.clock = _WallClockMapping(wallClock: wallClock)
        timers = _LoopTimers(loop: loop)
    }

    deinit {
        // The timer closes once its pending actions have run (they outlive the scheduler).
        let handed = _Unchecked(timers)
        _ = loop.onLoopThread { handed.value.closeWhenIdle() }
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
    /// not in the future and no timed action for the same or an earlier date is pending; never if
    /// `date` is infinitely far).
    ///
    /// - Precondition: `date` is not NaN.
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        switch clock.deadline(for: date, "LoopScheduler.schedule(after:action:)") {
        case .now:
            return scheduleDue(_LoopTimedAction(action, interval: 0, loop: loop), at: clock.monotonicTime(ofPast: date))
        case .never: return AnyDisposable()
        case let .at(deadline): return add(_LoopTimedAction(action, interval: 0, loop: loop), at: deadline)
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
        let period = UInt64(interval.nanoseconds)
        let item = _LoopTimedAction(action, interval: period, loop: loop)
        switch clock.deadline(for: date, api) {
        case .now: return add(item, at: clock.monotonicTime(ofPast: date))
        case .never: return AnyDisposable()
        case let .at(deadline): return add(item, at: deadline)
        }
    }

    private func add(_ item: _LoopTimedAction, at deadline: UInt64) -> (any Disposable)? {
        loop.onLoopThread { [timers] in timers.insert(item, at: deadline) } ? item : nil
    }

    /// A one-shot action whose date has come: it runs as an immediate action unless a timed
    /// action due at or before `deadline` is pending, which it must not overtake.
    private func scheduleDue(_ item: _LoopTimedAction, at deadline: UInt64) -> (any Disposable)? {
        if loop.inEventLoop {
            if timers.hasPending(dueBy: deadline) {
                timers.insert(item, at: deadline)
                return item
            }
            return loop.execute { item.runOnce() } ? item : nil
        }
        // Not the scheduler: a closure queued on a loop that never runs must not keep the loop
        // alive (the timers hold it only through the loop's weak registry until its first run).
        let handed = _WeakTimers(timers)
        let accepted = loop.execute {
            if let timers = handed.timers, timers.hasPending(dueBy: deadline) {
                timers.insert(item, at: deadline)
            } else {
                item.runOnce()
            }
        }
        return accepted ? item : nil
    }

    /// Heap entries and slots in use (loop thread only; tests check memory stays bounded).
    var storageSizes: (heap: Int, slots: Int) { timers.storageSizes }

    /// Whether the timer is a libuv timer (no descriptor was available for a timerfd). Loop
    /// thread; tests.
    var usesFallbackTimer: Bool { timers.handle != nil && timers.fd < 0 }

    /// Tests: the result to use instead of creating the timerfd (a negative errno forces the
    /// libuv-timer fallback). Set before the first timed action.
    var timerDescriptorForTesting: Int32? {
        get { timers.descriptorForTesting }
        set { timers.descriptorForTesting = newValue }
    }
}

/// A weak reference to a scheduler's timers, handed to a queued closure.
struct _WeakTimers: @unchecked Sendable {  // Read on the loop thread only.
    weak var timers: _LoopTimers?
    init(_ timers: _LoopTimers) { self.timers = timers }
}

/// The timed actions of a `LoopScheduler` and the one timer that fires them: a timerfd polled by
/// the loop, or a libuv timer if no descriptor could be had.
///
/// The loop owns the timer's handle, and holds this object until the handle's close callback, so
/// the timer's callback never finds it freed, whoever releases the scheduler or disposes an
/// action, in whatever order the callbacks of one poll come. Confined to the loop thread.
final class _LoopTimers: _LoopOwnedHandle, @unchecked Sendable {  // Confined to the loop thread.
    /// One heap entry: plain values only, so the heap is one contiguous array.
    private struct Entry: _HeapElement {
        var deadline: UInt64
        var sequence: UInt64
        var slot: Int32

        func precedes(_ other: Entry) -> Bool { (deadline, sequence) < (other.deadline, other.sequence) }
    }

    let loop: EventLoop
    var handle: UnsafeMutablePointer<uv_handle_t>?
    /// The timerfd, or -1 with a libuv timer (or before the timer is opened).
    private(set) var fd: Int32 = -1
    // Closed (the loop shut down, or the scheduler went with nothing pending): takes no action.
    private var isClosed = false
    /// Tests: used instead of creating the timerfd (a negative errno forces the fallback).
    var descriptorForTesting: Int32?
    // A min-heap on (deadline, sequence).
    private var heap = _BinaryHeap<Entry>()
    // The action each live entry runs; `nil` slots are free.
    private var slots: [_LoopTimedAction?] = []
    private var freeSlots: [Int32] = []
    // Heap entries whose action was disposed.
    private var deadEntries = 0
    private var nextSequence: UInt64 = 0
    // The deadline the timer is armed for.
    private var armedFor: UInt64?
    // The scheduler was released: close once no action is pending.
    private var closesWhenIdle = false

    /// Timers on `loop`; the timer itself is opened at the first timed action.
    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Opens the timer: a timerfd polled by the loop, or a libuv timer if no descriptor can be
    /// had. Loop thread.
    private func open() {
        let descriptor = descriptorForTesting ?? clibuv_timerfd_create()
        if descriptor >= 0 {
            let poll = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
            let status = uv_poll_init(loop.uvLoop, poll, descriptor)
            _require(
                status == 0,
                "LoopScheduler: uv_poll_init on its timerfd: \(UVError(code: status, operation: "uv_poll_init"))")
            fd = descriptor
            adopt(poll)
            uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, _, _ in
                _LoopTimers.owner(of: handle).fire()
            }
        } else {
            let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
            uv_timer_init(loop.uvLoop, timer)
            adopt(timer)
        }
    }

    deinit {
        // Released before the loop first ran (its descriptor closed once libuv let go of it), or
        // after the handle's close callback.
        if handle != nil {
            closeOrphanedHandle(thenClosing: fd)
        } else if fd >= 0 {
            Glibc.close(fd)
        }
    }

    var storageSizes: (heap: Int, slots: Int) { (heap.count, slots.count - freeSlots.count) }

    func handleWillClose(interrupted: Bool) {
        isClosed = true
        // The loop is shutting down, or nothing is pending: drop what is left, unrun.
        heap.removeAll()
        for case let item? in slots { item.slot = -1 }
        slots = []
        freeSlots = []
        deadEntries = 0
    }

    /// The scheduler was released: close the timer now if nothing is pending, else once the
    /// pending actions have run or been disposed.
    func closeWhenIdle() {
        closesWhenIdle = true
        if handle == nil { isClosed = true }
        arm()
    }

    /// Whether an action due at or before `deadline` is pending.
    func hasPending(dueBy deadline: UInt64) -> Bool {
        loop.assertInEventLoop()
        guard let first = heap.first else { return false }
        // A dead first entry is conservative: the action then waits for the timer, in order.
        return first.deadline <= deadline
    }

    func insert(_ item: _LoopTimedAction, at deadline: UInt64) {
        loop.assertInEventLoop()
        guard !isClosed, !item.isDisposed else { return }
        if handle == nil { open() }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = item
        } else {
            slot = Int32(slots.count)
            slots.append(item)
        }
        item.slot = slot
        item.timers = self
        push(Entry(deadline: deadline, sequence: nextSequence, slot: slot), for: item)
        arm()
    }

    private func push(_ entry: Entry, for item: _LoopTimedAction) {
        item.sequence = entry.sequence
        nextSequence += 1
        heap.insert(entry)
    }

    /// Releases a disposed action at once; its heap entry is dropped when it comes up.
    func remove(_ item: _LoopTimedAction) {
        loop.assertInEventLoop()
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

    /// Arms the timer for the earliest live deadline, or closes it when the scheduler is gone and
    /// nothing is pending. A timerfd expires to the nanosecond (the monotonic clock of
    /// `uv_hrtime`; the kernel adds no slack to it); a libuv timer, to the next millisecond.
    private func arm() {
        while let first = heap.first, !isLive(first) {
            heap.remove(at: 0)
            deadEntries = max(0, deadEntries - 1)
        }
        guard let handle else { return }
        guard let first = heap.first else {
            if armedFor != nil { disarm(handle) }
            armedFor = nil
            if closesWhenIdle { closeOnLoop(interrupted: false) }
            return
        }
        if let armedFor, armedFor == first.deadline { return }
        armedFor = first.deadline
        if fd >= 0 {
            // A deadline in the past expires at once; 0 would disarm.
            clibuv_timerfd_arm(fd, max(first.deadline, 1))
        } else {
            let timer = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_timer_t.self)
            uv_update_time(loop.uvLoop)
            let now = uv_hrtime()
            let wait = first.deadline > now ? (first.deadline - now + 999_999) / 1_000_000 : 0
            uv_timer_start(timer, { timer in _LoopTimers.owner(of: timer).fire() }, wait, 0)
        }
    }

    private func disarm(_ handle: UnsafeMutablePointer<uv_handle_t>) {
        if fd >= 0 {
            clibuv_timerfd_arm(fd, 0)
        } else {
            uv_timer_stop(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_timer_t.self))
        }
    }

    private func fire() {
        loop.assertInEventLoop()
        if fd >= 0 { _ = clibuv_read_counter(fd) }
        armedFor = nil
        let now = uv_hrtime()
        while handle != nil, let first = heap.first, first.deadline <= now || !isLive(first) {
            heap.remove(at: 0)
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
    // Weak: an action queued on a loop that never runs must not keep the loop alive.
    private weak var loop: EventLoop?
    // Confined to the loop thread. The timers holding this action, once inserted.
    weak var timers: _LoopTimers?
    // Confined to the loop thread. The slot holding this action, or -1.
    var slot: Int32 = -1
    // Confined to the loop thread. The sequence number of this action's heap entry.
    var sequence: UInt64 = 0

    init(_ action: @escaping () -> Void, interval: UInt64, loop: EventLoop) {
        self.action = action
        self.interval = interval
        self.loop = loop
    }

    var isDisposed: Bool { disposed.load(ordering: .acquiring) }

    /// Runs a due one-shot action that went straight to the loop's queue, unless disposed.
    func runOnce() {
        guard disposed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        action()
    }

    /// Cancels the action (any occurrence that has not started) and releases it on the loop
    /// thread.
    func dispose() {
        guard disposed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        _ = loop?.onLoopThread { [self] in timers?.remove(self) }
    }
}

/// A value handed to the loop thread that the type system cannot prove safe to share.
struct _Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension LoopScheduler: _ClockScheduler {
    /// Now on the monotonic clock, in seconds.
    @usableFromInline
    package var _clockNow: TimeInterval { _WallClockMapping.monotonicSeconds }

    /// Runs `action` on the loop thread at `time` on the monotonic clock; see `_ClockScheduler`.
    @usableFromInline @discardableResult
    package func _schedule(atClock time: TimeInterval, action: @escaping () -> Void) -> (any Disposable)? {
        guard let deadline = _WallClockMapping.monotonicDeadline(time) else { return AnyDisposable() }
        let item = _LoopTimedAction(action, interval: 0, loop: loop)
        if deadline > _WallClockMapping.monotonicNow { return add(item, at: deadline) }
        return scheduleDue(item, at: deadline)
    }
}

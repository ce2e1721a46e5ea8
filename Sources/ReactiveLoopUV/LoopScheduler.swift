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
/// the scheduler keeps a binary heap of small entries (deadline, sequence number, action) on
/// the loop thread, driven by one timer armed for the earliest deadline, so actions with the
/// same deadline run in the order they were scheduled. Disposing an action releases its closure
/// at once (on the loop thread), and it never runs once `dispose()` has returned; the heap drops
/// the dead entry later and is compacted when more than half of it is dead, so
/// schedule-and-cancel cycles keep memory flat.
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
        self.init(loop: loop, wallClock: nil)
    }

    /// A scheduler on `loop` whose `currentDate` comes from `wallClock` (tests inject jumps; nil:
    /// the system clock).
    @_spi(Testing)
    public init(loop: EventLoop, wallClock: (@Sendable () -> Date)?) {
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
            let item = _LoopTimedAction(action, interval: 0, timers: timers)
            return scheduleDue(item, at: clock.monotonicTime(ofPast: date))
        case .never: return AnyDisposable()
        case let .at(deadline): return add(_LoopTimedAction(action, interval: 0, timers: timers), at: deadline)
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
        let item = _LoopTimedAction(action, interval: period, timers: timers)
        switch clock.deadline(for: date, api) {
        case .now: return add(item, at: clock.monotonicTime(ofPast: date))
        case .never: return AnyDisposable()
        case let .at(deadline): return add(item, at: deadline)
        }
    }

    private func add(_ item: _LoopTimedAction, at deadline: UInt64) -> (any Disposable)? {
        if loop.inEventLoop {
            timers.insert(item, at: deadline)
            return item
        }
        return loop.onLoopThread { [timers] in timers.insert(item, at: deadline) } ? item : nil
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
        let link = timers.link
        let accepted = loop.execute {
            if let timers = link.timers, timers.hasPending(dueBy: deadline) {
                timers.insert(item, at: deadline)
            } else {
                item.runOnce()
            }
        }
        return accepted ? item : nil
    }

    /// Heap entries, and actions pending in them (loop thread only; tests check memory stays
    /// bounded).
    var storageSizes: (heap: Int, pending: Int) { timers.storageSizes }

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

/// How a timed action reaches its timers from any thread: one per `_LoopTimers`, shared by all
/// of its actions, so that an action holds one plain strong reference instead of forming weak
/// references of its own (each costs atomic operations on a side table, at every action).
final class _LoopTimersLink: @unchecked Sendable {  // Weak loads are thread safe; `timers`: loop thread.
    // Weak: an action queued on a loop that never runs must not keep the loop alive.
    weak var loop: EventLoop?
    // Weak: pending actions must not keep their timers (and its handle) alive.
    weak var timers: _LoopTimers?

    init(loop: EventLoop) { self.loop = loop }
}

/// The timed actions of a `LoopScheduler` and the one timer that fires them: a timerfd polled by
/// the loop, or a libuv timer if no descriptor could be had.
///
/// The loop owns the timer's handle, and holds this object until the handle's close callback, so
/// the timer's callback never finds it freed, whoever releases the scheduler or disposes an
/// action, in whatever order the callbacks of one poll come. Confined to the loop thread.
///
/// The heap's entries hold their actions (one retain each, taken at the push and given back
/// when the entry leaves the heap), so that neither an insertion nor a firing looks anything up
/// outside the heap. An entry is live while its action's `sequence` is the entry's; disposing an
/// action changes that, and releases the action's closure at once.
final class _LoopTimers: _LoopOwnedHandle, @unchecked Sendable {  // Confined to the loop thread.
    /// One heap entry: plain values only (the action is held manually), so the heap is one
    /// contiguous array that moves without reference counting.
    private struct Entry: _HeapElement {
        var deadline: UInt64
        var sequence: UInt64
        var item: Unmanaged<_LoopTimedAction>

        func precedes(_ other: Entry) -> Bool { (deadline, sequence) < (other.deadline, other.sequence) }
    }

    let loop: EventLoop
    /// Shared by every action of these timers.
    let link: _LoopTimersLink
    var handle: UnsafeMutablePointer<uv_handle_t>?
    /// The timerfd, or -1 with a libuv timer (or before the timer is opened).
    private(set) var fd: Int32 = -1
    // Closed (the loop shut down, or the scheduler went with nothing pending): takes no action.
    @exclusivity(unchecked) private var isClosed = false
    /// Tests: used instead of creating the timerfd (a negative errno forces the fallback).
    var descriptorForTesting: Int32?
    // A min-heap on (deadline, sequence). No access is held across a call out of this class.
    @exclusivity(unchecked) private var heap = _BinaryHeap<Entry>()
    // Actions in the heap that were not disposed.
    @exclusivity(unchecked) private var pending = 0
    // Heap entries whose action was disposed.
    @exclusivity(unchecked) private var deadEntries = 0
    @exclusivity(unchecked) private var nextSequence: UInt64 = 0
    // The deadline the timer is armed for.
    @exclusivity(unchecked) private var armedFor: UInt64?
    // The scheduler was released: close once no action is pending.
    private var closesWhenIdle = false

    /// Timers on `loop`; the timer itself is opened at the first timed action.
    init(loop: EventLoop) {
        self.loop = loop
        link = _LoopTimersLink(loop: loop)
        link.timers = self
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
        releaseEntries()
        if handle != nil {
            closeOrphanedHandle(thenClosing: fd)
        } else if fd >= 0 {
            Glibc.close(fd)
        }
    }

    var storageSizes: (heap: Int, pending: Int) { (heap.count, pending) }

    func handleWillClose(interrupted: Bool) {
        isClosed = true
        // The loop is shutting down, or nothing is pending: drop what is left, unrun.
        releaseEntries()
    }

    /// Empties the heap, giving back each entry's action (their closures go at once).
    private func releaseEntries() {
        let entries = heap.elements
        heap.removeAll()
        pending = 0
        deadEntries = 0
        for entry in entries {
            let item = entry.item.takeRetainedValue()
            item.sequence = _LoopTimedAction.notPending
            item.action = nil
        }
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

    /// Adds `item` (an action of these timers, not yet added) to run at `deadline`.
    func insert(_ item: _LoopTimedAction, at deadline: UInt64) {
        loop.assertInEventLoop()
        guard !isClosed, !item.isDisposed else { return }
        if handle == nil { open() }
        pending += 1
        push(item, at: deadline, retained: Unmanaged.passRetained(item))
        arm()
    }

    /// Pushes an entry holding `retained` (a +1 reference to `item`).
    @inline(__always)
    private func push(_ item: _LoopTimedAction, at deadline: UInt64, retained: Unmanaged<_LoopTimedAction>) {
        item.sequence = nextSequence
        heap.insert(Entry(deadline: deadline, sequence: nextSequence, item: retained))
        nextSequence += 1
    }

    /// Cancels a disposed action: its closure goes at once; its heap entry, when it comes up or
    /// at the next compaction.
    func remove(_ item: _LoopTimedAction) {
        loop.assertInEventLoop()
        item.action = nil
        guard item.sequence != _LoopTimedAction.notPending else { return }
        item.sequence = _LoopTimedAction.notPending
        pending -= 1
        deadEntries += 1
        if deadEntries > 64 && deadEntries * 2 > heap.count { compact() }
        if deadEntries == heap.count { arm() }
    }

    /// Whether `entry` is still its action's entry.
    @inline(__always)
    private static func isLive(_ entry: Entry) -> Bool {
        entry.item._withUnsafeGuaranteedRef { $0.sequence == entry.sequence }
    }

    private func compact() {
        heap.removeAll { entry in
            if Self.isLive(entry) { return false }
            entry.item.release()
            return true
        }
        deadEntries = 0
    }

    /// Arms the timer for the earliest live deadline, or closes it when the scheduler is gone and
    /// nothing is pending. A timerfd expires to the nanosecond (the monotonic clock of
    /// `uv_hrtime`; the kernel adds no slack to it); a libuv timer, to the next millisecond.
    private func arm() {
        while let first = heap.first, !Self.isLive(first) {
            heap.remove(at: 0)
            first.item.release()
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
        while handle != nil, let first = heap.first, first.deadline <= now || !Self.isLive(first) {
            heap.remove(at: 0)
            guard Self.isLive(first) else {
                first.item.release()
                deadEntries = max(0, deadEntries - 1)
                continue
            }
            let item = first.item.takeUnretainedValue()
            if item.interval == 0 || item.isDisposed {
                // A one-shot action (or one disposed on another thread, whose removal is still
                // on its way): it leaves. Claiming it makes a dispose from now on a no-op.
                item.sequence = _LoopTimedAction.notPending
                pending -= 1
                let action = item.action
                item.action = nil
                first.item.release()
                if item.claim() { action?() }
            } else {
                // Next occurrence from the planned deadline, so a late tick does not drift.
                var next = first.deadline &+ item.interval
                if next <= now { next = now &+ item.interval - (now - first.deadline) % item.interval }
                push(item, at: next, retained: first.item)
                item.action?()
            }
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

/// A timed action of a `LoopScheduler` (or of the runtime's own timers), and its disposable.
final class _LoopTimedAction: Disposable, @unchecked Sendable {  // Vars: confined to the loop thread.
    /// The `sequence` of an action that has no live heap entry.
    static let notPending = UInt64.max

    /// Confined to the loop thread. Released when the action is disposed, or has run for the
    /// last time.
    @exclusivity(unchecked) var action: (() -> Void)?
    // The interval shifted left by one, and in the low bit whether the action was disposed (or
    // claimed): one word, so that the object fits a 64-byte allocation.
    private let state: Synchronization.Atomic<UInt64>
    private let link: _LoopTimersLink
    /// Confined to the loop thread. The sequence number of this action's live heap entry, or
    /// `notPending`.
    @exclusivity(unchecked) var sequence: UInt64 = _LoopTimedAction.notPending

    /// An action that runs every `interval` nanoseconds (below 2^63), or once if it is 0.
    init(_ action: @escaping () -> Void, interval: UInt64, timers: _LoopTimers) {
        assert(interval >> 63 == 0, "_LoopTimedAction: interval \(interval) ns does not fit")
        self.action = action
        self.state = Synchronization.Atomic(interval << 1)
        self.link = timers.link
    }

    /// Nanoseconds between occurrences; 0 for a one-shot action.
    var interval: UInt64 { state.load(ordering: .relaxed) >> 1 }

    var isDisposed: Bool { state.load(ordering: .acquiring) & 1 != 0 }

    /// Marks the action as started for good (a one-shot); false if it was disposed first.
    func claim() -> Bool {
        state.bitwiseOr(1, ordering: .acquiringAndReleasing).oldValue & 1 == 0
    }

    /// Runs a due one-shot action that went straight to the loop's queue, unless disposed.
    func runOnce() {
        guard claim() else { return }
        let action = self.action
        self.action = nil
        action?()
    }

    /// Cancels the action (any occurrence that has not started) and releases it on the loop
    /// thread.
    func dispose() {
        guard claim() else { return }
        let link = self.link
        _ = link.loop?.onLoopThread { [self] in
            if let timers = link.timers {
                timers.remove(self)
            } else {
                action = nil
            }
        }
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
        let item = _LoopTimedAction(action, interval: 0, timers: timers)
        if deadline > _WallClockMapping.monotonicNow { return add(item, at: deadline) }
        return scheduleDue(item, at: deadline)
    }
}

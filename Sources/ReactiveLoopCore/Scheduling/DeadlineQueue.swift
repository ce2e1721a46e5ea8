import Dispatch
import Synchronization

/// One-shot timed actions of a queue scheduler, in deadline order, fired by one dispatch timer.
///
/// The pending actions form a binary min-heap on (deadline, sequence), so scheduling and
/// disposing cost O(log n) whatever the order of the deadlines, and actions with equal
/// deadlines run in the order they were scheduled. Each action is its own disposable (one
/// allocation per action), and disposing it removes it from the heap at once, releasing its
/// closure.
final class _DeadlineQueue: @unchecked Sendable {  // All state is protected by `lock`.
    private let lock = _Lock.make()
    private let timer: any DispatchSourceTimer
    // Protected by lock. A min-heap on (deadline, sequence); each action knows its index.
    private var heap = _BinaryHeap<_TimedAction>()
    // Protected by lock.
    private var nextSequence: UInt64 = 0
    // Protected by lock. The deadline the timer is armed for, if any.
    private var armedFor: UInt64?
    // Protected by lock. Set while actions are pending: they run even if the scheduler that
    // queued them is released (the `DateScheduler` contract).
    private var keepAlive: _DeadlineQueue?

    init(queue: DispatchQueue) {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// The actions pending (tests).
    var pendingCount: Int { lock.withLock { heap.count } }

    func schedule(at deadline: DispatchTime, _ action: @escaping () -> Void) -> any Disposable {
        let item = _TimedAction(deadline: deadline.uptimeNanoseconds, action: action, owner: self)
        lock.withLock { insertLocked(item) }
        return item
    }

    /// Schedules `action` for `deadline`, which has passed, if an action due at or before it is
    /// still pending (so it runs after that one); `nil` otherwise, and the caller runs it as an
    /// immediate action.
    func scheduleBehindPending(at deadline: UInt64, _ action: @escaping () -> Void) -> (any Disposable)? {
        lock.withLock {
            guard let first = heap.first, first.deadline <= deadline else { return nil }
            let item = _TimedAction(deadline: deadline, action: action, owner: self)
            insertLocked(item)
            return item
        }
    }

    // Requires lock.
    private func insertLocked(_ item: _TimedAction) {
        item.sequence = nextSequence
        nextSequence += 1
        heap.insert(item)
        keepAlive = self
        armLocked()
    }

    /// Removes a disposed action; its closure is released outside the lock.
    fileprivate func remove(_ item: _TimedAction) {
        let action: (() -> Void)? = lock.withLock {
            guard item.heapIndex >= 0 else { return nil }
            heap.remove(at: item.heapIndex)
            if heap.count == 0 { keepAlive = nil }
            defer { item.action = nil }
            return item.action
        }
        _ = action
    }

    // Requires lock.
    private func armLocked() {
        guard let soonest = heap.first?.deadline else {
            keepAlive = nil
            return
        }
        if let armedFor, armedFor <= soonest { return }
        armedFor = soonest
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: soonest), repeating: .never, leeway: .nanoseconds(0))
    }

    /// Runs every due action in order, on the queue, then re-arms for the next deadline.
    private func fire() {
        lock.withLock { armedFor = nil }
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            let action: (() -> Void)?? = lock.withLock {
                guard let first = heap.first, first.deadline <= now else {
                    armLocked()
                    return .none
                }
                heap.remove(at: 0)
                defer { first.action = nil }
                return .some(first.action)
            }
            guard let action else { return }
            action?()
        }
    }
}

/// One pending timed action, and its disposable. Its variables are protected by the owner's
/// lock.
final class _TimedAction: _LifetimeEndHandler, Disposable, _HeapElement, @unchecked Sendable {
    let deadline: UInt64
    // Protected by the owner's lock (set once, before the action is visible to anyone else).
    var sequence: UInt64 = 0
    // Protected by the owner's lock. `nil` once run or disposed.
    var action: (() -> Void)?
    // Protected by the owner's lock. -1 when not in the heap.
    var heapIndex = -1
    private let disposed = Synchronization.Atomic<Bool>(false)
    private weak var owner: _DeadlineQueue?

    init(deadline: UInt64, action: @escaping () -> Void, owner: _DeadlineQueue) {
        self.deadline = deadline
        self.action = action
        self.owner = owner
        super.init()
    }

    /// Attached to a lifetime's inline slot (`Lifetime._attachDisposing`): disposes.
    override func lifetimeEnded() {
        dispose()
    }

    /// Whether `dispose()` has been called.
    var isDisposed: Bool { disposed.load(ordering: .acquiring) }

    /// Cancels the action if it has not started, and releases it at once.
    func dispose() {
        guard disposed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        owner?.remove(self)
    }

    /// Heap order: earlier deadline first, then scheduling order.
    func precedes(_ other: _TimedAction) -> Bool {
        (deadline, sequence) < (other.deadline, other.sequence)
    }

    /// Records where the action is in the heap (under the owner's lock), for removal.
    func heapIndexDidChange(to index: Int) {
        heapIndex = index
    }
}

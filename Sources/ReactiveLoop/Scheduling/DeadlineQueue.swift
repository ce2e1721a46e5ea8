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
    private let lock = _Lock()
    private let timer: any DispatchSourceTimer
    // Protected by lock. A min-heap on (deadline, sequence); each action knows its index.
    private var heap: ContiguousArray<_TimedAction> = []
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

    func schedule(at deadline: DispatchTime, _ action: @escaping () -> Void) -> any Disposable {
        let item = _TimedAction(deadline: deadline.uptimeNanoseconds, action: action, owner: self)
        lock.withLock {
            item.sequence = nextSequence
            nextSequence += 1
            item.heapIndex = heap.count
            heap.append(item)
            siftUpLocked(item.heapIndex)
            keepAlive = self
            armLocked()
        }
        return item
    }

    /// Removes a disposed action; its closure is released outside the lock.
    fileprivate func remove(_ item: _TimedAction) {
        let action: (() -> Void)? = lock.withLock {
            guard item.heapIndex >= 0 else { return nil }
            removeLocked(at: item.heapIndex)
            if heap.isEmpty { keepAlive = nil }
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
                removeLocked(at: 0)
                defer { first.action = nil }
                return .some(first.action)
            }
            guard let action else { return }
            action?()
        }
    }

    // MARK: Heap (requires lock)

    private func removeLocked(at index: Int) {
        let removed = heap[index]
        let last = heap.removeLast()
        removed.heapIndex = -1
        guard index < heap.count else { return }
        heap[index] = last
        last.heapIndex = index
        if index > 0 && last.precedes(heap[(index - 1) / 2]) {
            siftUpLocked(index)
        } else {
            siftDownLocked(index)
        }
    }

    private func siftUpLocked(_ start: Int) {
        var index = start
        let item = heap[index]
        while index > 0 {
            let parent = (index - 1) / 2
            guard item.precedes(heap[parent]) else { break }
            heap[index] = heap[parent]
            heap[index].heapIndex = index
            index = parent
        }
        heap[index] = item
        item.heapIndex = index
    }

    private func siftDownLocked(_ start: Int) {
        var index = start
        let item = heap[index]
        let count = heap.count
        while true {
            var child = 2 * index + 1
            guard child < count else { break }
            if child + 1 < count && heap[child + 1].precedes(heap[child]) { child += 1 }
            guard heap[child].precedes(item) else { break }
            heap[index] = heap[child]
            heap[index].heapIndex = index
            index = child
        }
        heap[index] = item
        item.heapIndex = index
    }
}

/// One pending timed action, and its disposable.
final class _TimedAction: Disposable, @unchecked Sendable {  // Vars: protected by the owner's lock.
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
}

import Dispatch
import Foundation

/// A scheduler on a virtual clock that moves only when told to, for deterministic tests of
/// time-based code.
///
/// Actions run on the thread that calls `advance`/`run`, in deadline order; actions with the
/// same deadline run in the order they were scheduled. An action scheduled while advancing
/// runs in the same advance if it falls due before the advance's end.
///
/// The virtual clock is monotonic like every `DateScheduler` here: `rewind(by:)` moves
/// `currentDate` back, as a wall-clock change would, but deadlines already scheduled keep
/// their remaining delay.
public final class TestScheduler: DateScheduler {
    private struct Item {
        let deadline: TimeInterval  // On the monotonic virtual clock.
        let sequence: UInt64
        let action: () -> Void
        let cancelled: AnyDisposable
    }

    private let lock = _Lock()
    private let startDate: Date
    // Protected by lock. Seconds since `startDate` on the monotonic virtual clock.
    private var now: TimeInterval = 0
    // Protected by lock. Wall-clock adjustments (`rewind`).
    private var wallOffset: TimeInterval = 0
    // Protected by lock. Sorted by (deadline, sequence).
    private var items: [Item] = []
    // Protected by lock.
    private var nextSequence: UInt64 = 0

    /// Creates a test scheduler whose clock starts at `startDate`.
    public init(startDate: Date = Date(timeIntervalSinceReferenceDate: 0)) {
        self.startDate = startDate
    }

    /// The virtual date.
    public var currentDate: Date {
        lock.withLock { startDate.addingTimeInterval(now + wallOffset) }
    }

    /// Schedules `action` to run at the current virtual time (on the next `advance`).
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        enqueue(delay: 0, action)
    }

    /// Schedules `action` to run after `delay` of virtual time.
    @discardableResult
    public func schedule(after delay: DispatchTimeInterval, action: @escaping () -> Void) -> (any Disposable)? {
        enqueue(delay: delay.timeInterval, action)
    }

    /// Schedules `action` to run at `date` (converted to a delay now).
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        enqueue(delay: date.timeIntervalSince(currentDate), action)
    }

    /// Schedules `action` at `date`, then every `interval`, until disposed.
    ///
    /// - Precondition: `interval` is positive.
    @discardableResult
    public func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval = .seconds(0),
        action: @escaping () -> Void
    ) -> (any Disposable)? {
        let seconds = interval.timeInterval
        precondition(
            seconds > 0 && seconds.isFinite,
            "TestScheduler.schedule(after:interval:leeway:action:): interval must be positive, got \(interval)")
        let repeating = SerialDisposable()
        func occurrence(after delay: TimeInterval) {
            repeating.inner = enqueue(delay: delay) {
                action()
                occurrence(after: seconds)
            }
        }
        occurrence(after: date.timeIntervalSince(currentDate))
        return repeating
    }

    @discardableResult
    private func enqueue(delay: TimeInterval, _ action: @escaping () -> Void) -> any Disposable {
        let cancelled = AnyDisposable()
        lock.withLock {
            let item = Item(
                deadline: now + max(0, delay), sequence: nextSequence, action: action, cancelled: cancelled)
            nextSequence += 1
            let index = items.partitionPoint { ($0.deadline, $0.sequence) > (item.deadline, item.sequence) }
            items.insert(item, at: index)
        }
        return cancelled
    }

    /// Advances the clock by the smallest step (one nanosecond), running what falls due.
    public func advance() {
        advanceSeconds(1e-9, api: "advance()")
    }

    /// Advances the clock by `interval`, running every action that falls due, in order.
    public func advance(by interval: DispatchTimeInterval) {
        advanceSeconds(interval.timeInterval, api: "advance(by:)")
    }

    /// Advances the clock by `interval` seconds, running every action that falls due.
    ///
    /// - Precondition: `interval >= 0`.
    public func advance(by interval: TimeInterval) {
        advanceSeconds(interval, api: "advance(by:)")
    }

    /// Advances the clock to `newDate`, running every action that falls due.
    ///
    /// - Precondition: `newDate` is not before `currentDate`.
    public func advance(to newDate: Date) {
        let interval = newDate.timeIntervalSince(currentDate)
        precondition(
            interval >= 0, "TestScheduler.advance(to:): newDate must not be before currentDate, got \(newDate)")
        runDue(until: monotonicTime(of: newDate))
    }

    /// Runs every scheduled action, advancing the clock as far as needed, until none is left.
    /// Repeating timers must be disposed first, or this never returns.
    public func run() {
        runDue(until: .infinity)
    }

    /// `date` on the monotonic virtual clock (computed directly, so that advancing to a
    /// deadline's date always reaches it, whatever the rounding of intermediate steps).
    fileprivate func monotonicTime(of date: Date) -> TimeInterval {
        lock.withLock { date.timeIntervalSince(startDate) - wallOffset }
    }

    fileprivate func advanceSeconds(_ interval: TimeInterval, api: String) {
        precondition(interval >= 0, "TestScheduler.\(api): interval must be >= 0, got \(interval)")
        let end = lock.withLock { now + interval }
        runDue(until: end)
    }

    /// Moves `currentDate` back by `interval`, as a wall-clock change would. Scheduled
    /// deadlines keep their remaining delay (time is monotonic).
    public func rewind(by interval: DispatchTimeInterval) {
        lock.withLock { wallOffset -= interval.timeInterval }
    }

    fileprivate func runDue(until end: TimeInterval) {
        while true {
            let next: Item? = lock.withLock {
                while let first = items.first, first.cancelled.isDisposed { items.removeFirst() }
                guard let first = items.first, first.deadline <= end else {
                    if end.isFinite { now = max(now, end) }
                    return nil
                }
                items.removeFirst()
                now = max(now, first.deadline)
                return first
            }
            guard let next else { return }
            if !next.cancelled.isDisposed { next.action() }
        }
    }
}

extension TestScheduler {
    /// Advances the clock by the smallest step, on the main actor.
    @MainActor public func advance() async { advanceSeconds(1e-9, api: "advance()") }
    /// Advances the clock by `interval`, on the main actor.
    @MainActor public func advance(by interval: DispatchTimeInterval) async {
        advanceSeconds(interval.timeInterval, api: "advance(by:)")
    }
    /// Advances the clock by `interval` seconds, on the main actor.
    @MainActor public func advance(by interval: TimeInterval) async { advanceSeconds(interval, api: "advance(by:)") }
    /// Advances the clock to `newDate`, on the main actor.
    @MainActor public func advance(to newDate: Date) async {
        runDue(until: monotonicTime(of: newDate))
    }
    /// Runs every scheduled action, on the main actor.
    @MainActor public func run() async { runDue(until: .infinity) }
}

extension TestScheduler: @unchecked Sendable {}  // All state is protected by `lock`.

extension Array {
    /// The first index whose element satisfies `belongsInSecondPartition`, for an array
    /// partitioned by it (binary search).
    func partitionPoint(_ belongsInSecondPartition: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongsInSecondPartition(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

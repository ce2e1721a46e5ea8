import Dispatch
#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

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
        /// On the monotonic virtual clock: exact, so equal deadlines compare equal.
        let deadline: Duration
        /// The deadline less the precision of the `Date` it came from: an advance that reaches
        /// within a `Date`'s rounding of the deadline runs it.
        let dueBy: Duration
        let sequence: UInt64
        /// Replaced by an empty closure once run, so that what it captured is released.
        var action: () -> Void
    }

    private let lock = _Lock.make()
    private let startDate: Date
    // Protected by lock. Time since `startDate` on the monotonic virtual clock.
    private var now: Duration = .zero
    // Protected by lock. Wall-clock adjustments (`rewind`).
    private var wallOffset: Duration = .zero
    // Protected by lock. Sorted by (deadline, sequence); the pending ones start at `head`.
    private var items: [Item] = []
    // Protected by lock. Items before it have run: running one advances it instead of removing
    // the first element (O(n)), and the array is compacted once most of it has run.
    private var head = 0
    // Protected by lock.
    private var nextSequence: UInt64 = 0

    /// Creates a test scheduler whose clock starts at `startDate`.
    public init(startDate: Date = Date(timeIntervalSinceReferenceDate: 0)) {
        self.startDate = startDate
    }

    /// The virtual date.
    public var currentDate: Date {
        lock.withLock { date(at: now) }
    }

    /// Schedules `action` to run at the current virtual time (on the next `advance`).
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        lock.withLock { enqueueLocked(at: now, dueBy: now, action) }
    }

    /// Schedules `action` to run after `delay` of virtual time. An action scheduled after
    /// `.never` never runs.
    @discardableResult
    public func schedule(after delay: DispatchTimeInterval, action: @escaping () -> Void) -> (any Disposable)? {
        guard let delay = delay.duration else { return AnyDisposable() }
        return lock.withLock {
            let deadline = now + max(.zero, delay)
            return enqueueLocked(at: deadline, dueBy: deadline, action)
        }
    }

    /// Schedules `action` to run at `date`; at the next advance if `date` is not in the future,
    /// never if `date` is infinitely far.
    ///
    /// - Precondition: `date` is not NaN.
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        _require(!date.timeIntervalSinceReferenceDate.isNaN, "TestScheduler.schedule(after:action:): date is NaN")
        return lock.withLock {
            guard let (deadline, dueBy) = deadlineLocked(of: date) else { return AnyDisposable() }
            return enqueueLocked(at: deadline, dueBy: dueBy, action)
        }
    }

    /// Schedules `action` at `date`, then every `interval`, until disposed.
    ///
    /// - Precondition: `interval` is positive and finite, `leeway` is not negative, `date` is
    ///   not NaN.
    @discardableResult
    public func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval = .seconds(0),
        action: @escaping () -> Void
    ) -> (any Disposable)? {
        let api = "TestScheduler.schedule(after:interval:leeway:action:)"
        _checkRepeating(date: date, interval: interval, leeway: leeway, api)
        let step = interval.duration!
        let repeating = SerialDisposable()
        func occurrence(at deadline: Duration, dueBy: Duration) {
            repeating.inner = lock.withLock {
                enqueueLocked(at: deadline, dueBy: dueBy) {
                    action()
                    occurrence(at: deadline + step, dueBy: deadline + step)
                }
            }
        }
        let first = lock.withLock { deadlineLocked(of: date) }
        if let (deadline, dueBy) = first { occurrence(at: deadline, dueBy: dueBy) }
        return repeating
    }

    // Requires lock. `date` on the monotonic clock, or nil for a date infinitely far away.
    private func deadlineLocked(of date: Date) -> (deadline: Duration, dueBy: Duration)? {
        let seconds = date.timeIntervalSince(startDate)
        guard seconds < .infinity else { return nil }
        guard seconds > -.infinity else { return (now, now) }
        let deadline = max(now, Duration.rounded(seconds: seconds) - wallOffset)
        // A `Date` is a Double: far from the reference date, `currentDate + d` is rounded by up
        // to half a unit in the last place, so the deadline may land a few nanoseconds past
        // `now + d`. Two units of slack make `advance(by: d)` run it, as the user meant.
        let precision = Duration.seconds(2 * date.timeIntervalSinceReferenceDate.ulp)
        return (deadline, max(now, deadline - precision))
    }

    // Requires lock.
    private func date(at time: Duration) -> Date {
        startDate.addingTimeInterval((time + wallOffset).seconds)
    }

    // Requires lock.
    private func enqueueLocked(at deadline: Duration, dueBy: Duration, _ action: @escaping () -> Void) -> any Disposable
    {
        let item = Item(deadline: deadline, dueBy: dueBy, sequence: nextSequence, action: action)
        nextSequence += 1
        items.insert(item, at: indexLocked(deadline: deadline, sequence: item.sequence))
        let sequence = item.sequence
        // Disposing removes the item at once, releasing its action.
        return AnyDisposable { [weak self] in self?.cancel(deadline: deadline, sequence: sequence) }
    }

    // Requires lock. Where an item with this key is, or would be inserted.
    private func indexLocked(deadline: Duration, sequence: UInt64) -> Int {
        items.partitionPoint(from: head) { ($0.deadline, $0.sequence) >= (deadline, sequence) }
    }

    private func cancel(deadline: Duration, sequence: UInt64) {
        let removed: Item? = lock.withLock {
            let index = indexLocked(deadline: deadline, sequence: sequence)
            guard index < items.count, items[index].sequence == sequence else { return nil }
            return items.remove(at: index)
        }
        _ = removed  // Released here, outside the lock: its action may own anything.
    }

    /// Advances the clock by the smallest step (one nanosecond), running what falls due.
    public func advance() {
        advance(by: .nanoseconds(1), api: "advance()")
    }

    /// Advances the clock by `interval`, running every action that falls due, in order.
    ///
    /// - Precondition: `interval` is not negative and not `.never`.
    public func advance(by interval: DispatchTimeInterval) {
        advance(by: interval, api: "advance(by:)")
    }

    /// Advances the clock by `interval` seconds, running every action that falls due.
    ///
    /// - Precondition: `interval` is finite and not negative.
    public func advance(by interval: TimeInterval) {
        advance(seconds: interval, api: "advance(by:)")
    }

    /// Advances the clock to `newDate`, running every action that falls due.
    ///
    /// - Precondition: `newDate` is neither NaN nor before `currentDate`.
    public func advance(to newDate: Date) {
        advance(toDate: newDate)
    }

    fileprivate func advance(toDate newDate: Date) {
        runDue(until: target(of: newDate))
    }

    /// Where `advance(to: newDate)` moves the monotonic clock.
    fileprivate func target(of newDate: Date) -> Duration {
        lock.withLock {
            let interval = newDate.timeIntervalSince(date(at: now))
            _require(
                interval >= 0,
                "TestScheduler.advance(to:): newDate must not be before currentDate (\(date(at: now))), got \(newDate)")
            return deadlineLocked(of: newDate)?.deadline ?? Self.endOfTime(startDate, wallOffset)
        }
    }

    /// Runs every scheduled action, advancing the clock as far as needed, up to
    /// `Date.distantFuture`, and leaves `currentDate` there. Actions scheduled later than that
    /// (after `.never`, or at an infinite date) never run. Repeating timers must be disposed
    /// first, or this runs them until the distant future.
    public func run() {
        advance(toDate: .distantFuture)
    }

    private static func endOfTime(_ startDate: Date, _ wallOffset: Duration) -> Duration {
        .rounded(seconds: Date.distantFuture.timeIntervalSince(startDate)) - wallOffset
    }

    fileprivate func advance(by interval: DispatchTimeInterval, api: String) {
        runDue(until: target(by: interval, api: api))
    }

    fileprivate func advance(seconds interval: TimeInterval, api: String) {
        runDue(until: target(seconds: interval, api: api))
    }

    /// Where advancing by `interval` moves the monotonic clock.
    fileprivate func target(by interval: DispatchTimeInterval, api: String) -> Duration {
        _checkInterval(interval, "TestScheduler.\(api)", .nonNegative)
        let step = interval.duration!
        return lock.withLock { now + step }
    }

    /// Where advancing by `interval` seconds moves the monotonic clock.
    fileprivate func target(seconds interval: TimeInterval, api: String) -> Duration {
        _checkInterval(interval, "TestScheduler.\(api)")
        return lock.withLock { now + .rounded(seconds: interval) }
    }

    /// Moves `currentDate` back by `interval`, as a wall-clock change would. Scheduled
    /// deadlines keep their remaining delay (time is monotonic).
    public func rewind(by interval: DispatchTimeInterval) {
        _checkInterval(interval, "TestScheduler.rewind(by:)", .finite)
        let step = interval.duration!
        lock.withLock { wallOffset -= step }
    }

    fileprivate func runDue(until end: Duration) {
        while let next = takeDue(until: end) { next.action() }
    }

    /// Takes the first action due by `end` and moves the clock to its deadline; with none left,
    /// moves the clock to `end` and returns `nil`. Returns the item, not its closure: a closure
    /// returned through `withLock`'s generic result would be wrapped in a thunk, an allocation
    /// per action.
    private func takeDue(until end: Duration) -> Item? {
        lock.withLock {
            guard head < items.count, items[head].dueBy <= end else {
                now = max(now, end)
                return nil
            }
            let first = items[head]
            items[head].action = {}
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1_024 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
            now = max(now, min(first.deadline, end))
            return first
        }
    }
}

extension TestScheduler {
    /// Lets tasks that are ready run until they suspend again: a task that just called
    /// `sleep(for:)` schedules its wake-up, and a task woken by the last action (a timer's
    /// `for await` loop) handles its element while `currentDate` is still that action's date.
    /// Each round waits for a detached task of the lowest priority, which the global executor
    /// runs after the jobs of higher priority that are ready. It is awaited through a
    /// continuation, not its `value`: awaiting the value would raise its priority to the
    /// caller's, and let it overtake the tasks it is meant to wait for.
    @MainActor private func yieldToPendingTasks() async {
        for _ in 0..<32 {
            await Task.yield()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Task.detached(priority: .background) {
                    await Task.yield()
                    continuation.resume()
                }
            }
        }
    }

    /// Like `runDue(until:)`, but lets pending tasks run before each action and before the
    /// final clock move.
    @MainActor private func runDueYielding(until end: Duration) async {
        while true {
            await yieldToPendingTasks()
            guard let next = takeDue(until: end) else { return }
            next.action()
        }
    }

    /// Advances the clock by the smallest step, on the main actor; see `advance(by:)`.
    @MainActor public func advance() async {
        await runDueYielding(until: target(by: .nanoseconds(1), api: "advance()"))
    }

    /// Advances the clock by `interval`, on the main actor, running every action that falls
    /// due in order. Before each action, and before the clock makes its final move, tasks that
    /// are ready get to run: a task woken by an action sees `currentDate` at that action's
    /// deadline, and has handled what the action gave it when this returns.
    ///
    /// - Precondition: `interval` is not negative and not `.never`.
    @MainActor public func advance(by interval: DispatchTimeInterval) async {
        await runDueYielding(until: target(by: interval, api: "advance(by:)"))
    }

    /// Advances the clock by `interval` seconds, on the main actor; see `advance(by:)`.
    ///
    /// - Precondition: `interval` is finite and not negative.
    @MainActor public func advance(by interval: TimeInterval) async {
        await runDueYielding(until: target(seconds: interval, api: "advance(by:)"))
    }

    /// Advances the clock to `newDate`, on the main actor; see `advance(by:)`.
    ///
    /// - Precondition: `newDate` is neither NaN nor before `currentDate`.
    @MainActor public func advance(to newDate: Date) async {
        await runDueYielding(until: target(of: newDate))
    }

    /// Runs every scheduled action up to `Date.distantFuture`, on the main actor; see
    /// `advance(by:)` and `run()`.
    @MainActor public func run() async {
        await runDueYielding(until: target(of: .distantFuture))
    }
}

extension TestScheduler: @unchecked Sendable {}  // All state is protected by `lock`.

extension Array {
    /// The first index from `start` whose element satisfies `belongsInSecondPartition`, for an
    /// array partitioned by it from there (binary search).
    func partitionPoint(from start: Int = 0, _ belongsInSecondPartition: (Element) -> Bool) -> Int {
        var low = start
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongsInSecondPartition(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

extension TestScheduler: _ClockScheduler {
    /// Now in virtual time: `currentDate`, in seconds since the reference date.
    @usableFromInline
    package var _clockNow: TimeInterval { currentDate.timeIntervalSinceReferenceDate }

    /// Runs `action` at `time` in virtual time, as `schedule(after:action:)` runs its date.
    @usableFromInline @discardableResult
    package func _schedule(atClock time: TimeInterval, action: @escaping () -> Void) -> (any Disposable)? {
        schedule(after: Date(timeIntervalSinceReferenceDate: time), action: action)
    }
}

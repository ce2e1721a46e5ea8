import Dispatch
import Foundation

/// A scheduler that runs actions on a serial `DispatchQueue`.
///
/// Timed actions are kept in one deadline-ordered queue per scheduler and fired by a single
/// dispatch timer, so actions scheduled for the same deadline run in the order they were
/// scheduled (Dispatch alone does not promise that). Deadlines are measured on the monotonic
/// clock (`DispatchTime`): a wall-clock change does not move them.
///
/// Repeating timers are `DispatchSourceTimer`s that the scheduler keeps until their disposable
/// is disposed; releasing the disposable without disposing it does not stop the timer.
public final class QueueScheduler: DateScheduler {
    /// The queue actions run on.
    public let queue: DispatchQueue

    private let wallClock: @Sendable () -> Date
    private let timers: _DeadlineQueue
    private let lock = _Lock()
    // Protected by lock. Repeating timers, kept until disposed.
    private var repeating: [UInt64: any DispatchSourceTimer] = [:]
    // Protected by lock.
    private var nextTimerKey: UInt64 = 0
    // Protected by lock. Wall-clock seconds minus monotonic seconds, as last observed. Equal
    // dates must map to equal monotonic deadlines (FIFO for equal deadlines), so the mapping
    // only changes when the wall clock jumps (by more than `jumpThreshold`).
    private var wallMinusMonotonic: Double?
    private static let jumpThreshold: Double = 0.001

    /// A scheduler on the main queue. See `MainScheduler` for when the main queue drains.
    public static let main = QueueScheduler(queue: .main, name: "org.reactiveloop.QueueScheduler.main")

    /// The current wall-clock date.
    public var currentDate: Date { wallClock() }

    /// Creates a scheduler on `queue`, which should be serial.
    public convenience init(queue: DispatchQueue, name: String = "org.reactiveloop.QueueScheduler") {
        self.init(queue: queue, name: name, wallClock: { Date() })
    }

    /// Creates a scheduler on a new serial queue.
    public convenience init(
        qos: DispatchQoS = .unspecified, name: String = "org.reactiveloop.QueueScheduler",
        targeting targetQueue: DispatchQueue? = nil
    ) {
        self.init(queue: DispatchQueue(label: name, qos: qos, target: targetQueue), name: name)
    }

    /// A scheduler whose `currentDate` comes from `wallClock` (tests inject jumps with it).
    @_spi(Testing)
    public init(queue: DispatchQueue, name: String, wallClock: @escaping @Sendable () -> Date) {
        self.queue = queue
        self.wallClock = wallClock
        self.timers = _DeadlineQueue(queue: queue)
    }

    /// Runs `action` on the queue, after the actions already queued.
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        let disposable = AnyDisposable()
        let action = _Unchecked(action)
        queue.async {
            if !disposable.isDisposed { action.value() }
        }
        return disposable
    }

    /// Runs `action` on the queue at `date`; the delay is fixed now, on the monotonic clock.
    ///
    /// A date not in the future runs the action as `schedule(_:)` does, so no action scheduled
    /// after this call overtakes it. An infinitely distant date never runs the action.
    ///
    /// - Precondition: `date` is not NaN.
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        _require(!date.timeIntervalSinceReferenceDate.isNaN, "QueueScheduler.schedule(after:action:): date is NaN")
        guard date.timeIntervalSinceReferenceDate < .infinity else { return AnyDisposable() }
        let now = DispatchTime.now()
        let (offset, wall) = wallMinusMonotonic(after: now)
        // "Not in the future" is judged on the wall clock the date comes from, not through the
        // offset, which may lag the wall clock by up to `jumpThreshold`.
        guard date.timeIntervalSinceReferenceDate > wall else { return schedule(action) }
        let deadline = deadline(for: date, now: now, offset: offset)
        guard deadline > now else { return schedule(action) }
        return timers.schedule(at: deadline, action)
    }

    /// Runs `action` at `date`, then every `interval`, with no leeway.
    @discardableResult
    public func schedule(after date: Date, interval: DispatchTimeInterval, action: @escaping () -> Void) -> (
        any Disposable
    )? {
        schedule(after: date, interval: interval, leeway: .seconds(0), action: action)
    }

    /// Runs `action` at `date`, then every `interval`, until the disposable is disposed.
    ///
    /// - Precondition: `interval` is positive and finite, `leeway` is finite and not negative,
    ///   and `date` is not NaN.
    @discardableResult
    public func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval, action: @escaping () -> Void
    ) -> (any Disposable)? {
        _checkRepeating(
            date: date, interval: interval, leeway: leeway, "QueueScheduler.schedule(after:interval:leeway:action:)")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let start = date.timeIntervalSinceReferenceDate < .infinity ? deadline(for: date, now: .now()) : .distantFuture
        timer.schedule(deadline: start, repeating: interval, leeway: leeway)
        let action = _Unchecked(action)
        timer.setEventHandler { action.value() }
        let key: UInt64 = lock.withLock {
            nextTimerKey += 1
            repeating[nextTimerKey] = timer
            return nextTimerKey
        }
        timer.resume()
        return AnyDisposable { [weak self] in
            timer.cancel()
            self?.lock.withLock { _ = self?.repeating.removeValue(forKey: key) }
        }
    }

    /// The monotonic deadline for a wall-clock `date`, fixed now (`now` was read just before):
    /// `now` itself if `date` is not in the future.
    private func deadline(for date: Date, now: DispatchTime, offset: Double? = nil) -> DispatchTime {
        let offset = offset ?? wallMinusMonotonic(after: now).offset
        let target = (date.timeIntervalSinceReferenceDate - offset) * 1e9
        guard target > Double(now.uptimeNanoseconds) else { return now }
        return target >= Double(UInt64.max) ? .distantFuture : DispatchTime(uptimeNanoseconds: UInt64(target))
    }

    /// Wall-clock seconds minus monotonic seconds. The wall clock is read between two
    /// monotonic reads, so the true offset lies in a known interval; only an offset outside
    /// that interval (widened by `jumpThreshold`) is a wall-clock jump. A thread preempted
    /// between its reads widens the interval instead of looking like a jump, so equal dates
    /// keep mapping to equal deadlines.
    private func wallMinusMonotonic(after before: DispatchTime) -> (offset: Double, wall: Double) {
        let wall = wallClock().timeIntervalSinceReferenceDate
        let after = DispatchTime.now()
        let lowest = wall - Double(after.uptimeNanoseconds) / 1e9
        let highest = wall - Double(before.uptimeNanoseconds) / 1e9
        let offset: Double = lock.withLock {
            if let known = wallMinusMonotonic,
                known >= lowest - Self.jumpThreshold && known <= highest + Self.jumpThreshold
            {
                return known
            }
            let observed = (lowest + highest) / 2
            wallMinusMonotonic = observed
            return observed
        }
        return (offset, wall)
    }
}

extension QueueScheduler: @unchecked Sendable {}  // `repeating` is protected by `lock`; the rest is immutable.

/// A value handed to another thread that the type system cannot prove safe to share: a
/// scheduler's action runs on the scheduler's thread by design (ReactiveSwift's API takes
/// non-`Sendable` closures), so the caller's contract is what makes it safe.
struct _Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

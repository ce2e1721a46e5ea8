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
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        timers.schedule(at: deadline(for: date), action)
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
    /// - Precondition: `interval` is positive.
    @discardableResult
    public func schedule(
        after date: Date, interval: DispatchTimeInterval, leeway: DispatchTimeInterval, action: @escaping () -> Void
    ) -> (any Disposable)? {
        _require(
            interval.nanoseconds > 0,
            "QueueScheduler.schedule(after:interval:leeway:action:): interval must be positive, got \(interval)")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: deadline(for: date), repeating: interval, leeway: leeway)
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

    /// The monotonic deadline for a wall-clock `date`, fixed now.
    private func deadline(for date: Date) -> DispatchTime {
        let monotonic = DispatchTime.now()
        let observed = wallClock().timeIntervalSinceReferenceDate - Double(monotonic.uptimeNanoseconds) / 1e9
        let offset: Double = lock.withLock {
            if let known = wallMinusMonotonic, abs(known - observed) <= Self.jumpThreshold { return known }
            wallMinusMonotonic = observed
            return observed
        }
        let target = (date.timeIntervalSinceReferenceDate - offset) * 1e9
        guard target > Double(monotonic.uptimeNanoseconds) else { return monotonic }
        return target >= Double(UInt64.max) ? .distantFuture : DispatchTime(uptimeNanoseconds: UInt64(target))
    }
}

extension QueueScheduler: @unchecked Sendable {}  // `repeating` is protected by `lock`; the rest is immutable.

/// One-shot actions of a queue scheduler, in deadline order, fired by one dispatch timer.
/// A value handed to another thread that the type system cannot prove safe to share: a
/// scheduler's action runs on the scheduler's thread by design (ReactiveSwift's API takes
/// non-`Sendable` closures), so the caller's contract is what makes it safe.
struct _Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

final class _DeadlineQueue: @unchecked Sendable {  // All state is protected by `lock`.
    private struct Item {
        let deadline: UInt64
        let sequence: UInt64
        let action: () -> Void
        let disposable: AnyDisposable
    }

    private let lock = _Lock()
    private let timer: any DispatchSourceTimer
    // Protected by lock. Sorted by (deadline, sequence), soonest last, so firing pops the end.
    private var items: [Item] = []
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
        let disposable = AnyDisposable()
        lock.withLock {
            let item = Item(
                deadline: deadline.uptimeNanoseconds, sequence: nextSequence, action: action, disposable: disposable)
            nextSequence += 1
            let index = items.partitionPoint { ($0.deadline, $0.sequence) < (item.deadline, item.sequence) }
            items.insert(item, at: index)
            keepAlive = self
            armLocked()
        }
        return disposable
    }

    // Requires lock.
    private func armLocked() {
        guard let soonest = items.last?.deadline else {
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
            let due: Item? = lock.withLock {
                guard let last = items.last, last.deadline <= now else {
                    armLocked()
                    return nil
                }
                return items.removeLast()
            }
            guard let due else { return }
            if !due.disposable.isDisposed { due.action() }
        }
    }
}

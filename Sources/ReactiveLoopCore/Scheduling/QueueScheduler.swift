import Dispatch
#if canImport(CDispatch)
    import CDispatch
#endif
#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif
import Synchronization

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

    /// The C queue behind `queue`, when it can be found: `schedule(_:)` then hands Dispatch the
    /// scheduled action itself as the context of `dispatch_async_f`, where `queue.async` copies
    /// a block (an allocation and a call more per action).
    private let handle: OpaquePointer?
    private let clock: _WallClockMapping
    private let timers: _DeadlineQueue
    /// The one-shot timed actions pending (tests: a disposed one is gone at once).
    var pendingTimedActions: Int { timers.pendingCount }
    private let lock = _Lock.make()
    // Protected by lock. Repeating timers, kept until disposed.
    private var repeating: [UInt64: any DispatchSourceTimer] = [:]
    // Protected by lock.
    private var nextTimerKey: UInt64 = 0
    /// A scheduler on the main queue. See `MainScheduler` for when the main queue drains.
    public static let main = QueueScheduler(queue: .main, name: "org.reactiveloop.QueueScheduler.main")

    /// The current wall-clock date.
    public var currentDate: Date { clock.currentDate }

    /// Creates a scheduler on `queue`, which should be serial.
    public convenience init(queue: DispatchQueue, name: String = "org.reactiveloop.QueueScheduler") {
        self.init(queue: queue, name: name, wallClock: nil)
    }

    /// Creates a scheduler on a new serial queue.
    public convenience init(
        qos: DispatchQoS = .unspecified, name: String = "org.reactiveloop.QueueScheduler",
        targeting targetQueue: DispatchQueue? = nil
    ) {
        self.init(queue: DispatchQueue(label: name, qos: qos, target: targetQueue), name: name)
    }

    /// A scheduler whose `currentDate` comes from `wallClock` (tests inject jumps with it; nil:
    /// the system clock).
    @_spi(Testing)
    public init(queue: DispatchQueue, name: String, wallClock: (@Sendable () -> Date)?) {
        self.queue = queue
        self.handle = _dispatchHandle(of: queue)
        self.clock = _WallClockMapping(wallClock: wallClock)
        self.timers = _DeadlineQueue(queue: queue)
    }

    /// Runs `action` on the queue, after the actions already queued.
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        let scheduled = _ScheduledAction(action)
        #if canImport(CDispatch)
            if let handle {
                // The queue owns one reference until the action has run.
                dispatch_async_f(handle, Unmanaged.passRetained(scheduled).toOpaque()) { context in
                    Unmanaged<_ScheduledAction>.fromOpaque(context!).takeRetainedValue().run()
                }
                return scheduled
            }
        #endif
        queue.async { scheduled.run() }
        return scheduled
    }

    /// Whether `schedule(_:)` queues its actions with `dispatch_async_f` (false: `queue.async`).
    @_spi(Testing)
    public var queuesWithoutBlocks: Bool { handle != nil }

    /// Runs `action` on the queue at `date`; the delay is fixed now, on the monotonic clock.
    ///
    /// A date not in the future runs the action as `schedule(_:)` does, so no action scheduled
    /// after this call overtakes it, unless a timed action for the same or an earlier date is
    /// still pending (the queue ran late): then it runs right after that one, so it never
    /// overtakes an action scheduled before it for the same or an earlier date. An infinitely
    /// distant date never runs the action.
    ///
    /// - Precondition: `date` is not NaN.
    @discardableResult
    public func schedule(after date: Date, action: @escaping () -> Void) -> (any Disposable)? {
        switch clock.deadline(for: date, "QueueScheduler.schedule(after:action:)") {
        case .now:
            let time = clock.monotonicTime(ofPast: date)
            return timers.scheduleBehindPending(at: time, action) ?? schedule(action)
        case let .at(nanoseconds): return timers.schedule(at: DispatchTime(uptimeNanoseconds: nanoseconds), action)
        case .never: return AnyDisposable()
        }
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
        let start: DispatchTime =
            switch clock.deadline(for: date, "QueueScheduler.schedule(after:interval:leeway:action:)") {
            case .now: .now()
            case let .at(nanoseconds): DispatchTime(uptimeNanoseconds: nanoseconds)
            case .never: .distantFuture
            }
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
}

extension QueueScheduler: @unchecked Sendable {}  // `repeating` is protected by `lock`; the rest is immutable.

/// The `dispatch_queue_t` that `queue` wraps, read once by reflection: Dispatch's Swift overlay
/// on Linux keeps it in a stored property and offers no public accessor. Nil where the overlay
/// is not laid out that way, or what it holds there does not answer with the queue's label (or
/// there is no C module, as on Darwin), so that the caller falls back to `async`.
func _dispatchHandle(of queue: DispatchQueue) -> OpaquePointer? {
    #if canImport(CDispatch)
        for child in Mirror(reflecting: queue).children where child.label == "__wrapped" {
            guard let handle = child.value as? OpaquePointer,
                String(cString: dispatch_queue_get_label(handle)) == queue.label
            else { return nil }
            return handle
        }
    #endif
    return nil
}

/// An action queued on a `DispatchQueue`, and the disposable that cancels it: one object per
/// action, which Dispatch hands back to the scheduler's trampoline as its context (or which the
/// block handed to `async` captures, on the fallback path). Disposing does not release the
/// action; the object releases it when Dispatch lets go of the object, after its turn.
final class _ScheduledAction: _LifetimeEndHandler, Disposable {
    private let state = Synchronization.Atomic<Bool>(false)
    // Written in init, called only on the queue, released with the object.
    private let action: () -> Void

    init(_ action: @escaping () -> Void) {
        self.action = action
        super.init()
    }

    /// Attached to a lifetime's inline slot (`Lifetime._attachDisposing`): disposes.
    override func lifetimeEnded() {
        dispose()
    }

    /// Whether the action was cancelled.
    var isDisposed: Bool { state.load(ordering: .acquiring) }

    /// Cancels the action if it has not started.
    func dispose() { state.store(true, ordering: .releasing) }

    /// Runs the action unless it was cancelled; called on the scheduler's queue.
    func run() {
        if !state.load(ordering: .acquiring) { action() }
    }
}

extension _ScheduledAction: @unchecked Sendable {}  // `action` runs on the scheduler's queue only.

/// A value handed to another thread that the type system cannot prove safe to share: a
/// scheduler's action runs on the scheduler's thread by design (ReactiveSwift's API takes
/// non-`Sendable` closures), so the caller's contract is what makes it safe.
struct _Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

extension QueueScheduler: _ClockScheduler {
    /// Now on the monotonic clock, in seconds.
    @usableFromInline
    package var _clockNow: TimeInterval { _WallClockMapping.monotonicSeconds }

    /// Runs `action` on the queue at `time` on the monotonic clock; see `_ClockScheduler`.
    @usableFromInline @discardableResult
    package func _schedule(atClock time: TimeInterval, action: @escaping () -> Void) -> (any Disposable)? {
        guard let deadline = _WallClockMapping.monotonicDeadline(time) else { return AnyDisposable() }
        if deadline > _WallClockMapping.monotonicNow {
            return timers.schedule(at: DispatchTime(uptimeNanoseconds: deadline), action)
        }
        return timers.scheduleBehindPending(at: deadline, action) ?? schedule(action)
    }
}

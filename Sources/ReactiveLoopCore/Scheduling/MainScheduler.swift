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

/// A scheduler for the main thread, like ReactiveSwift's `UIScheduler` (also available under
/// that name).
///
/// An action scheduled from the main queue (or the main thread) while nothing this scheduler
/// queued is still waiting runs inline, at once; otherwise it is queued on the main queue. Order is never
/// broken: an action never overtakes one scheduled before it (RxSwift #393 is the bug this
/// avoids).
///
/// - Note: On Linux the main queue only drains while the program runs `dispatchMain()`,
///   `RunLoop.main.run()`, Swift concurrency's main executor (an `async` `main`), or a
///   ReactiveLoopUV `EventLoop` driven by the main thread. A program that does none of these never runs actions queued
///   here from other threads.
public final class MainScheduler: Scheduler {
    // Actions queued on the main queue by any main scheduler and not yet run. Shared by all
    // instances, as they share the main queue.
    private static let queued = Synchronization.Atomic<Int>(0)

    /// The main queue's C queue, when it can be found: actions are then queued with
    /// `dispatch_async_f`, without a block each (see `QueueScheduler`). Set once, when first
    /// read, then only read: the pointer it holds is the main queue's, which never goes away.
    nonisolated(unsafe) private static let mainHandle = _dispatchHandle(of: .main)

    /// Marks the main queue, so that code can ask whether it runs on it. On Linux a program
    /// that calls `dispatchMain()` (as the test runner and `async` mains do) drains the main
    /// queue on a dispatch worker thread, where `Thread.isMainThread` is `false`.
    private static let mainQueueKey: DispatchSpecificKey<Bool> = {
        let key = DispatchSpecificKey<Bool>()
        DispatchQueue.main.setSpecific(key: key, value: true)
        return key
    }()

    /// Whether the caller runs on the main queue, or on the main thread outside any queue.
    static var isOnMain: Bool {
        DispatchQueue.getSpecific(key: mainQueueKey) == true || isMainThread()
    }

    /// Creates a main scheduler.
    public init() {
        _ = Self.mainQueueKey
    }

    /// Runs `action` inline if called on the main thread with nothing of ours queued before
    /// it; otherwise queues it on the main queue.
    ///
    /// - Returns: `nil` when the action ran inline; otherwise a disposable that cancels it.
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        let position = Self.queued.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
        if position == 1 && Self.isOnMain {
            action()
            Self.queued.wrappingSubtract(1, ordering: .releasing)
            return nil
        }
        let scheduled = _ScheduledAction(action)
        #if canImport(CDispatch)
            if let handle = Self.mainHandle {
                // The queue owns one reference until the action has run.
                dispatch_async_f(handle, Unmanaged.passRetained(scheduled).toOpaque()) { context in
                    Unmanaged<_ScheduledAction>.fromOpaque(context!).takeRetainedValue().run()
                    MainScheduler.queued.wrappingSubtract(1, ordering: .releasing)
                }
                return scheduled
            }
        #endif
        DispatchQueue.main.async {
            scheduled.run()
            Self.queued.wrappingSubtract(1, ordering: .releasing)
        }
        return scheduled
    }

    /// Whether `schedule(_:)` queues its actions with `dispatch_async_f` (false: `async`).
    @_spi(Testing)
    public static var queuesWithoutBlocks: Bool { mainHandle != nil }
}

extension MainScheduler: @unchecked Sendable {}  // Stateless but for the shared atomic counter.

/// ReactiveSwift's name for `MainScheduler`.
public typealias UIScheduler = MainScheduler

#if canImport(Glibc)
    /// The calling thread's id, from glibc's `gettid` (looked up once: the C library declares it
    /// only for `_GNU_SOURCE`, which Swift's Glibc module does not set).
    private let currentThreadID: (@convention(c) () -> pid_t)? = dlsym(nil, "gettid").map {
        unsafeBitCast($0, to: (@convention(c) () -> pid_t).self)
    }

    /// Whether the caller runs on the process's main thread: on Linux, the thread whose id is the
    /// process id (what Foundation's `Thread.isMainThread` answers, without loading Foundation).
    private func isMainThread() -> Bool {
        currentThreadID.map { $0() == getpid() } ?? false
    }
#else
    private func isMainThread() -> Bool { Thread.isMainThread }
#endif

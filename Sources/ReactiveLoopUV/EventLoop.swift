import CLibUV
import Dispatch
import Foundation
@_spi(ReactiveLoopRuntime) import ReactiveLoop
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An event loop: one libuv loop (`uv_loop_t`) driven by one thread.
///
/// ## Threading
/// Everything that touches libuv runs on the loop thread: the thread inside `run()`,
/// `runOnce()` or `runNoWait()`. From any other thread the only entry is `execute(_:)` (and
/// what is built on it: `stop()`, `LoopScheduler`, the I/O producers), which pushes the work
/// onto a queue that the loop thread drains. The queue wakes the loop through one `uv_async_t`,
/// signalled only when the queue goes from empty to non-empty; libuv may coalesce several
/// signals into one callback, and that callback drains everything queued, so nothing is lost,
/// and each thread's work runs in the order that thread queued it.
///
/// ## Shutdown
/// `stop()` stops accepting work (`execute` returns `false` from then on), lets the loop run
/// every closure it had accepted, then closes every handle (pending `LoopScheduler` actions are
/// dropped, unrun; I/O producers end with `interrupted`), runs the loop until the close
/// callbacks are done, and closes the libuv loop. `run()` returns after that.
///
/// ## The Dispatch main queue
/// When the process's main thread drives the loop, the loop also drains the Dispatch main queue
/// there (it polls the queue's wake-up descriptor, as Foundation's `RunLoop` does on Linux), so
/// `DispatchQueue.main` and `MainScheduler` work in a daemon whose main thread runs `run()`,
/// with `MainScheduler`'s ordering promise intact. Loops on other threads leave the main queue
/// alone.
public final class EventLoop: @unchecked Sendable {  // See "Threading"; each field says what guards it.
    /// The libuv loop. Confined to the loop thread (after `init`).
    let uvLoop: UnsafeMutablePointer<uv_loop_t>
    /// The cross-thread wake-up. `uv_async_send` is the one call made from other threads.
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let queueLock = _Lock()
    // Protected by queueLock. Work queued by `execute`, oldest first.
    private var pending: [_QueuedWork] = []
    // Protected by queueLock. False once `stop()` was called.
    private var accepting = true
    // Confined to the loop thread. The other buffer of the queue's double buffering.
    private var draining: [_QueuedWork] = []
    // Confined to the loop thread. Run at shutdown, before the handles are closed.
    private var shutdownActions: [ObjectIdentifier: () -> Void] = [:]
    // Confined to the loop thread.
    private var isShutDown = false
    /// The thread driving the loop right now (its pthread id), or 0.
    private let driver = Atomic<UInt>(0)
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    // Written once by the loop thread at shutdown; read after `finished` or on the loop thread.
    private var closeResult: Int32 = 1
    // Confined to the loop thread. Polls the Dispatch main queue's wake-up descriptor while the
    // process's main thread drives the loop (see "The Dispatch main queue").
    private var mainQueuePoll: UnsafeMutablePointer<uv_poll_t>?
    private var mainQueuePollActive = false

    /// Creates a loop. It runs once a thread calls `run()` (or drives it with `runOnce()`).
    ///
    /// - Throws: `UVError` if libuv cannot create the loop.
    public init() throws(UVError) {
        uvLoop = .allocate(capacity: 1)
        wakeup = .allocate(capacity: 1)
        do {
            try UVError.check(uv_loop_init(uvLoop), "uv_loop_init")
        } catch {
            uvLoop.deallocate()
            wakeup.deallocate()
            throw error
        }
        uv_async_init(uvLoop, wakeup) { handle in
            EventLoop.from(handle!.pointee.data).drain()
        }
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        if !isShutDown {
            // Never run, or never stopped: nothing can run on it any more; close what it holds.
            shutDown()
        }
        uvLoop.deallocate()
        wakeup.deallocate()
        mainQueuePoll?.deallocate()
    }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(pointer!).takeUnretainedValue()
    }

    // MARK: Running

    /// Runs the loop on the calling thread until `stop()`, then shuts it down (see "Shutdown").
    ///
    /// - Precondition: The loop is not running on another thread and was not stopped.
    public func run() {
        drive(UV_RUN_DEFAULT, "EventLoop.run()")
    }

    /// Runs the loop once on the calling thread: waits for at least one event (or the next
    /// timer), handles what is ready, and returns. For driving the loop from another poller.
    ///
    /// - Returns: Whether the loop still has work (active handles or requests).
    @discardableResult
    public func runOnce() -> Bool {
        drive(UV_RUN_ONCE, "EventLoop.runOnce()")
    }

    /// Handles what is ready without waiting, and returns (see `runOnce()`).
    @discardableResult
    public func runNoWait() -> Bool {
        drive(UV_RUN_NOWAIT, "EventLoop.runNoWait()")
    }

    @discardableResult
    private func drive(_ mode: uv_run_mode, _ api: String) -> Bool {
        let me = currentThreadID()
        let (exchanged, other) = driver.compareExchange(expected: 0, desired: me, ordering: .acquiringAndReleasing)
        _require(exchanged || other == me, "\(api): the loop is already running on another thread")
        defer { if exchanged { driver.store(0, ordering: .releasing) } }
        guard !isShutDown else { return false }
        let previous = EventLoop.current
        EventLoop.setCurrent(self)
        defer { EventLoop.setCurrent(previous) }
        if !mainQueuePollActive && clibuv_is_main_thread() != 0 { startDrainingMainQueue() }
        let alive = uv_run(uvLoop, mode) != 0
        if stopWasProcessed {
            shutDown()
            return false
        }
        return alive
    }

    // Confined to the loop thread. Set when the drain saw `accepting == false` and an empty queue.
    private var stopWasProcessed = false

    /// Stops the loop (see "Shutdown"). May be called from any thread, any number of times;
    /// returns at once. Use `waitUntilStopped()` to wait for the shutdown.
    public func stop() {
        let wasAccepting: Bool = queueLock.withLock {
            defer { accepting = false }
            return accepting
        }
        if wasAccepting { uv_async_send(wakeup) }
    }

    /// Whether the loop has shut down (`stop()` was processed and every handle closed).
    public var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Blocks until the loop has shut down.
    ///
    /// - Precondition: Not called on the loop thread (that would wait for itself).
    public func waitUntilStopped() {
        _require(!inEventLoop, "EventLoop.waitUntilStopped(): called on the loop thread, which would wait for itself")
        finished.wait()
        finished.signal()
    }

    /// libuv's result of closing the loop (`uv_loop_close`): 0 when every handle was closed.
    /// Meaningful once the loop has stopped.
    public var closeStatus: Int32 {
        finished.wait()
        finished.signal()
        return closeResult
    }

    // MARK: Cross-thread work

    /// Whether the calling thread is the one driving this loop.
    ///
    /// Never a false negative on the loop thread: the thread records itself before any
    /// callback runs. Never a false positive elsewhere. Between two `runOnce()` calls no thread
    /// drives the loop, and this is `false` everywhere.
    public var inEventLoop: Bool {
        driver.load(ordering: .relaxed) == currentThreadID()
    }

    /// Runs `task` on the loop thread, after the work queued before it (by this thread; work
    /// queued by other threads interleaves). Called on the loop thread, `task` runs after the
    /// current callback returns, never inside it.
    ///
    /// - Returns: `false` if the loop was stopped: `task` is dropped, never run.
    @discardableResult
    public func execute(_ task: @escaping () -> Void) -> Bool {
        queue(.closure(task))
    }

    /// Queues `work` for the loop thread (see `execute(_:)`); `false` if the loop was stopped.
    func queue(_ work: _QueuedWork) -> Bool {
        let (accepted, wasEmpty): (Bool, Bool) = queueLock.withLock {
            guard accepting else { return (false, false) }
            pending.append(work)
            return (true, pending.count == 1)
        }
        if wasEmpty { uv_async_send(wakeup) }
        return accepted
    }

    /// How many closures are queued and not yet taken by the loop thread (for tests).
    var queuedCount: Int { queueLock.withLock { pending.count } }

    /// Runs `body` on the loop thread: at once if called there, otherwise queued (`execute`).
    ///
    /// - Returns: `false` if the loop was stopped: `body` never runs.
    func onLoopThread(_ body: @escaping () -> Void) -> Bool {
        if inEventLoop {
            body()
            return true
        }
        return execute(body)
    }

    /// Runs `body` on the loop thread and returns its result. Inline on the loop thread, and
    /// inline while no thread drives the loop (the calling thread holds the loop for the call,
    /// as a daemon does when it opens its sockets before `run()`); otherwise queued, and the
    /// calling thread waits for the loop thread.
    ///
    /// - Throws: `UVError.loopStopped` if the loop was stopped, or what `body` throws.
    func performSync<T>(_ body: @escaping () throws(UVError) -> T) throws(UVError) -> T {
        if inEventLoop { return try body() }
        let me = currentThreadID()
        if driver.compareExchange(expected: 0, desired: me, ordering: .acquiringAndReleasing).exchanged {
            defer { driver.store(0, ordering: .releasing) }
            guard !isShutDown, queueLock.withLock({ accepting }) else { throw .loopStopped }
            return try body()
        }
        let outcome = _ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        let accepted = execute {
            outcome.result = Result { () throws(UVError) -> T in try body() }
            done.signal()
        }
        guard accepted else { throw .loopStopped }
        done.wait()
        return try outcome.result!.get()
    }

    /// Runs one queued closure or job. Loop thread only.
    private func run(_ work: _QueuedWork) {
        switch work {
        case let .closure(task):
            task()
        case let .job(job):
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        }
    }

    /// Drains the queue: runs every task queued so far, in order. Loop thread only.
    private func drain() {
        while true {
            let stopping: Bool = queueLock.withLock {
                swap(&pending, &draining)
                return !accepting
            }
            if draining.isEmpty {
                if stopping {
                    stopWasProcessed = true
                    uv_stop(uvLoop)
                }
                return
            }
            for work in draining { run(work) }
            draining.removeAll(keepingCapacity: true)
            // Work queued by these tasks (or by other threads meanwhile) runs in the next round
            // only after a fresh wake-up, unless the loop is stopping: then drain to the end.
            if !stopping { return }
        }
    }

    // MARK: Shutdown

    /// Registers `action` to run on the loop thread when the loop shuts down, before handles
    /// are closed, under `key` (one action per key). Loop thread only.
    func onShutdown(_ key: ObjectIdentifier, _ action: @escaping () -> Void) {
        shutdownActions[key] = action
    }

    /// Removes the shutdown action registered under `key` and returns it. Loop thread only.
    func removeShutdownAction(_ key: ObjectIdentifier) -> (() -> Void)? {
        shutdownActions.removeValue(forKey: key)
    }

    private func shutDown() {
        isShutDown = true
        queueLock.withLock { accepting = false }
        // Work accepted before the stop still runs.
        while true {
            queueLock.withLock { swap(&pending, &draining) }
            if draining.isEmpty { break }
            for work in draining { run(work) }
            draining.removeAll()
        }
        let actions = shutdownActions
        shutdownActions = [:]
        for action in actions.values { action() }
        uv_walk(
            uvLoop,
            { handle, _ in
                if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
            }, nil)
        while uv_run(uvLoop, UV_RUN_NOWAIT) != 0 {}
        closeResult = uv_loop_close(uvLoop)
        stopped.store(true, ordering: .releasing)
        finished.signal()
    }

    // MARK: The Dispatch main queue

    /// Starts polling the main queue's wake-up descriptor, and drains what it already holds.
    /// Called when the process's main thread drives the loop.
    private func startDrainingMainQueue() {
        let poll: UnsafeMutablePointer<uv_poll_t>
        if let existing = mainQueuePoll {
            poll = existing
        } else {
            poll = .allocate(capacity: 1)
            guard uv_poll_init(uvLoop, poll, _dispatch_get_main_queue_handle_4CF()) == 0 else {
                poll.deallocate()
                return
            }
            poll.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            mainQueuePoll = poll
        }
        mainQueuePollActive = true
        uv_poll_start(poll, Int32(UV_READABLE.rawValue)) { handle, _, _ in
            EventLoop.from(handle!.pointee.data).drainMainQueue()
        }
        drainMainQueue()
    }

    private func drainMainQueue() {
        guard clibuv_is_main_thread() != 0 else {
            // Driven by another thread now: only the main thread may drain the main queue.
            if let mainQueuePoll { uv_poll_stop(mainQueuePoll) }
            mainQueuePollActive = false
            return
        }
        // Clear the wake-up first, so that work queued while draining wakes the loop again.
        _ = clibuv_read_counter(_dispatch_get_main_queue_handle_4CF())
        _dispatch_main_queue_callback_4CF(nil)
    }

    // MARK: The loop of the current thread

    nonisolated(unsafe) private static var currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The loop the calling thread is driving, if any.
    public static var current: EventLoop? {
        guard let pointer = pthread_getspecific(currentKey) else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(pointer).takeUnretainedValue()
    }

    private static func setCurrent(_ loop: EventLoop?) {
        pthread_setspecific(currentKey, loop.map { Unmanaged.passUnretained($0).toOpaque() })
    }

    // MARK: Embedding

    /// The file descriptor an outer poller waits on (readable when the loop has work): libuv's
    /// backend descriptor (an epoll descriptor on Linux).
    public var backendFileDescriptor: Int32 { uv_backend_fd(uvLoop) }

    /// How long, in milliseconds, an outer poller may wait before calling `runNoWait()`: the
    /// time to the next timer, 0 if work is ready, -1 for no timeout. Ask again after each run.
    public var backendTimeout: Int32 { uv_backend_timeout(uvLoop) }

    // MARK: A thread of its own

    /// Creates a loop and runs it on a new thread; returns once the loop is running.
    ///
    /// - Throws: `UVError` if libuv cannot create the loop.
    public static func startOnNewThread(name: String = "ReactiveLoopUV") throws(UVError) -> EventLoop {
        let loop = try EventLoop()
        let running = DispatchSemaphore(value: 0)
        loop.execute { running.signal() }
        let thread = Thread { loop.run() }
        thread.name = name
        thread.start()
        running.wait()
        return loop
    }
}

/// A result handed from the loop thread to a waiting thread (the semaphore orders the accesses).
final class _ResultBox<T>: @unchecked Sendable {
    var result: Result<T, UVError>?
}

/// The calling thread's id.
func currentThreadID() -> UInt {
    UInt(pthread_self())
}

/// What the loop's cross-thread queue holds: a closure from `execute(_:)`, or a job enqueued
/// on the loop as an executor, kept as it is (no closure, so no allocation per job).
///
/// An enum rather than bare closures: an array of bare closures stores them in their most
/// general form, which costs a reabstraction thunk (an allocation) per queued closure.
enum _QueuedWork {
    case closure(() -> Void)
    case job(UnownedJob)
}

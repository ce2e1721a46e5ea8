import CLibUV
import Dispatch
import ReactiveLoopCore
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
    /// Guards `state` and `pending`; its condition wakes threads waiting for a borrower to hand
    /// the loop back.
    private let stateLock = _Lock.make(spinning: true)
    // Protected by stateLock. Where the loop is in its life, and which thread holds it.
    // Exclusivity checks are off for it and the queue's two buffers: the lock (or the loop
    // thread) already makes every access exclusive, and the checks cost more than the queueing.
    @exclusivity(unchecked) private var state = _LoopLifecycle.open(holder: nil)
    // Protected by stateLock. Work queued by `execute`, oldest first.
    @exclusivity(unchecked) private var pending: [_QueuedWork] = []
    /// The thread that holds the loop (drives it, or borrows it for one call), or 0: a copy of
    /// `state`'s holder, written under `stateLock`, read without it by `inEventLoop`.
    private let holderThread = Atomic<UInt>(0)
    // Confined to the loop thread. The other buffer of the queue's double buffering.
    @exclusivity(unchecked) private var draining: [_QueuedWork] = []
    // Confined to the loop thread. The objects owning the loop's handles, by handle (see
    // "Lifetime of handles").
    private var owners: [UnsafeMutableRawPointer: _HandleEntry] = [:]
    // Confined to the loop thread. Requests in flight (name resolutions), cancelled at shutdown.
    private var requests: [ObjectIdentifier: any _LoopRequest] = [:]
    // Confined to the loop thread. Whether a thread has driven the loop (from then on it holds
    // its handles' owners strongly).
    private(set) var hasRun = false
    private let finished = DispatchSemaphore(value: 0)
    // Confined to the loop thread. The read buffer its TCP connections share (reads on a loop
    // come one at a time), so that an idle connection holds none.
    var sharedReadBuffer = _ReceiveBuffer(capacity: 64 * 1024)
    // Confined to the loop thread. Timed actions of the runtime itself (connection timeouts).
    // Weak: the loop's handle registry holds them from its first run.
    private weak var runtimeTimers: _LoopTimers?
    // Confined to the loop thread. Polls the Dispatch main queue's wake-up descriptor while the
    // process's main thread drives the loop (see "The Dispatch main queue").
    private var mainQueuePoll: UnsafeMutablePointer<uv_poll_t>?
    private var mainQueuePollActive = false

    /// Creates a loop. It runs once a thread calls `run()` (or drives it with `runOnce()`).
    ///
    /// - Throws: `UVError` if libuv cannot create the loop.
    public init() throws(UVError) {
        EventLoop.ignoreBrokenPipes
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
        if case .closed = state {
        } else {
            // Never run, or never stopped: nothing else can hold it now. This thread is the loop
            // thread for the shutdown.
            state = state.holding(_LoopHolder(thread: currentThreadID(), isBorrowed: false))
            holderThread.store(currentThreadID(), ordering: .releasing)
            shutDown()
        }
        uvLoop.deallocate()
        wakeup.deallocate()
        mainQueuePoll?.deallocate()
    }

    /// A write to a peer that has gone raises `SIGPIPE`, whose default action ends the process:
    /// one client that disconnects mid-response would kill a daemon. The first loop made sets
    /// `SIGPIPE` to be ignored (unless the program installed a handler of its own), so such a
    /// write fails with `EPIPE` instead.
    private static let ignoreBrokenPipes: Void = {
        var current = sigaction()
        sigaction(SIGPIPE, nil, &current)
        if current.__sigaction_handler.sa_handler == nil {  // SIG_DFL
            signal(SIGPIPE, SIG_IGN)
        }
    }()

    static func from(_ pointer: UnsafeMutableRawPointer?) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(pointer!).takeUnretainedValue()
    }

    // MARK: Running

    /// Runs the loop on the calling thread until `stop()`, then shuts it down (see "Shutdown").
    /// If another thread is borrowing the loop for a call (creating a socket, say), waits for
    /// that call first. Returns at once on a loop that has shut down.
    ///
    /// - Precondition: No other thread is driving the loop, and the call is not made from
    ///   inside one of this loop's callbacks (libuv's loop is not reentrant).
    public func run() {
        drive(UV_RUN_DEFAULT, "EventLoop.run()")
    }

    /// Runs the loop once on the calling thread: waits for at least one event (or the next
    /// timer), handles what is ready, and returns. For driving the loop from another poller.
    /// Preconditions as for `run()`.
    ///
    /// - Returns: Whether the loop still has work (active handles or requests); `false` once
    ///   it has shut down.
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
        switch hold(.driving, api) {
        case .closed: return false
        case .queueInstead: preconditionFailure("Internal inconsistency: a driver told to queue")
        case .held: break
        }
        defer { letGo() }
        let previous = EventLoop.current
        EventLoop.setCurrent(self)
        defer { EventLoop.setCurrent(previous) }
        if !hasRun {
            hasRun = true
            // From now on the loop keeps its handles open whether or not anyone else refers to
            // their owners (see "Lifetime of handles").
            for key in owners.keys { owners[key]!.pin() }
        }
        if !mainQueuePollActive && clibuv_is_main_thread() != 0 { startDrainingMainQueue() }
        let alive = uv_run(uvLoop, mode) != 0
        if isStopping {
            shutDown()
            return false
        }
        return alive
    }

    /// What `hold` was asked for.
    private enum HoldPurpose { case driving, borrowing }
    /// What `hold` did.
    private enum HoldOutcome { case held, queueInstead, closed }

    /// Makes the calling thread the loop's holder. Waits while another thread borrows the loop;
    /// a borrower finding the loop driven by another thread is told to queue its work instead.
    private func hold(_ purpose: HoldPurpose, _ api: String) -> HoldOutcome {
        let me = currentThreadID()
        stateLock.lock()
        defer { stateLock.unlock() }
        while true {
            guard let current = state.holder else {
                if case .closed = state { return .closed }
                state = state.holding(_LoopHolder(thread: me, isBorrowed: purpose == .borrowing))
                holderThread.store(me, ordering: .releasing)
                return .held
            }
            _require(
                current.thread != me,
                "\(api): called on the thread driving this loop, from inside one of its callbacks (libuv's loop is not reentrant)"
            )
            if current.isBorrowed {
                stateLock.wait()  // A borrower holds the loop for one call; `letGo` wakes us.
            } else if purpose == .borrowing {
                return .queueInstead
            } else {
                _require(false, "\(api): the loop is already running on another thread")
            }
        }
    }

    /// Ends the calling thread's hold of the loop and wakes the threads waiting for it.
    private func letGo() {
        stateLock.withLock {
            state = state.holding(nil)
            holderThread.store(0, ordering: .releasing)
            stateLock.broadcast()
        }
    }

    /// Stops the loop (see "Shutdown"). May be called from any thread, from inside any callback,
    /// any number of times; returns at once. Use `waitUntilStopped()` to wait for the shutdown.
    public func stop() {
        let wasOpen: Bool = stateLock.withLock {
            guard case let .open(holder) = state else { return false }
            state = .stopping(holder: holder)
            return true
        }
        if wasOpen { uv_async_send(wakeup) }
    }

    /// Whether `stop()` was called and the loop has not shut down yet. Loop thread.
    private var isStopping: Bool {
        stateLock.withLock {
            if case .stopping = state { return true }
            return false
        }
    }

    /// Whether the loop has shut down (`stop()` was processed and every handle closed).
    public var isStopped: Bool {
        stateLock.withLock {
            if case .closed = state { return true }
            return false
        }
    }

    /// Blocks until the loop has shut down.
    ///
    /// - Precondition: Not called on the loop thread (that would wait for itself).
    public func waitUntilStopped() {
        _require(!inEventLoop, "EventLoop.waitUntilStopped(): called on the loop thread, which would wait for itself")
        finished.wait()
        finished.signal()
    }

    /// libuv's result of closing the loop (`uv_loop_close`): 0 when every handle was closed.
    /// Waits for the loop to shut down.
    public var closeStatus: Int32 {
        finished.wait()
        finished.signal()
        return stateLock.withLock {
            guard case let .closed(status) = state else { preconditionFailure("Internal inconsistency: \(state)") }
            return status
        }
    }

    // MARK: Cross-thread work

    /// Whether the calling thread holds this loop: it drives it, or borrows it for a call.
    ///
    /// Never a false negative on the loop thread: the thread records itself before any
    /// callback runs. Never a false positive elsewhere. Between two `runOnce()` calls no thread
    /// drives the loop, and this is `false` everywhere.
    public var inEventLoop: Bool {
        holderThread.load(ordering: .relaxed) == currentThreadID()
    }

    /// Stops the program in debug builds unless the calling thread holds this loop. The
    /// runtime calls it at every entry that only the loop thread may use, so that a call from
    /// the wrong thread is caught where it happens rather than as corrupted state later.
    /// Costs nothing in release builds.
    @inlinable
    public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "called off the thread that holds this EventLoop", file: file, line: line)
    }

    /// Stops the program unless the calling thread holds this loop, in every build.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        _require(inEventLoop, "called off the thread that holds this EventLoop (\(file):\(line))")
    }

    /// Runs `task` on the loop thread, after the work queued before it (by this thread; work
    /// queued by other threads interleaves). Called on the loop thread, `task` runs after the
    /// current callback returns, never inside it.
    ///
    /// - Returns: `false` if the loop was stopped: `task` is dropped, never run.
    @discardableResult
    public func execute(_ task: consuming @escaping () -> Void) -> Bool {
        queue(.closure(consume task))
    }

    /// Queues `work` for the loop thread (see `execute(_:)`); `false` if the loop was stopped.
    ///
    /// `work` is moved into the queue, and moved out of it to run: a closure's context is
    /// retained by no one but the queue on its way to the loop thread.
    func queue(_ work: consuming _QueuedWork) -> Bool {
        stateLock.lock()
        guard case .open = state else {
            stateLock.unlock()
            // Released only now, outside the lock: a capture's deinit may call into the loop.
            withExtendedLifetime(work) {}
            return false
        }
        pending.append(work)
        let wasEmpty = pending.count == 1
        stateLock.unlock()
        if wasEmpty { uv_async_send(wakeup) }
        return true
    }

    /// How many closures are queued and not yet taken by the loop thread (for tests).
    var queuedCount: Int { stateLock.withLock { pending.count } }

    /// Runs `body` on the loop thread: at once if the calling thread holds the loop or can
    /// borrow it (no thread drives it), otherwise queued (`execute`).
    ///
    /// - Returns: `false` if the loop was stopped: `body` never runs.
    func onLoopThread(_ body: @escaping () -> Void) -> Bool {
        let holder = holderThread.load(ordering: .relaxed)
        if holder == currentThreadID() {
            body()
            return true
        }
        // Held by another thread (almost always the one driving it): queue, with one lock.
        if holder != 0 { return execute(body) }
        switch hold(.borrowing, "EventLoop") {
        case .held:
            defer { letGo() }
            guard !isStopping else { return false }
            body()
            return true
        case .queueInstead: return execute(body)
        case .closed: return false
        }
    }

    /// Runs `body` on the loop thread and returns its result: inline on the loop thread, inline
    /// while no thread drives the loop (the calling thread borrows it for the call, as a daemon
    /// does when it opens its sockets before `run()`; a thread that starts driving meanwhile
    /// waits for the call); otherwise queued, and the calling thread waits for the loop thread.
    ///
    /// - Throws: `UVError.loopStopped` if the loop was stopped, or what `body` throws.
    func performSync<T>(_ body: @escaping () throws(UVError) -> T) throws(UVError) -> T {
        if inEventLoop { return try body() }
        switch hold(.borrowing, "EventLoop") {
        case .held:
            defer { letGo() }
            guard !isStopping else { throw .loopStopped }
            return try body()
        case .closed:
            throw .loopStopped
        case .queueInstead:
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
    }

    /// Runs one queued closure or job. Loop thread only.
    private func run(_ work: _QueuedWork) {
        switch work {
        case let .closure(task):
            task()
        case let .job(job):
            job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        case .moved:
            break
        }
    }

    /// Drains the queue: runs every task queued so far, in order. Loop thread only.
    private func drain() {
        while true {
            let stopping: Bool = stateLock.withLock {
                swap(&pending, &draining)
                if case .open = state { return false }
                return true
            }
            if draining.isEmpty {
                if stopping { uv_stop(uvLoop) }
                return
            }
            runDraining()
            // Work queued by these tasks (or by other threads meanwhile) runs in the next round
            // only after a fresh wake-up, unless the loop is stopping: then drain to the end.
            if !stopping { return }
        }
    }

    /// Runs the work in `draining`, oldest first, and empties it (keeping its capacity). Each
    /// piece of work is moved out before it runs, so it is released once, when it has run.
    /// Loop thread only.
    private func runDraining() {
        var batch: [_QueuedWork] = []
        swap(&batch, &draining)
        for index in batch.indices {
            var work = _QueuedWork.moved
            swap(&work, &batch[index])
            run(work)
        }
        batch.removeAll(keepingCapacity: true)
        draining = batch
    }

    /// The timers for the runtime's own timed actions, made on first use. Loop thread.
    func internalTimers() -> _LoopTimers {
        assertInEventLoop()
        if let runtimeTimers { return runtimeTimers }
        let made = _LoopTimers(loop: self)
        runtimeTimers = made
        return made
    }

    // MARK: Lifetime of handles

    /// Registers `owner` as the owner of `handle`: the loop closes it when it shuts down, and
    /// from its first run holds `owner` strongly until the handle is closed. Before that, the
    /// loop holds it weakly, so a loop released without ever running is freed with its sockets.
    /// Loop thread.
    func register(_ owner: some _LoopOwnedHandle, of handle: UnsafeMutableRawPointer) {
        assertInEventLoop()
        var entry = _HandleEntry(owner: owner)
        if hasRun { entry.pin() }
        owners[handle] = entry
    }

    /// Forgets the owner of `handle` (it is closing, or changes owner). Loop thread.
    func unregister(_ handle: UnsafeMutableRawPointer) {
        assertInEventLoop()
        owners[handle] = nil
    }

    /// Registers a request in flight: the loop cancels it if it shuts down first. Loop thread.
    func register(_ request: some _LoopRequest) {
        assertInEventLoop()
        requests[ObjectIdentifier(request)] = request
    }

    /// Forgets a request that has ended. Loop thread.
    func unregister(_ request: some _LoopRequest) {
        assertInEventLoop()
        requests[ObjectIdentifier(request)] = nil
    }

    /// Closes `handle` whose owner was freed before the loop first ran (the owner's `deinit`).
    /// The handle's descriptor is closed at once when a thread can borrow the loop.
    /// `descriptor`, if not -1, is closed right after (a timerfd that the handle polled).
    func closeOrphan(_ handle: UnsafeMutablePointer<uv_handle_t>, thenClosing descriptor: Int32 = -1) {
        let raw = _Unchecked(handle)
        let accepted = onLoopThread { [self] in
            owners[UnsafeMutableRawPointer(raw.value)] = nil
            if uv_is_closing(raw.value) == 0 {
                raw.value.pointee.data = nil
                uv_close(raw.value) { UnsafeMutableRawPointer($0!).deallocate() }
            }
            if descriptor >= 0 { Glibc.close(descriptor) }
        }
        // A stopped loop closed the handle already.
        if !accepted && descriptor >= 0 { Glibc.close(descriptor) }
    }

    private func shutDown() {
        stateLock.withLock {
            if case .open(let holder) = state { state = .stopping(holder: holder) }
        }
        // Work accepted before the stop still runs.
        while true {
            stateLock.withLock { swap(&pending, &draining) }
            if draining.isEmpty { break }
            runDraining()
        }
        // Close what the owners hold, ending their streams; an owner's callback may close others.
        while let (handle, entry) = owners.first {
            if let owner = entry.owner {
                owner.closeOnLoop(interrupted: true)
            }
            owners[handle] = nil
        }
        while let (key, request) = requests.first {
            requests[key] = nil
            request.cancelOnLoop()
        }
        uv_walk(
            uvLoop,
            { handle, _ in
                if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
            }, nil)
        while uv_run(uvLoop, UV_RUN_NOWAIT) != 0 {}
        let status = uv_loop_close(uvLoop)
        stateLock.withLock { state = .closed(status: status) }
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
        loop.execute {
            _ = clibuv_set_thread_name(name)
            running.signal()
        }
        // A thread of the C library's own (Foundation's `Thread` would load all of Foundation):
        // it holds the loop until `run()` returns.
        let start = Unmanaged.passRetained(loop).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { argument in
                Unmanaged<EventLoop>.fromOpaque(argument!).takeRetainedValue().run()
                return nil
            }, start)
        guard status == 0 else {
            Unmanaged<EventLoop>.fromOpaque(start).release()
            loop.stop()
            throw UVError(code: -status, operation: "EventLoop.startOnNewThread: pthread_create")
        }
        pthread_detach(thread)
        running.wait()
        return loop
    }
}

/// Where a loop is in its life, and which thread holds it: one value, changed under the loop's
/// state lock.
enum _LoopLifecycle {
    /// Accepting work.
    case open(holder: _LoopHolder?)
    /// `stop()` was called: no new work; the work already accepted runs, then the loop shuts down.
    case stopping(holder: _LoopHolder?)
    /// Shut down: every handle closed, and the libuv loop closed with `status`.
    case closed(status: Int32)

    /// The thread holding the loop, if any.
    var holder: _LoopHolder? {
        switch self {
        case let .open(holder), let .stopping(holder): holder
        case .closed: nil
        }
    }

    /// The same phase with `holder` holding the loop (no change once closed).
    func holding(_ holder: _LoopHolder?) -> _LoopLifecycle {
        switch self {
        case .open: .open(holder: holder)
        case .stopping: .stopping(holder: holder)
        case .closed: self
        }
    }
}

/// The thread holding a loop: the one driving it (`run()`, `runOnce()`, `runNoWait()`), or one
/// that borrows it for a single call while nobody drives it.
struct _LoopHolder {
    let thread: UInt
    let isBorrowed: Bool
}

/// A handle's owner as the loop holds it: weakly until the loop first runs, then strongly
/// (`pinned`) until the handle is closed.
struct _HandleEntry {
    weak var owner: (any _LoopOwnedHandle)?
    private var pinned: (any _LoopOwnedHandle)?

    init(owner: any _LoopOwnedHandle) { self.owner = owner }

    mutating func pin() { pinned = owner }
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
    /// What is left in the queue's slot once its work was moved out to run.
    case moved
}

import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// The loop as an executor for Swift concurrency.
///
/// An actor runs on the loop thread when it returns the loop's executor:
///
/// ```swift
/// actor Connections {
///     let loop: EventLoop
///     nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
/// }
/// ```
///
/// and a task prefers the loop for its nonisolated code with `Task(executorPreference: loop)`.
///
/// - Jobs go through the queue behind `execute(_:)`, as they are (no closure per job): from any
///   thread, in order per enqueuing thread, and never inside the callback that enqueued them.
/// - On the loop thread, `assumeIsolated` of an actor on this loop succeeds: the loop is the
///   isolation (`checkIsolated()`), whichever callback is running.
/// - Shutdown: jobs enqueued before `stop()` run before `run()` returns. A job enqueued after
///   the loop stopped cannot run on it and is dropped, so a task that awaits something on a
///   stopped loop never resumes; stop a loop once its actors are done with it. In debug builds
///   the drop is reported on standard error.
extension EventLoop: SerialExecutor, TaskExecutor {
    /// Queues `job` to run on the loop thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        if queue(.job(UnownedJob(job))) { return }
        #if DEBUG
            let message = "EventLoop.enqueue(_:): the loop has stopped; a job was dropped\n"
            _ = message.utf8CString.withUnsafeBytes { write(2, $0.baseAddress, $0.count - 1) }
        #endif
    }

    /// This loop as the executor of an actor.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// This loop as a task's preferred executor.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Stops the program unless the calling thread is the one driving this loop; used by
    /// `assumeIsolated` and isolation checks.
    public func checkIsolated() {
        _require(inEventLoop, "EventLoop.checkIsolated(): not called on the thread driving this loop")
    }

    /// Whether the calling thread is the one driving this loop.
    public func isIsolatingCurrentContext() -> Bool? {
        inEventLoop
    }
}

// The event-loop benchmarks: LoopScheduler and EventLoop against raw libuv, SwiftNIO and
// Dispatch, side by side in one run.
//
// - Timers: 1M timers with random deadlines within 100 ms (the same deadlines for every peer),
//   scheduled from the loop's own thread; "schedule" times the scheduling only, "fire all" until
//   the last has run. Raw libuv starts 1M preallocated `uv_timer_t`s (no allocation at all: its
//   floor); NIO with `scheduleTask` and `scheduleCallback`; Dispatch with `asyncAfter` on a
//   serial queue.
// - Cross-thread execute: 1M closures queued from the benchmark thread, or from 4 threads at
//   once, until the last has run; the floor is a C queue with the same `uv_async_send` wake-up.
// - Actor hops: 1k awaited calls per sample from a task on the global executor into an actor that runs on
//   the loop (its `unownedExecutor`), on a NIO event loop, and on the default executor (a plain
//   actor); each call hops there and back.
// - Lateness: 1,000 sequential 1 ms timers (each scheduled from the previous one's callback);
//   custom metrics give the mean and p99 of (time run - deadline) per run, in nanoseconds.

import Benchmark
import CLibUVRaw
import Dispatch
import Foundation
import NIOCore
import NIOPosix
@_spi(Testing) import ReactiveLoop
import ReactiveLoopUV

/// Deadline offsets in nanoseconds, uniform within 100 ms, from a fixed seed: for the runs that
/// fire every timer (most are due while the rest are still being scheduled).
let timerOffsets: [UInt64] = timerDeadlineOffsets(from: 0, within: 100_000_000)

/// Deadline offsets 1 to 2 s ahead, from the same seed: for the runs that measure scheduling
/// alone, so that every deadline is still in the future when it is scheduled (scheduling 1M
/// takes well under a second) and the path measured is the one of a timer not yet due, for
/// each scheduler alike.
let futureTimerOffsets: [UInt64] = timerDeadlineOffsets(from: 1_000_000_000, within: 1_000_000_000)

func timerDeadlineOffsets(from start: UInt64, within span: UInt64) -> [UInt64] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    return (0..<1_000_000).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return start + (state >> 33) % span
    }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of `uv_hrtime` and of Dispatch's uptime).
@inline(__always) func monotonicNow() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// A count touched by one thread at a time (a loop thread or a serial queue), with a signal
/// when it reaches zero.
final class Countdown: @unchecked Sendable {
    var remaining = 0
    let done = DispatchSemaphore(value: 0)
    func tick() {
        remaining -= 1
        if remaining == 0 { done.signal() }
    }
}

/// The countdown of the cross-thread execute rows (see `executeFromThreads`).
let executeCountdown = Countdown()

/// Lateness samples of one run, in nanoseconds.
final class LatenessRecorder: @unchecked Sendable {
    var samples: [UInt64] = []
    let done = DispatchSemaphore(value: 0)
    let count = 1_000

    /// Records one sample; returns whether more are wanted.
    func record(deadline: UInt64) -> Bool {
        let now = monotonicNow()
        samples.append(now > deadline ? now - deadline : 0)
        if samples.count == count { done.signal() }
        return samples.count < count
    }

    /// The metrics a lateness benchmark reports: the mean and the distribution of one run.
    static let metrics: [BenchmarkMetric] = [
        .custom("lateness mean (ns)", useScalingFactor: false),
        .custom("lateness p50 (ns)", useScalingFactor: false),
        .custom("lateness p90 (ns)", useScalingFactor: false),
        .custom("lateness p99 (ns)", useScalingFactor: false),
        .custom("lateness max (ns)", useScalingFactor: false),
    ]

    func report(to benchmark: Benchmark) {
        let sorted = samples.sorted()
        benchmark.measurement(
            .custom("lateness mean (ns)", useScalingFactor: false), Int(sorted.reduce(0, +)) / sorted.count)
        for (name, percentile) in [("p50", 50), ("p90", 90), ("p99", 99)] {
            benchmark.measurement(
                .custom("lateness \(name) (ns)", useScalingFactor: false), Int(sorted[sorted.count * percentile / 100]))
        }
        benchmark.measurement(.custom("lateness max (ns)", useScalingFactor: false), Int(sorted[sorted.count - 1]))
        samples.removeAll(keepingCapacity: true)
    }
}

/// A NIO callback handler that counts down.
struct CountdownHandler: NIOScheduledCallbackHandler, Sendable {
    let countdown: Countdown
    func handleScheduledCallback(eventLoop: some NIOCore.EventLoop) { countdown.tick() }
}

func loopBenchmarks() {
    let timers = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal], scalingFactor: .mega, maxDuration: .seconds(10),
        maxIterations: shortMode ? 1 : 5)
    let lateness = Benchmark.Configuration(
        metrics: LatenessRecorder.metrics, scalingFactor: .one, maxDuration: .seconds(20),
        maxIterations: shortMode ? 1 : 5, thresholds: [:])

    // MARK: LoopScheduler

    let loop = try! ReactiveLoopUV.EventLoop.startOnNewThread(name: "benchmark loop")
    let scheduler = LoopScheduler(loop: loop)

    /// Schedules the 1M timers on the loop thread; the measurement ends after scheduling, or
    /// after the last fired.
    func loopSchedulerTimers(_ benchmark: Benchmark, scheduleOnly: Bool) {
        let offsets = scheduleOnly ? futureTimerOffsets : timerOffsets
        let countdown = Countdown()
        let scheduled = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        loop.execute {
            countdown.remaining = offsets.count
            let base = Date()
            for offset in offsets {
                scheduler.schedule(after: base.addingTimeInterval(Double(offset) / 1e9)) { countdown.tick() }
            }
            scheduled.signal()
        }
        scheduled.wait()
        if scheduleOnly { benchmark.stopMeasurement() }
        countdown.done.wait()
        if !scheduleOnly { benchmark.stopMeasurement() }
    }
    Benchmark("Timers: schedule 1M (LoopScheduler)", configuration: timers) {
        loopSchedulerTimers($0, scheduleOnly: true)
    }
    Benchmark("Timers: schedule 1M and fire all (LoopScheduler)", configuration: timers) {
        loopSchedulerTimers($0, scheduleOnly: false)
    }

    /// Queues the benchmark's iterations from `threads` threads of their own, all started
    /// before the first task is queued (each queues its share), until the last task has run.
    /// (`DispatchQueue.concurrentPerform` would run at most as many at once as there are
    /// cores.) The tasks tick `executeCountdown`, a global: a closure that captures nothing has
    /// no context to retain and release, as the C floor's tasks have none, so the rows compare
    /// the queues and not the reference counting of a shared capture.
    func executeFromThreads(_ benchmark: Benchmark, threads: Int, _ queue: @escaping @Sendable () -> Void) {
        let perThread = benchmark.scaledIterations.count / threads
        executeCountdown.remaining = perThread * threads
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        for _ in 0..<threads {
            Thread {
                ready.signal()
                go.wait()
                for _ in 0..<perThread { queue() }
            }.start()
        }
        for _ in 0..<threads { ready.wait() }
        benchmark.startMeasurement()
        for _ in 0..<threads { go.signal() }
        executeCountdown.done.wait()
        benchmark.stopMeasurement()
    }

    Benchmark("Execute 1M from another thread (EventLoop)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 1) { loop.execute { executeCountdown.tick() } }
    }

    Benchmark("Execute 1M from 4 threads (EventLoop)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 4) { loop.execute { executeCountdown.tick() } }
    }

    // The same tasks, each capturing one object that all share: every queued closure retains
    // it on its thread and releases it on the loop thread, one contended atomic each way.
    Benchmark("Execute 1M from 4 threads, capturing a shared object (EventLoop)", configuration: timers) {
        benchmark in
        let countdown = executeCountdown
        executeFromThreads(benchmark, threads: 4) { loop.execute { countdown.tick() } }
    }

    Benchmark("LoopScheduler.schedule, 1M actions", configuration: timers) { benchmark in
        let countdown = Countdown()
        countdown.remaining = benchmark.scaledIterations.count
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { scheduler.schedule { countdown.tick() } }
        countdown.done.wait()
        benchmark.stopMeasurement()
    }

    // A time operator arming its timer on the loop's thread (so no cross-thread hop, and behind an
    // earlier timer, so no system call): one run of `timeout` started and disposed per operation,
    // with deadlines on the scheduler's clock and through dates, side by side. The difference is
    // what the clock entry saves per armed timer.
    for clock in [_TimeOperatorClock.schedulerClock, .dates] {
        let name = clock == .schedulerClock ? "scheduler clock" : "dates"
        Benchmark(
            "timeout(after: 3600, on: LoopScheduler) start and dispose, on the loop (\(name))",
            configuration: .init(scalingFactor: .kilo)
        ) { benchmark in
            let producer = withClock(clock) {
                SignalProducer<Int, TimeoutBenchmarkError>.never
                    .timeout(after: 3600, raising: TimeoutBenchmarkError(), on: scheduler)
            }
            let iterations = benchmark.scaledIterations
            let done = DispatchSemaphore(value: 0)
            // An earlier pending timer, so that arming and disposing never re-arms the loop's.
            let earlier = scheduler.schedule(after: Date(timeIntervalSinceNow: 1_800)) {}
            defer { earlier?.dispose() }
            loop.execute {
                benchmark.startMeasurement()
                for _ in iterations { producer.start().dispose() }
                benchmark.stopMeasurement()
                done.signal()
            }
            done.wait()
        }
    }

    Benchmark("Timer lateness, 1,000 x 1 ms (LoopScheduler)", configuration: lateness) { benchmark in
        let recorder = LatenessRecorder()
        func next() {
            let deadline = monotonicNow() + 1_000_000
            scheduler.schedule(after: Date(timeIntervalSinceNow: 0.001)) {
                if recorder.record(deadline: deadline) { next() }
            }
        }
        loop.execute { next() }
        recorder.done.wait()
        recorder.report(to: benchmark)
    }

    Benchmark("Timer lateness, 1,000 x 1 ms (QueueScheduler)", configuration: lateness) { benchmark in
        let recorder = LatenessRecorder()
        let queueScheduler = QueueScheduler(name: "benchmark lateness")
        func next() {
            let deadline = monotonicNow() + 1_000_000
            queueScheduler.schedule(after: Date(timeIntervalSinceNow: 0.001)) {
                if recorder.record(deadline: deadline) { next() }
            }
        }
        queueScheduler.schedule { next() }
        recorder.done.wait()
        recorder.report(to: benchmark)
    }

    // MARK: Raw libuv

    Benchmark("Timers: schedule 1M (raw libuv)", configuration: timers) { rawLibuvTimers($0, scheduleOnly: true) }
    Benchmark("Timers: schedule 1M and fire all (raw libuv)", configuration: timers) {
        rawLibuvTimers($0, scheduleOnly: false)
    }
    Benchmark("Timer lateness, 1,000 x 1 ms (raw libuv)", configuration: lateness) { benchmark in
        let recorder = LatenessRecorder()
        let uvLoop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_loop_init(uvLoop)
        uv_timer_init(uvLoop, timer)
        rawLateness = (recorder, 0)
        rawArm(timer)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        uv_loop_close(uvLoop)
        timer.deallocate()
        uvLoop.deallocate()
        recorder.report(to: benchmark)
    }

    // MARK: SwiftNIO

    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let nioLoop = group.next()

    func nioTimers(_ benchmark: Benchmark, scheduleOnly: Bool, callbacks: Bool) {
        let offsets = scheduleOnly ? futureTimerOffsets : timerOffsets
        let countdown = Countdown()
        let scheduled = DispatchSemaphore(value: 0)
        let handler = CountdownHandler(countdown: countdown)
        benchmark.startMeasurement()
        nioLoop.execute {
            countdown.remaining = offsets.count
            let base = NIODeadline.now()
            for offset in offsets {
                let deadline = base + .nanoseconds(Int64(offset))
                if callbacks {
                    _ = try! nioLoop.scheduleCallback(at: deadline, handler: handler)
                } else {
                    nioLoop.scheduleTask(deadline: deadline) { countdown.tick() }
                }
            }
            scheduled.signal()
        }
        scheduled.wait()
        if scheduleOnly { benchmark.stopMeasurement() }
        countdown.done.wait()
        if !scheduleOnly { benchmark.stopMeasurement() }
    }
    Benchmark("Timers: schedule 1M (NIO scheduleTask)", configuration: timers) {
        nioTimers($0, scheduleOnly: true, callbacks: false)
    }
    Benchmark("Timers: schedule 1M and fire all (NIO scheduleTask)", configuration: timers) {
        nioTimers($0, scheduleOnly: false, callbacks: false)
    }
    Benchmark("Timers: schedule 1M (NIO scheduleCallback)", configuration: timers) {
        nioTimers($0, scheduleOnly: true, callbacks: true)
    }
    Benchmark("Timers: schedule 1M and fire all (NIO scheduleCallback)", configuration: timers) {
        nioTimers($0, scheduleOnly: false, callbacks: true)
    }

    Benchmark("Execute 1M from another thread (NIO)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 1) { nioLoop.execute { executeCountdown.tick() } }
    }

    Benchmark("Execute 1M from 4 threads (NIO)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 4) { nioLoop.execute { executeCountdown.tick() } }
    }

    let serialQueue = DispatchQueue(label: "execute-peer")
    Benchmark("Execute 1M from 4 threads (DispatchQueue.async)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 4) { serialQueue.async { executeCountdown.tick() } }
    }

    // The floor: a C queue of function and argument pairs into a raw libuv loop, woken by
    // `uv_async_send` as `EventLoop` is (see CLibUVRaw/shim.h). Its tasks allocate nothing.
    let cQueue = CQueueLoop()
    Benchmark("Execute 1M from another thread (C queue, uv_async_send)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 1) { cQueue.push(executeCountdown) }
    }
    Benchmark("Execute 1M from 4 threads (C queue, uv_async_send)", configuration: timers) { benchmark in
        executeFromThreads(benchmark, threads: 4) { cQueue.push(executeCountdown) }
    }

    Benchmark("Timer lateness, 1,000 x 1 ms (NIO scheduleTask)", configuration: lateness) { benchmark in
        let recorder = LatenessRecorder()
        @Sendable func next() {
            let deadline = monotonicNow() + 1_000_000
            nioLoop.scheduleTask(in: .milliseconds(1)) {
                if recorder.record(deadline: deadline) { next() }
            }
        }
        nioLoop.execute { next() }
        recorder.done.wait()
        recorder.report(to: benchmark)
    }

    // MARK: Actor hops

    let hops = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(10),
        maxIterations: shortMode ? 3 : 100, thresholds: [:])
    let onLoop = HopCounter(executor: loop.asUnownedSerialExecutor())
    let onNIO = HopCounter(executor: nioLoop.executor.asUnownedSerialExecutor())
    let plain = PlainHopCounter()

    Benchmark("Actor hop, per awaited call (on the EventLoop)", configuration: hops) { benchmark async in
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { await onLoop.touch() }
        benchmark.stopMeasurement()
    }
    Benchmark("Actor hop, per awaited call (on a NIO event loop)", configuration: hops) { benchmark async in
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { await onNIO.touch() }
        benchmark.stopMeasurement()
    }
    Benchmark("Actor hop, per awaited call (default actor)", configuration: hops) { benchmark async in
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { await plain.touch() }
        benchmark.stopMeasurement()
    }

    // MARK: Dispatch

    let queue = DispatchQueue(label: "benchmark timers")

    func dispatchTimers(_ benchmark: Benchmark, scheduleOnly: Bool) {
        let offsets = scheduleOnly ? futureTimerOffsets : timerOffsets
        let countdown = Countdown()
        countdown.remaining = offsets.count
        let base = DispatchTime.now()
        benchmark.startMeasurement()
        for offset in offsets {
            queue.asyncAfter(deadline: base + .nanoseconds(Int(offset))) { countdown.tick() }
        }
        if scheduleOnly { benchmark.stopMeasurement() }
        countdown.done.wait()
        if !scheduleOnly { benchmark.stopMeasurement() }
    }
    Benchmark("Timers: schedule 1M (Dispatch asyncAfter)", configuration: timers) {
        dispatchTimers($0, scheduleOnly: true)
    }
    Benchmark("Timers: schedule 1M and fire all (Dispatch asyncAfter)", configuration: timers) {
        dispatchTimers($0, scheduleOnly: false)
    }

    Benchmark("Timer lateness, 1,000 x 1 ms (Dispatch asyncAfter)", configuration: lateness) { benchmark in
        let recorder = LatenessRecorder()
        @Sendable func next() {
            let deadline = monotonicNow() + 1_000_000
            queue.asyncAfter(deadline: .now() + .milliseconds(1)) {
                if recorder.record(deadline: deadline) { next() }
            }
        }
        queue.async { next() }
        recorder.done.wait()
        recorder.report(to: benchmark)
    }
}

/// Raw libuv: 1M preallocated, initialized `uv_timer_t`s on a loop run by the benchmark thread.
let rawTimers: (loop: UnsafeMutablePointer<uv_loop_t>, timers: UnsafeMutablePointer<uv_timer_t>) = {
    let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
    uv_loop_init(loop)
    let timers = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: timerOffsets.count)
    for index in timerOffsets.indices { uv_timer_init(loop, timers + index) }
    return (loop, timers)
}()

/// Fired timers of the raw libuv benchmark (its loop runs on the benchmark thread).
nonisolated(unsafe) var rawFired = 0

func rawLibuvTimers(_ benchmark: Benchmark, scheduleOnly: Bool) {
    let offsets = scheduleOnly ? futureTimerOffsets : timerOffsets
    let (loop, timers) = rawTimers
    rawFired = 0
    benchmark.startMeasurement()
    uv_update_time(loop)
    for (index, offset) in offsets.enumerated() {
        uv_timer_start(timers + index, { _ in rawFired += 1 }, offset / 1_000_000, 0)
    }
    if scheduleOnly { benchmark.stopMeasurement() }
    uv_run(loop, UV_RUN_DEFAULT)
    if !scheduleOnly { benchmark.stopMeasurement() }
    precondition(rawFired == offsets.count, "raw libuv: \(rawFired) timers fired")
}

/// The raw libuv lateness run: its recorder and the current timer's deadline (its loop runs on
/// the benchmark thread).
nonisolated(unsafe) var rawLateness: (recorder: LatenessRecorder?, deadline: UInt64) = (nil, 0)

/// Starts the next 1 ms raw libuv timer, as a libuv user would (`uv_update_time`, then 1 ms).
func rawArm(_ timer: UnsafeMutablePointer<uv_timer_t>) {
    uv_update_time(timer.pointee.loop)
    rawLateness.deadline = monotonicNow() + 1_000_000
    uv_timer_start(
        timer,
        { timer in
            if rawLateness.recorder!.record(deadline: rawLateness.deadline) { rawArm(timer!) }
        }, 1, 0)
}

/// An actor that runs on the executor it is given (an event loop).
actor HopCounter {
    private let executor: UnownedSerialExecutor
    private var count = 0

    init(executor: UnownedSerialExecutor) { self.executor = executor }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor }

    func touch() { count &+= 1 }
}

/// The same actor on the default executor.
actor PlainHopCounter {
    private var count = 0

    func touch() { count &+= 1 }
}

/// A raw libuv loop on a thread of its own, fed by the C queue of CLibUVRaw/shim.h.
final class CQueueLoop: @unchecked Sendable {  // The queue is thread safe; the loop is its thread's.
    let queue = UnsafeMutablePointer<rl_c_queue>.allocate(capacity: 1)

    init() {
        let ready = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let queue = queue  // Only the new thread uses it until `ready`.
        let thread = Thread {
            let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
            uv_loop_init(loop)
            precondition(rl_c_queue_init(queue, loop) == 0, "rl_c_queue_init failed")
            ready.signal()
            uv_run(loop, UV_RUN_DEFAULT)  // Runs as long as the process: the async handle stays.
        }
        thread.start()
        ready.wait()
    }

    /// Queues one tick of `countdown`, which runs on the loop's thread.
    func push(_ countdown: Countdown) {
        let result = rl_c_queue_push(
            queue, { argument in Unmanaged<Countdown>.fromOpaque(argument!).takeUnretainedValue().tick() },
            Unmanaged.passUnretained(countdown).toOpaque())
        precondition(result == 0, "rl_c_queue_push: out of memory")
    }
}

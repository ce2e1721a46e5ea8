import CLibUV
import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopUV

@Suite("EventLoop")
struct EventLoopTests {
    @Test func executeRunsOnTheLoopThreadAndStopClosesEverything() throws {
        let loop = try EventLoop.startOnNewThread()
        let onLoop = Box(false)
        let done = DispatchSemaphore(value: 0)
        #expect(!loop.inEventLoop)
        #expect(
            loop.execute {
                onLoop.value = loop.inEventLoop && EventLoop.current === loop
                done.signal()
            })
        done.wait()
        #expect(onLoop.value)
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.isStopped)
        #expect(loop.closeStatus == 0)
        #expect(!loop.execute {})
    }

    @Test func everyAcceptedClosureRunsBeforeTheLoopStops() throws {
        let loop = try EventLoop.startOnNewThread()
        let ran = Box(0)
        let gate = DispatchSemaphore(value: 0)
        loop.execute { gate.wait() }
        var accepted = 0
        for _ in 0..<1_000 where loop.execute({ ran.modify { $0 += 1 } }) { accepted += 1 }
        loop.stop()
        #expect(!loop.execute { ran.modify { $0 += 1_000_000 } })
        gate.signal()
        loop.waitUntilStopped()
        #expect(ran.value == accepted)
        #expect(accepted == 1_000)
        #expect(loop.closeStatus == 0)
    }

    @Test func executeFromALoopCallbackRunsAfterTheCurrentCallback() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let order = Box<[String]>([])
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            loop.execute {
                order.modify { $0.append("inner") }
                done.signal()
            }
            order.modify { $0.append("outer") }
        }
        done.wait()
        #expect(order.value == ["outer", "inner"])
    }

    /// A task refused by a stopped loop is released outside the loop's lock, so its captures'
    /// deinitializers may call into the loop (here, `execute` again) without deadlocking.
    @Test func aRefusedTasksCapturesMayCallIntoTheLoop() throws {
        let loop = try EventLoop.startOnNewThread()
        loop.stop()
        loop.waitUntilStopped()
        let refusedAgain = Box<Bool?>(nil)
        let finished = runWithWatchdog(seconds: 30) {
            // The closure holds the only reference to its capture.
            let accepted = loop.execute { [capture = Tracked { refusedAgain.value = !loop.execute {} }] in
                withExtendedLifetime(capture) {}
            }
            #expect(!accepted)
        }
        #expect(finished)
        #expect(refusedAgain.value == true)
    }

    /// Tasks queued together run as one batch; each task's captures are released as soon as it
    /// has run, not when the batch ends, so a large capture is not held across later tasks.
    @Test func aTaskIsReleasedOnceItHasRunNotAtTheEndOfItsBatch() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let gate = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        weak var weakCapture: Tracked?
        let releasedBeforeNextTask = Box<Bool?>(nil)
        loop.execute {
            started.signal()
            gate.wait()
        }
        // The loop thread is inside the first task: the next two are queued together.
        started.wait()
        do {
            let capture = Tracked()
            weakCapture = capture
            loop.execute { withExtendedLifetime(capture) {} }
        }
        loop.execute {
            releasedBeforeNextTask.value = weakCapture == nil
            done.signal()
        }
        gate.signal()
        done.wait()
        #expect(releasedBeforeNextTask.value == true)
    }

    /// 4 threads each execute 250,000 closures: each runs exactly once, on the loop thread, in
    /// its thread's order (the wake-up is coalesced by libuv; nothing may be lost to that).
    @Test func crossThreadExecuteLosesAndReordersNothing() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let threads = 4
        let perThread = ProcessInfo.processInfo.environment["CI_SHORT"] == nil ? 250_000 : 50_000
        let last = Box([Int](repeating: -1, count: threads))
        let problems = Box(0)
        let done = DispatchSemaphore(value: 0)
        for thread in 0..<threads {
            Thread.detachNewThread {
                for index in 0..<perThread {
                    loop.execute {
                        // Confined to the loop thread: plain state, no lock needed for the check.
                        if !loop.inEventLoop || last.value[thread] != index - 1 { problems.modify { $0 += 1 } }
                        last.modify { $0[thread] = index }
                        if index == perThread - 1 { done.signal() }
                    }
                }
            }
        }
        for _ in 0..<threads { done.wait() }
        #expect(problems.value == 0)
        #expect(last.value == [Int](repeating: perThread - 1, count: threads))
    }

    @Test func stoppingALoopThatNeverRanStillClosesIt() throws {
        weak var weakLoop: EventLoop?
        do {
            let loop = try EventLoop()
            weakLoop = loop
            loop.stop()
        }
        #expect(weakLoop == nil)
    }

    /// An outer poller drives the loop: poll(2) on the backend descriptor with the backend
    /// timeout, then `runNoWait()`. A timer armed from a loop callback and a cross-thread
    /// `execute` must both wake it.
    @Test func anOuterPollLoopDrivesTheLoop() throws {
        let loop = try EventLoop()
        let scheduler = LoopScheduler(loop: loop)
        let fired = Box(false)
        let executed = Box(false)
        loop.execute {
            // Armed from inside a callback.
            scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.03)) { fired.value = true }
        }
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.01)
            loop.execute { executed.value = true }
        }
        let deadline = Date().addingTimeInterval(10)
        while !(fired.value && executed.value) && Date() < deadline {
            var descriptor = pollfd(fd: loop.backendFileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, loop.backendTimeout)
            loop.runNoWait()
        }
        #expect(fired.value)
        #expect(executed.value)
        loop.stop()
        while !loop.isStopped { loop.runNoWait() }
        #expect(loop.closeStatus == 0)
    }
}

@Suite("LoopScheduler")
struct LoopSchedulerTests {
    @Test func timedActionsRunOnTheLoopThreadAtOrAfterTheirDeadline() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let scheduler = LoopScheduler(loop: loop)
        let lateness = Box<[Double]>([])
        let done = DispatchSemaphore(value: 0)
        for index in 0..<20 {
            let deadline = scheduler.currentDate.addingTimeInterval(0.005 * Double(index % 5))
            scheduler.schedule(after: deadline) {
                #expect(loop.inEventLoop)
                lateness.modify { $0.append(Date().timeIntervalSince(deadline)) }
                if lateness.value.count == 20 { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(lateness.value.allSatisfy { $0 >= -0.0001 })
    }

    @Test func aTimedActionDisposedOnAnotherThreadNeverRunsOnceDisposeHasReturned() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let scheduler = LoopScheduler(loop: loop)
        let deadline = scheduler.currentDate.addingTimeInterval(0.01)
        let ran = Box(0)
        let blocked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // The first action of the batch holds the loop thread while the test thread disposes the
        // next two, which are due in the same batch: their removals queue behind the batch.
        scheduler.schedule(after: deadline) {
            blocked.signal()
            release.wait()
        }
        let oneShot = scheduler.schedule(after: deadline) { ran.value += 1 }
        let repeating = scheduler.schedule(after: deadline, interval: .milliseconds(5), leeway: .nanoseconds(0)) {
            ran.value += 100
        }
        #expect(blocked.wait(timeout: .now() + 10) == .success)
        oneShot?.dispose()
        repeating?.dispose()
        release.signal()
        Thread.sleep(forTimeInterval: 0.03)
        let sizes = Box((heap: -1, pending: -1))
        let measured = DispatchSemaphore(value: 0)
        loop.execute {
            sizes.value = scheduler.storageSizes
            measured.signal()
        }
        #expect(measured.wait(timeout: .now() + 10) == .success)
        #expect(ran.value == 0)
        #expect(sizes.value.heap == 0 && sizes.value.pending == 0, "\(sizes.value)")
    }

    @Test func scheduleAndCancelCyclesKeepTheHeapBounded() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let scheduler = LoopScheduler(loop: loop)
        let far = scheduler.currentDate.addingTimeInterval(3_600)
        let finished = DispatchSemaphore(value: 0)
        loop.execute {
            for _ in 0..<100_000 { scheduler.schedule(after: far, action: {})?.dispose() }
            finished.signal()
        }
        finished.wait()
        let sizes = Box((0, 0))
        let measured = DispatchSemaphore(value: 0)
        loop.execute {
            sizes.value = scheduler.storageSizes
            measured.signal()
        }
        measured.wait()
        #expect(sizes.value.0 <= 200, "heap entries: \(sizes.value.0)")
        #expect(sizes.value.1 == 0, "pending: \(sizes.value.1)")
    }

    @Test func schedulingOntoAStoppedLoopReturnsNil() throws {
        let loop = try EventLoop.startOnNewThread()
        let scheduler = LoopScheduler(loop: loop)
        let pending = Box(false)
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(60)) { pending.value = true }
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0)
        #expect(scheduler.schedule {} == nil)
        #expect(scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.01)) {} == nil)
        #expect(!pending.value)
    }

    @Test func aWallClockJumpNeitherFiresEarlyNorStallsLoopTimers() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let offset = Box<TimeInterval>(0)
        let scheduler = LoopScheduler(loop: loop, wallClock: { Date().addingTimeInterval(offset.value) })
        let fired = Box(false)
        scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.3)) { fired.value = true }
        offset.value = 3_600
        Thread.sleep(forTimeInterval: 0.05)
        #expect(!fired.value)
        offset.value = -3_600
        Thread.sleep(forTimeInterval: 0.6)
        let drained = DispatchSemaphore(value: 0)
        loop.execute { drained.signal() }
        drained.wait()
        #expect(fired.value)
    }
}

@Suite("EventLoopGroup")
struct EventLoopGroupTests {
    @Test func nextIsRoundRobinAnyPrefersTheCurrentLoopAndShutdownStopsAll() throws {
        let group = try EventLoopGroup(threads: 3)
        let first = (0..<3).map { _ in group.next() }
        #expect(Set(first.map(ObjectIdentifier.init)).count == 3)
        #expect(group.next() === first[0])
        let onLoop = Box(false)
        let done = DispatchSemaphore(value: 0)
        first[1].execute {
            onLoop.value = group.any() === first[1]
            done.signal()
        }
        done.wait()
        #expect(onLoop.value)
        group.shutdownGracefully()
        #expect(group.loops.allSatisfy { $0.isStopped && $0.closeStatus == 0 })
    }
}

/// Every time operator on a real loop, with generous bounds (no speed is measured).
@Suite("Time operators on LoopScheduler")
struct LoopTimeOperatorTests {
    func events<V, E>(_ producer: SignalProducer<V, E>) -> [Signal<V, E>.Event] { runEvents(producer) }

    @Test func everyTimeOperatorRunsOnTheLoop() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let scheduler = LoopScheduler(loop: loop)
        let values = SignalProducer<Int, Never>([1, 2, 3])

        #expect(events(values.delay(0.02, on: scheduler)).map(\.value) == [1, 2, 3, nil])
        #expect(events(values.observe(on: scheduler)).count == 4)
        #expect(events(values.start(on: scheduler)).count == 4)
        // Values at once on the loop thread (so that the loop cannot run a scheduled action
        // between them), completion 100 ms later, so that the windows can close first. As in
        // ReactiveSwift, throttle sends the latest value when its scheduler gets to it: 3.
        let burst = values.concat(SignalProducer<Int, Never>.empty.delay(0.1, on: scheduler)).start(on: scheduler)
        #expect(events(burst.throttle(0.02, on: scheduler)).compactMap(\.value) == [3])
        #expect(events(burst.debounce(0.02, on: scheduler)).compactMap(\.value) == [3])
        #expect(
            events(burst.collect(every: .milliseconds(20), on: scheduler)).compactMap(\.value).flatMap { $0 }
                == [1, 2, 3])
        let ticks = events(SignalProducer<Date, Never>.timer(interval: .milliseconds(5), on: scheduler).take(first: 3))
        #expect(ticks.count == 4)
        #expect(
            events(SignalProducer<Int, Never>.interval([7, 8], interval: .milliseconds(5), on: scheduler)).map(\.value)
                == [7, 8, nil])
        let timedOut = events(
            SignalProducer<Int, LoopTestError>.never.timeout(after: 0.02, raising: LoopTestError(), on: scheduler))
        #expect(timedOut.first?.error == LoopTestError())
    }

    @Test func timeOperatorsComputeDeadlinesOnTheMonotonicClockNotTheWallClock() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let wallReads = Box(0)
        let scheduler = LoopScheduler(
            loop: loop,
            wallClock: {
                wallReads.modify { $0 += 1 }
                return Date()
            })
        let values = SignalProducer<Int, Never>([1, 2, 3])
        #expect(events(values.delay(0.02, on: scheduler)).map(\.value) == [1, 2, 3, nil])
        #expect(
            events(values.debounce(0.02, on: scheduler, discardWhenCompleted: false)).map(\.value) == [3, nil])
        let timedOut = events(
            SignalProducer<Int, LoopTestError>.never.timeout(after: 0.02, raising: LoopTestError(), on: scheduler))
        #expect(timedOut.first?.error == LoopTestError())
        #expect(wallReads.value == 0)
    }

    @Test func clockActionsRunInDeadlineOrderOnTheLoopAndNeverWhenDisposedOrInfinite() throws {
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let scheduler = LoopScheduler(loop: loop)
        let order = Box<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let now = scheduler._clockNow
        scheduler._schedule(atClock: now + 0.05) {
            order.modify { $0.append("later") }
            done.signal()
        }
        scheduler._schedule(atClock: now + 0.02) { order.modify { $0.append("sooner") } }
        scheduler._schedule(atClock: now - 1) { order.modify { $0.append("past") } }
        scheduler._schedule(atClock: .infinity) { order.modify { $0.append("never") } }
        scheduler._schedule(atClock: now + 0.01) { order.modify { $0.append("disposed") } }?.dispose()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(scheduler._clockNow >= now + 0.05)
        let drained = DispatchSemaphore(value: 0)
        loop.execute { drained.signal() }
        drained.wait()
        #expect(order.value == ["past", "sooner", "later"])
    }
}

/// An error for the runtime tests.
struct LoopTestError: Error, Equatable {}

@Suite("Documentation examples")
struct DocumentationExampleTests {
    /// The example of README.md and docs/EventLoop.md, as written there.
    @Test func readmeEventLoopExampleRunsAndStops() throws {
        let ticks = Box(0)
        let finished = runWithWatchdog(seconds: 10) {
            let loop = try! EventLoop()
            let scheduler = LoopScheduler(loop: loop)
            SignalProducer<Date, Never>.timer(interval: .milliseconds(100), on: scheduler)
                .take(first: 3)
                .on(completed: { loop.stop() })
                .startWithValues { _ in ticks.modify { $0 += 1 } }
            loop.run()  // Returns after stop(), with every handle closed.
            #expect(loop.closeStatus == 0)
        }
        #expect(finished)
        #expect(ticks.value == 3)
    }
}

/// Runs the test host (`Tests/UVTestHost`, built next to the test bundle) with `arguments`;
/// returns its exit status and output, or nil if it did not exit within `seconds`.
func runTestHost(_ arguments: [String], seconds: Double = 60) throws -> (status: Int32, output: String)? {
    let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    let process = try ChildProcess(
        executable: bundle.deletingLastPathComponent().appendingPathComponent("UVTestHost").path,
        arguments: arguments, standardOutput: .captured, standardError: .standardOutput)
    // Killed with SIGKILL when released, if still running.
    guard process.waitForExit(seconds: seconds) else { return nil }
    process.waitForCapturedEnd(seconds: 10)
    return (process.terminationStatus, process.standardOutputText)
}

@Suite("The daemon example of docs/EventLoop.md")
struct DaemonExampleTests {
    @Test func itCountsUDPAndTCPLinesAndStopsOnSIGTERM() throws {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // Started with SIGTERM blocked, as a child of a Dispatch worker thread is: the example
        // must receive it anyway (`signals(_:)` unblocks what it watches).
        let process = try ChildProcess(
            executable: bundle.deletingLastPathComponent().appendingPathComponent("UVTestHost").path,
            arguments: ["daemon-example", "0"], standardOutput: .captured, standardError: .captured,
            blockedSignals: [SIGTERM])
        // The first line names the port.
        let started = try #require(
            process.waitForOutput(containing: "\n"), "the example exited before listening: \(process.standardErrorText)"
        )
        let firstLine = started.prefix { $0 != "\n" }
        let port = try #require(Int(firstLine.dropFirst("listening ".count)))

        // 2 lines over UDP, 3 over TCP (the last one unterminated and dropped, one overlong client).
        let loop = try EventLoop.startOnNewThread()
        defer { loop.stop() }
        let address = try SocketAddress(host: "127.0.0.1", port: port)
        let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
        let sent = DispatchSemaphore(value: 0)
        udp.send(Array("a:1|c\nb:2|c".utf8), to: address) { _ in sent.signal() }
        sent.wait()
        let client = try #require(
            SignalProducer<TCPConnection, UVError>.timeout(TCPConnection.connect(to: address, on: loop))
        ).get()
        let overlong = try #require(
            SignalProducer<TCPConnection, UVError>.timeout(TCPConnection.connect(to: address, on: loop))
        ).get()
        overlong.write([UInt8](repeating: UInt8(ascii: "x"), count: 2000))
        client.write(Array("c:1|c\nd:1|c\ne:1|c\npartial".utf8)) { _ in sent.signal() }
        sent.wait()
        client.close()
        // Give the example time to read what sits in its sockets before the signal (libuv may
        // handle a signal and a readable socket of the same wake-up in either order).
        usleep(500_000)
        kill(process.processIdentifier, SIGTERM)

        try #require(process.waitForExit(seconds: 30), "no exit after SIGTERM: \(process.standardErrorText)")
        #expect(process.waitForCapturedEnd())
        let rest = process.standardOutputText.dropFirst(firstLine.count + 1)
        #expect(process.terminationStatus == 0)
        #expect(rest == "5 lines\ndaemon-example ok\n")
    }
}

@Suite("The Dispatch main queue in a daemon")
struct MainQueueTests {
    @Test func aLoopOnTheMainThreadDrainsTheMainQueueInOrder() throws {
        let result = try #require(try runTestHost(["main-queue"]))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("main-queue ok"))
    }
}

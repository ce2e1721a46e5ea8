import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Synchronization
import Testing
@testable @_spi(Testing) import ReactiveLoopUV

/// An actor whose code runs on a loop thread.
actor LoopCounter {
    let loop: EventLoop
    private(set) var count = 0
    private(set) var ranOnLoop = true

    init(loop: EventLoop) { self.loop = loop }

    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }

    /// Counts one call, noting whether it ran on the loop thread.
    func increment() -> Int {
        ranOnLoop = ranOnLoop && loop.inEventLoop
        count += 1
        return count
    }

    /// Appends `value` to `log`, in the order calls reach the actor.
    func append(_ value: Int, to log: Box<[Int]>) {
        log.modify { $0.append(value) }
    }
}

@Suite("EventLoop as an executor")
struct ExecutorTests {
    @Test func anActorOnTheLoopRunsOnTheLoopThread() async throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let counter = LoopCounter(loop: loop)
        for _ in 0..<100 { _ = await counter.increment() }
        #expect(await counter.count == 100)
        #expect(await counter.ranOnLoop)
    }

    @Test func callsFromOneTaskReachTheActorInOrder() async throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let counter = LoopCounter(loop: loop)
        let log = Box<[Int]>([])
        for value in 0..<500 { await counter.append(value, to: log) }
        #expect(log.value == Array(0..<500))
    }

    @Test func callsFromManyTasksAreSerializedAndNoneIsLost() async throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let counter = LoopCounter(loop: loop)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<250 { _ = await counter.increment() } }
            }
        }
        #expect(await counter.count == 2_000)
        #expect(await counter.ranOnLoop)
    }

    @Test func assumeIsolatedSucceedsInALoopCallback() throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let counter = LoopCounter(loop: loop)
        let result = Box(0)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            result.value = counter.assumeIsolated { $0.increment() }
            done.signal()
        }
        done.wait()
        #expect(result.value == 1)
        #expect(loop.isIsolatingCurrentContext() == false)
    }

    @Test func aTaskPreferringTheLoopRunsItsNonisolatedCodeThere() async throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let onLoop = await Task(executorPreference: loop) { () async -> Bool in
            let before = loop.inEventLoop
            await Task.yield()
            return before && loop.inEventLoop
        }.value
        #expect(onLoop)
    }

    /// Jobs accepted before `stop()` run before the loop shuts down; `run()` returns after them.
    @Test func jobsEnqueuedBeforeStopRunBeforeTheLoopShutsDown() async throws {
        let loop = try EventLoop()
        let counter = LoopCounter(loop: loop)
        let tasks = (0..<50).map { _ in Task { await counter.increment() } }
        // Wait (10 s at most) until every task has enqueued its job; no thread drives the loop.
        for _ in 0..<10_000 where loop.queuedCount < 50 { try await Task.sleep(nanoseconds: 1_000_000) }
        let allQueued = loop.queuedCount == 50
        #expect(allQueued)
        // Stopped first, so that only the queued jobs can keep the loop going; if some job was
        // not queued in time, stop after the tasks instead, so that the test fails, not hangs.
        if allQueued { loop.stop() }
        let driver = Thread { loop.run() }
        driver.start()
        var results: [Int] = []
        for task in tasks { results.append(await task.value) }
        if !allQueued { loop.stop() }
        loop.waitUntilStopped()
        #expect(results.sorted() == Array(1...50))
        #expect(loop.closeStatus == 0)
    }
}

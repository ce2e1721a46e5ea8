import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopUV

@Suite("Ordering and reentrancy on the loop")
struct LoopOrderingTests {
    @Test func valuesFromFourThreadsObservedOnTheLoopKeepEachThreadsOrder() throws {
        let perThread = ProcessInfo.processInfo.environment["CI_SHORT"] == nil ? 50_000 : 5_000
        try withLoop { loop in
            let scheduler = LoopScheduler(loop: loop)
            let (signal, input) = Signal<(thread: Int, index: Int), Never>.pipe()
            let next = Box([Int](repeating: 0, count: 4))
            let wrong = Box(0)
            let done = DispatchSemaphore(value: 0)
            signal.observe(on: scheduler).observeValues { value in
                if !loop.inEventLoop { wrong.modify { $0 += 1 } }
                let inOrder = next.modify { next in
                    defer { next[value.thread] += 1 }
                    return next[value.thread] == value.index
                }
                if !inOrder { wrong.modify { $0 += 1 } }
                if next.value.reduce(0, +) == 4 * perThread { done.signal() }
            }
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for index in 0..<perThread { input.send(value: (thread, index)) }
            }
            #expect(done.wait(timeout: .now() + 60) == .success)
            #expect(wrong.value == 0)
        }
    }

    @Test func aSendIntoTheSignalDeliveringOnTheLoopIsQueuedNotDeadlocked() throws {
        try withLoop { loop in
            let scheduler = LoopScheduler(loop: loop)
            let (signal, input) = Signal<Int, Never>.pipe()
            let seen = Box<[Int]>([])
            let done = DispatchSemaphore(value: 0)
            signal.observeValues { value in
                // On the loop thread, inside the delivery of `value`: send into the same signal.
                if value < 3 { input.send(value: value + 10) }
                seen.modify { $0.append(value) }
                if value == 12 { done.signal() }
            }
            scheduler.schedule {
                input.send(value: 1)
                input.send(value: 2)
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            // Each reentrant send runs after the delivery that made it, before the next send.
            #expect(seen.value == [1, 11, 2, 12])
        }
    }
}

@Suite("Nothing outlives a stopped loop")
struct LoopLeakTests {
    @Test func loopsSchedulersSocketsAndConnectionsAreReleased() throws {
        weak var weakLoop: EventLoop?
        weak var weakScheduler: LoopScheduler?
        weak var weakUDP: UDPSocket?
        weak var weakListener: TCPListener?
        weak var weakServerSide: TCPConnection?
        weak var weakClientSide: TCPConnection?
        let actionReleased = Box(false)
        try {
            let loop = try EventLoop.startOnNewThread()
            let scheduler = LoopScheduler(loop: loop)
            let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            udp.datagrams.start()
            let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let accepted = Box<TCPConnection?>(nil)
            listener.connections.startWithResult { accepted.value = try? $0.get() }
            let client = try #require(
                SignalProducer<TCPConnection, UVError>.timeout(
                    TCPConnection.connect(to: listener.localAddress, on: loop)))
            let clientSide = try client.get()
            clientSide.bytes.start()
            #expect(eventually { accepted.value != nil })
            let tracked = Tracked { actionReleased.value = true }
            scheduler.schedule(after: Date(timeIntervalSinceNow: 3600)) { _ = tracked }
            loop.signals(SIGUSR1).start()
            weakLoop = loop
            weakScheduler = scheduler
            weakUDP = udp
            weakListener = listener
            weakServerSide = accepted.value
            weakClientSide = clientSide
            accepted.value = nil
            loop.stop()
            loop.waitUntilStopped()
            #expect(loop.closeStatus == 0)
        }()
        #expect(eventually { weakLoop == nil })
        #expect(weakScheduler == nil)
        #expect(actionReleased.value)
        #expect(weakUDP == nil)
        #expect(weakListener == nil)
        #expect(weakServerSide == nil)
        #expect(weakClientSide == nil)
    }
}

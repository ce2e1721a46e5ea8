import CLibUV
import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopUV

/// What a producer run sent, recorded from the loop thread.
final class Recorder<Value, Failure: Error>: @unchecked Sendable {
    let values = Box<[Value]>([])
    let ending = Box<String?>(nil)
    let error = Box<Failure?>(nil)
    let offLoop = Box(false)

    func observer(_ loop: EventLoop) -> Signal<Value, Failure>.Observer {
        Signal.Observer { [self] event in
            if !loop.inEventLoop { offLoop.value = true }
            switch event {
            case let .value(value): values.modify { $0.append(value) }
            case let .failed(failure):
                error.value = failure
                ending.value = "failed"
            case .completed: ending.value = "completed"
            case .interrupted: ending.value = "interrupted"
            }
        }
    }
}

/// A weak reference, to see an object go.
struct Weak<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object?) { self.object = object }
}

/// Runs `body` with a loop on its own thread, then stops it and checks that it closed everything.
func withLoop(_ body: (EventLoop) throws -> Void) throws {
    let loop = try EventLoop.startOnNewThread()
    defer {
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0)
    }
    try body(loop)
}

/// Starts `producer` and waits (up to `seconds`) for its terminal event: the events it sent.
func runEvents<V, E>(_ producer: SignalProducer<V, E>, seconds: Double = 10) -> [Signal<V, E>.Event] {
    let events = Box<[Signal<V, E>.Event]>([])
    let done = DispatchSemaphore(value: 0)
    producer.start { event in
        events.modify { $0.append(event) }
        if event.isTerminating { done.signal() }
    }
    _ = done.wait(timeout: .now() + seconds)
    return events.value
}

@Suite("Signals on the loop")
struct SignalTests {
    @Test func aSignalRaisedInTheProcessArrivesOnTheLoopThread() throws {
        try withLoop { loop in
            let recorder = Recorder<Int32, Never>()
            let run = loop.signals(SIGUSR1, SIGUSR2).start(recorder.observer(loop))
            // The handlers are installed on the loop thread; wait for that before raising.
            let installed = DispatchSemaphore(value: 0)
            loop.execute { installed.signal() }
            installed.wait()
            // To the process (`raise` would target this thread, where Dispatch blocks signals).
            kill(getpid(), SIGUSR2)
            #expect(eventually { recorder.values.value.count == 1 })
            kill(getpid(), SIGUSR1)
            #expect(eventually { recorder.values.value.count == 2 })
            #expect(Set(recorder.values.value) == [SIGUSR1, SIGUSR2])
            #expect(!recorder.offLoop.value)
            run.dispose()
        }
    }

    @Test func stoppingTheLoopInterruptsASignalsRun() throws {
        let loop = try EventLoop.startOnNewThread()
        let recorder = Recorder<Int32, Never>()
        loop.signals(SIGUSR1).start(recorder.observer(loop))
        loop.stop()
        loop.waitUntilStopped()
        #expect(recorder.ending.value == "interrupted")
        #expect(loop.closeStatus == 0)
        // Started on a stopped loop: interrupted at once.
        let late = Recorder<Int32, Never>()
        loop.signals(SIGUSR1).start(late.observer(loop))
        #expect(late.ending.value == "interrupted")
    }
}

@Suite("UDP on the loop")
struct UDPTests {
    /// Runs `body` on `loop`'s thread and returns what it returns.
    func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) -> T? {
        let result = Box<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute {
            result.value = body()
            done.signal()
        }
        _ = done.wait(timeout: .now() + 10)
        return result.value
    }

    @Test func drainReadsWhatTheKernelHoldsAndTheDropsAreCounted() throws {
        try withLoop { loop in
            // The smallest buffer the kernel grants holds a few datagrams: the rest are dropped.
            let socket = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, receiveBufferSize: 1)
            #expect(onLoop(loop) { socket.kernelDrops } == 0)
            sendRawDatagrams(to: socket.localAddress.port, count: 500)
            let drained = onLoop(loop) { () -> [String] in
                var seen: [String] = []
                _ = socket.drain { bytes, truncated in
                    seen.append(String(decoding: bytes, as: UTF8.self) + "\(truncated)")
                }
                return seen
            }
            let kept = try #require(drained)
            #expect(!kept.isEmpty && kept.allSatisfy { $0 == "xfalse" })
            let drops = try #require(onLoop(loop) { socket.kernelDrops })
            #expect(drops == UInt64(500 - kept.count), "every datagram is either read or counted as dropped")
            #expect(onLoop(loop) { socket.drain { _, _ in } } == 0, "nothing left")
            // A limit: no more than asked.
            sendRawDatagrams(to: socket.localAddress.port, count: 3)
            #expect(onLoop(loop) { socket.drain(limit: 2) { _, _ in } } == 2)
            socket.close()
            #expect(onLoop(loop) { socket.kernelDrops.map { _ in "open" } ?? "closed" } == "closed")
            #expect(onLoop(loop) { socket.drain { _, _ in } } == 0)
        }
    }

    @Test func socketsBoundWithReusePortShareTheDatagramsOfTheirAddress() throws {
        try withLoop { loop in
            let first = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, reusePort: true)
            let second = try UDPSocket(boundTo: first.localAddress, on: loop, reusePort: true)
            #expect(second.localAddress == first.localAddress)
            #expect(throws: UVError.self, "a socket without the option cannot join") {
                try UDPSocket(boundTo: first.localAddress, on: loop)
            }
            // 40 senders (each its own port, which the kernel hashes), 5 datagrams each.
            for _ in 0..<40 { sendRawDatagrams(to: first.localAddress.port, count: 5) }
            let counts = onLoop(loop) { (first.drain { _, _ in }, second.drain { _, _ in }) }
            let (a, b) = try #require(counts)
            #expect(a + b == 200, "every datagram read once, by one of them")
            #expect(a > 0 && b > 0, "spread over both: \(a) and \(b)")
        }
    }

    @Test(arguments: ["127.0.0.1", "::1"])
    func datagramsRoundTripWithTheirSender(host: String) throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: host, port: 0), on: loop, receiveBufferSize: 1 << 20)
            let client = try UDPSocket(boundTo: SocketAddress(host: host, port: 0), on: loop)
            #expect(server.localAddress.port != 0)
            #expect(server.localAddress.family == (host == "::1" ? .ipv6 : .ipv4))
            #expect(server.isBatchingReceives)
            #expect(server.receiveBufferSize >= 1 << 20)

            // Sent before anyone reads: they wait in the socket's buffer, none is lost.
            let sent = Box(0)
            for index in 0..<10 {
                client.send(Array("datagram \(index)".utf8), to: server.localAddress) { error in
                    if error == nil { sent.modify { $0 += 1 } }
                }
            }
            #expect(eventually { sent.value == 10 })
            let recorder = Recorder<Datagram, UVError>()
            let run = server.datagrams.start(recorder.observer(loop))
            #expect(eventually { recorder.values.value.count == 10 })
            let received = recorder.values.value
            #expect(received.map(\.bytes.description) == (0..<10).map { "datagram \($0)" })
            #expect(received.allSatisfy { $0.sender == client.localAddress && !$0.isTruncated })
            // One recvmmsg batch, one buffer, no copy per datagram.
            #expect(received.allSatisfy { $0.bytes.storage === received[0].bytes.storage })
            #expect(!recorder.offLoop.value)

            // Reading stops with the run: a second run starts where the first stopped.
            run.dispose()
            let again = Recorder<Datagram, UVError>()
            server.datagrams.start(again.observer(loop))
            client.send(Array("after".utf8), to: server.localAddress)
            #expect(eventually { again.values.value.map(\.bytes.description) == ["after"] })

            server.close()
            #expect(eventually { again.ending.value == "completed" })
        }
    }

    @Test func aQuietSocketOffersFewSlotsPerReadAndABurstAllOfThem() throws {
        try withLoop { loop in
            let server = try batchingSocket(on: loop)
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            #expect(onLoop(loop) { server.offeredSlots } == 20)
            // One at a time: each read fills one slot, and the next offers the fewest, 4.
            for index in 0..<3 {
                sendRawDatagrams(to: port, count: 1)
                #expect(eventually { recorder.values.value.count == index + 1 })
                #expect(onLoop(loop) { server.offeredSlots } == 4)
            }
            // 64 waiting at once, the loop held until all are sent: a read of 4 fills its
            // slots, then reads of 20 (libuv ends a wake-up after 32 datagrams, so 44, then 20).
            whileHolding(loop) { sendRawDatagrams(to: port, count: 64) }
            #expect(eventually { recorder.values.value.count == 67 })
            let burst = recorder.values.value.dropFirst(3)
            // Each read's datagrams sit in its buffer's slots from the first, 64 KiB apart.
            let slots = burst.map { $0.bytes.startIndex / UDPSocket.slot }
            #expect(slots == Array(0..<4) + Array(0..<20) + Array(0..<20) + Array(0..<20), "\(slots)")
            #expect(burst.allSatisfy { $0.bytes.description == "x" })
            #expect(onLoop(loop) { server.offeredSlots } == 20)
        }
    }

    @Test func aBatchThatEmptiesTheSocketEndsItsReadsAndWhatCameMeanwhileIsReadNext() throws {
        try withLoop { loop in
            let server = try batchingSocket(on: loop)
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            // "second" is sent from the callback of "first", before the batch that read "first"
            // ends: that batch filled 1 slot of 20 and ended the reads, and "second" stays
            // waiting in the socket until the loop finds it readable again.
            server.datagrams
                .on(value: { datagram in
                    if datagram.bytes.description == "first" { self.send(["second"], to: port) }
                })
                .start(recorder.observer(loop))
            send(["first"], to: port)
            #expect(eventually { recorder.values.value.count == 2 })
            #expect(recorder.values.value.map(\.bytes.description) == ["first", "second"])
            // One call each: none that finds the socket empty.
            #expect(onLoop(loop) { server.reads } == 2)
            for index in 0..<3 {
                sendRawDatagrams(to: port, count: 1)
                #expect(eventually { recorder.values.value.count == index + 3 })
                #expect(onLoop(loop) { server.reads } == index + 3)
            }
            #expect(recorder.ending.value == nil)
            #expect(onLoop(loop) { server.declinedReads } == 5)
        }
    }

    @Test func aWakeUpThatEndsOnLibuvsBudgetLeavesTheNextOneItsFirstRead() throws {
        try withLoop { loop in
            let server = try batchingSocket(on: loop)
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            // 32 waiting at once: a full batch of 20, then 12 of 20, which is short but ends
            // the wake-up on libuv's budget of 32, so nothing is declined.
            whileHolding(loop) { sendRawDatagrams(to: port, count: UDPSocket.readsPerWakeUp) }
            #expect(eventually { recorder.values.value.count == UDPSocket.readsPerWakeUp })
            #expect(onLoop(loop) { "\(server.reads) reads, \(server.declinedReads) declined" } == "2 reads, 0 declined")
            // The next datagram's wake-up reads it at once (a decline left over from the last
            // wake-up would end this one before any read), then declines the read after it.
            sendRawDatagrams(to: port, count: 1)
            #expect(eventually { recorder.values.value.count == UDPSocket.readsPerWakeUp + 1 })
            #expect(onLoop(loop) { "\(server.reads) reads, \(server.declinedReads) declined" } == "3 reads, 1 declined")
        }
    }

    @Test func aShortBatchThatEndsTheWakeUpOnLibuvsBudgetTellsThePacerTheSocketIsEmpty() throws {
        try withLoop { loop in
            let server = try batchingSocket(on: loop, readPause: .milliseconds(200))
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            let budget = UDPSocket.readsPerWakeUp
            // Twice 32 at once, each read as 20, then 12 of 20, the end of its wake-up: the
            // first empty socket opens the pacer's first window, the second counts into it.
            for round in 1...2 {
                whileHolding(loop) { sendRawDatagrams(to: port, count: budget) }
                #expect(eventually { recorder.values.value.count == round * budget })
            }
            // 300 ms on, one more: the window (200 ms or more) ends with 33 datagrams, more
            // than 8 per 200 ms until 825 ms, so reading pauses. Had the window not opened at
            // the first 32, this empty socket would open it, and no pause would start.
            usleep(300_000)
            sendRawDatagrams(to: port, count: 1)
            #expect(eventually { recorder.values.value.count == 2 * budget + 1 })
            #expect(onLoop(loop) { server.readPauses } == 1)
        }
    }

    @Test func aRunStartedInsideTheLastRunsCallbackTakesTheRestOfItsBatch() throws {
        try withLoop { loop in
            let server = try batchingSocket(on: loop)
            let port = server.localAddress.port
            let second = Recorder<Datagram, UVError>()
            let firstRun = Box<(any Disposable)?>(nil)
            let firstValues = Box(0)
            // 25 waiting: the first run takes one, and is disposed in its callback, where a
            // second run starts. libuv delivers the other 19 of that batch of 20 to it, then
            // reads on in the same wake-up: 5 of 20, and the read after them is declined.
            whileHolding(loop) {
                firstRun.value = server.datagrams.start(
                    Signal<Datagram, UVError>.Observer(value: { _ in
                        firstValues.modify { $0 += 1 }
                        firstRun.value?.dispose()
                        server.datagrams.start(second.observer(loop))
                    }))
                sendRawDatagrams(to: port, count: 25)
            }
            #expect(eventually { second.values.value.count == 24 })
            #expect(firstValues.value == 1)
            #expect(onLoop(loop) { "\(server.reads) reads, \(server.declinedReads) declined" } == "2 reads, 1 declined")
            #expect(second.ending.value == nil)
        }
    }

    /// A socket on 127.0.0.1 that reads with `recvmmsg`, with a receive buffer of 1 MiB.
    private func batchingSocket(on loop: EventLoop, readPause: Duration? = nil) throws -> UDPSocket {
        let socket = try UDPSocket(
            boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, receiveBufferSize: 1 << 20,
            readPause: readPause)
        try #require(socket.isBatchingReceives)
        return socket
    }

    /// Runs `body` while `loop`'s thread is held in a callback, so that what `body` sends
    /// waits for the loop's next wake-up.
    private func whileHolding(_ loop: EventLoop, _ body: () -> Void) {
        let holding = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        loop.execute {
            holding.signal()
            held.wait()
        }
        holding.wait()
        body()
        held.signal()
    }

    /// Sends `payloads` from one socket to `port` on 127.0.0.1.
    private func send(_ payloads: [String], to port: Int) {
        let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        for payload in payloads {
            _ = withLoopbackAddress(port: port) { sendto(sender, payload, payload.utf8.count, 0, $0, $1) }
        }
        Glibc.close(sender)
    }

    /// Sends bursts of 10 datagrams ("p") to `server`, each once the last was read (`received`
    /// counts what was), until its reading is paused (for at most 20 s); whether it is.
    private func sendUntilPaused(_ server: UDPSocket, _ loop: EventLoop, received: () -> Int) -> Bool {
        let deadline = Date(timeIntervalSinceNow: 20)
        while Date() < deadline {
            let expected = received() + 10
            send(Array(repeating: "p", count: 10), to: server.localAddress.port)
            guard eventually({ received() >= expected || onLoop(loop) { server.isPaused } == true }) else {
                return false
            }
            if onLoop(loop) { server.isPaused } == true { return true }
        }
        return false
    }

    private func sendUntilPaused(_ server: UDPSocket, _ recorder: Recorder<Datagram, UVError>, _ loop: EventLoop)
        -> Bool
    {
        sendUntilPaused(server, loop) { recorder.values.value.count }
    }

    /// A receiving run that records each datagram's payload and the monotonic time it came.
    private final class TimedRecorder: @unchecked Sendable {
        let received = Box<[(payload: String, at: UInt64)]>([])
        let ending = Box<String?>(nil)

        func start(_ server: UDPSocket) -> any Disposable {
            server.datagrams.start { [self] event in
                switch event {
                case let .value(datagram):
                    received.modify { $0.append((datagram.bytes.description, _WallClockMapping.monotonicNow)) }
                case .completed: ending.value = "completed"
                case .interrupted: ending.value = "interrupted"
                case .failed: ending.value = "failed"
                }
            }
        }
    }

    @Test func aFastStreamPausesTheReadsAndEveryDatagramArrivesInOrder() throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, receiveBufferSize: 4 << 20,
                readPause: .milliseconds(20))
            #expect(server.readPause == .milliseconds(20))
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            // Bursts of 10, each sent once the last has been read: at most 10 wait in the kernel.
            for burst in 0..<50 {
                send((0..<10).map { "\(burst * 10 + $0)" }, to: server.localAddress.port)
                try #require(eventually { recorder.values.value.count == (burst + 1) * 10 })
            }
            #expect(recorder.values.value.map(\.bytes.description) == (0..<500).map { "\($0)" })
            #expect(try #require(onLoop(loop) { server.readPauses }) > 0)
            #expect(onLoop(loop) { server.kernelDrops } == 0)
            #expect(recorder.ending.value == nil)
        }
    }

    @Test func whatComesDuringAPauseIsReadWhenItEnds() throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, readPause: .milliseconds(300))
            let recorder = TimedRecorder()
            _ = recorder.start(server)
            #expect(sendUntilPaused(server, loop) { recorder.received.value.count })
            let pauseEnd = try #require(onLoop(loop) { server.pauseEndsAt ?? 0 })
            #expect(pauseEnd > 0)
            send(["during"], to: server.localAddress.port)
            #expect(eventually { recorder.received.value.last?.payload == "during" })
            // Read no earlier than the pause's end (the timer never fires early).
            #expect(try #require(recorder.received.value.last?.at) >= pauseEnd)
            #expect(recorder.ending.value == nil)
        }
    }

    @Test func aPauseThatLeavesTheBufferAQuarterFullHalvesTheNext() throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, receiveBufferSize: 256 << 10,
                readPause: .seconds(1))
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            // While paused, on the loop thread (the pause cannot end meanwhile): kilobyte
            // datagrams until the kernel's queue holds a quarter of the buffer.
            var filled = false
            for _ in 0..<20 where !filled {
                try #require(sendUntilPaused(server, recorder, loop))
                filled =
                    onLoop(loop) { () -> Bool in
                        guard server.isPaused else { return false }
                        let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
                        defer { Glibc.close(sender) }
                        let payload = [UInt8](repeating: UInt8(ascii: "k"), count: 1000)
                        for _ in 0..<1000 {
                            guard let (queued, limit) = socketMemory(of: server.fileDescriptor) else { return false }
                            if queued >= limit / 4 { return true }
                            _ = withLoopbackAddress(port: port) { sendto(sender, payload, payload.count, 0, $0, $1) }
                        }
                        return false
                    } ?? false
            }
            try #require(filled)
            #expect(onLoop(loop) { server.pacer.current } == 1_000_000_000)
            // Its end finds the queue a quarter full: the next pause (taken once what came is
            // read) is half as long, until one leaves the queue near empty.
            #expect(eventually { onLoop(loop) { server.pacer.current } == 500_000_000 })
            // A pause has to end for the pacer to change, and reading pauses only while
            // datagrams come fast enough (judged over windows; a slow run, as under a
            // sanitizer, can leave the window of the filling above too long): a datagram
            // every 50 ms keeps it pausing, and leaves each pause's end near empty.
            let poke = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            defer { Glibc.close(poke) }
            #expect(
                eventually(pollingEvery: 0.05) {
                    if onLoop(loop, { server.pacer.current }) == 1_000_000_000 { return true }
                    _ = withLoopbackAddress(port: port) { sendto(poke, [UInt8(ascii: "p")], 1, 0, $0, $1) }
                    return false
                })
            #expect(recorder.ending.value == nil)
        }
    }

    @Test func aRunDisposedDuringAPauseLeavesWhatCameToDrainAndReadsNoMore() throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, readPause: .milliseconds(300))
            let recorder = TimedRecorder()
            let run = Box(recorder.start(server))
            let port = server.localAddress.port
            // On the loop thread, while paused: datagrams come, the run is disposed, the socket
            // drained (loopd's shutdown). A pause that ended before the block ran is retried.
            var outcome: (pausedAfterDispose: Bool, drained: [String])?
            for _ in 0..<20 where outcome == nil {
                try #require(sendUntilPaused(server, loop) { recorder.received.value.count })
                outcome =
                    onLoop(loop) { () -> (Bool, [String])? in
                        guard server.isPaused else { return nil }
                        let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
                        for payload in ["d1", "d2", "d3"] {
                            _ = withLoopbackAddress(port: port) { sendto(sender, payload, 2, 0, $0, $1) }
                        }
                        Glibc.close(sender)
                        run.value.dispose()
                        let paused = server.isPaused
                        var payloads: [String] = []
                        _ = server.drain { bytes, _ in payloads.append(String(decoding: bytes, as: UTF8.self)) }
                        return (paused, payloads)
                    } ?? nil
            }
            let (pausedAfterDispose, drained) = try #require(outcome)
            #expect(!pausedAfterDispose, "disposing the run ends the pause")
            #expect(drained.suffix(3) == ["d1", "d2", "d3"], "\(drained)")
            #expect(eventually { recorder.ending.value == "interrupted" })
            // Past the pause's end: nothing read for the disposed run, nothing left behind.
            let count = recorder.received.value.count
            Thread.sleep(forTimeInterval: 0.4)
            #expect(recorder.received.value.count == count)
            #expect(recorder.received.value.allSatisfy { $0.payload == "p" })
            #expect(onLoop(loop) { server.drain { _, _ in } } == 0)
        }
    }

    @Test func aRunStartedDuringThePauseOfADisposedOneKeepsReadingPastItsEnd() throws {
        try withLoop { loop in
            let server = try UDPSocket(
                boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, readPause: .milliseconds(300))
            let port = server.localAddress.port
            let recorder = Recorder<Datagram, UVError>()
            let run = server.datagrams.start(recorder.observer(loop))
            #expect(sendUntilPaused(server, recorder, loop))
            run.dispose()
            #expect(eventually { recorder.ending.value == "interrupted" })
            // A new run, during the old run's pause (disposing it cancelled the pause).
            #expect(onLoop(loop) { server.isPaused } == false)
            let again = Recorder<Datagram, UVError>()
            server.datagrams.start(again.observer(loop))
            send(["c"], to: port)
            #expect(eventually { again.values.value.contains { $0.bytes.description == "c" } })
            // Past the end of the old pause, which must not touch the new run (reading started
            // twice would fail it with EALREADY).
            Thread.sleep(forTimeInterval: 0.5)
            #expect(again.ending.value == nil)
            send(["d"], to: port)
            #expect(eventually { again.values.value.last?.bytes.description == "d" })
        }
    }

    @Test(arguments: ["close", "stop"])
    func closingTheSocketOrStoppingTheLoopDuringAPauseEndsTheRunAndTheTimer(_ how: String) throws {
        let loop = try EventLoop.startOnNewThread()
        let server = try UDPSocket(
            boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop, readPause: .seconds(1))
        let recorder = Recorder<Datagram, UVError>()
        server.datagrams.start(recorder.observer(loop))
        #expect(sendUntilPaused(server, recorder, loop))
        let timers = Box<Weak<_LoopTimers>>(Weak(nil))
        _ = onLoop(loop) { timers.value = Weak(server.pauseTimers) }
        #expect(timers.value.object != nil)
        let count = recorder.values.value.count
        if how == "close" {
            server.close()
            #expect(eventually { recorder.ending.value == "completed" })
            // The pause's timer closes with the socket, not at the loop's end.
            #expect(eventually { timers.value.object == nil })
            Thread.sleep(forTimeInterval: 1.2)
            #expect(recorder.values.value.count == count)
        }
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0, "every handle closed, the pause's timer too")
        #expect(recorder.ending.value == (how == "close" ? "completed" : "interrupted"))
        #expect(timers.value.object == nil)
    }

    @Test func theReadPauseCanBeSetAndClearedWhileReading() throws {
        try withLoop { loop in
            let server = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            #expect(server.readPause == nil)
            let recorder = Recorder<Datagram, UVError>()
            server.datagrams.start(recorder.observer(loop))
            send(["a"], to: server.localAddress.port)
            #expect(eventually { recorder.values.value.count == 1 })
            server.readPause = .milliseconds(300)
            #expect(server.readPause == .milliseconds(300))
            #expect(sendUntilPaused(server, recorder, loop))
            // Cleared during a pause: that pause ends as it was set, and no other starts.
            server.readPause = nil
            #expect(eventually { onLoop(loop) { server.isPaused } == false })
            let pauses = onLoop(loop) { server.readPauses }
            for burst in 0..<20 {
                // At least: what the pause held back may still be coming in.
                let expected = recorder.values.value.count + 10
                send(Array(repeating: "q\(burst)", count: 10), to: server.localAddress.port)
                try #require(eventually { recorder.values.value.count >= expected })
            }
            #expect(onLoop(loop) { server.readPauses } == pauses)
        }
    }

    @Test func aReadPauseOutOfRangeNamesTheAPIArgumentAndValue() async {
        let prefix = "readPause must be at least 1 nanosecond and at most 1 second, got "
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: EventLoop(), readPause: .zero)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("UDPSocket(boundTo:on:readPause:): " + prefix + "0.0 seconds"))
        }
        await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let socket = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: EventLoop())
            socket.readPause = .milliseconds(1001)
        }.map { result in
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("UDPSocket.readPause: " + prefix + "1.001 seconds"))
        }
    }

    @Test func theReceiveBufferIsReusedOnceNoDatagramViewsIt() throws {
        try withLoop { loop in
            let socket = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let buffers = Box<[ObjectIdentifier]>([])
            let kept = Box<[Datagram]>([])
            socket.datagrams.startWithResult { result in
                guard case let .success(datagram) = result else { return }
                buffers.modify { $0.append(ObjectIdentifier(datagram.bytes.storage)) }
                if datagram.bytes.first == UInt8(ascii: "k") { kept.modify { $0.append(datagram) } }
            }
            for (index, payload) in ["drop", "drop", "keep", "after"].enumerated() {
                socket.send(Array(payload.utf8), to: socket.localAddress)
                #expect(eventually { buffers.value.count == index + 1 })
            }
            let ids = buffers.value
            // Nothing kept the first two: one buffer. The third is kept, so the fourth needs another.
            #expect(ids[0] == ids[1] && ids[1] == ids[2])
            #expect(ids[3] != ids[2])
            #expect(kept.value.first?.bytes.description == "keep")
        }
    }

    @Test func aSecondConcurrentRunFailsAndTheFirstKeepsReceiving() throws {
        try withLoop { loop in
            let server = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let first = Recorder<Datagram, UVError>()
            let second = Recorder<Datagram, UVError>()
            server.datagrams.start(first.observer(loop))
            server.datagrams.start(second.observer(loop))
            #expect(eventually { second.ending.value == "failed" })
            #expect(second.error.value?.name == "EALREADY")
            server.send(Array("self".utf8), to: server.localAddress)
            #expect(eventually { first.values.value.count == 1 })
        }
    }

    @Test func bindingAnAddressInUseThrowsANamedError() throws {
        try withLoop { loop in
            let first = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            #expect {
                try UDPSocket(boundTo: first.localAddress, on: loop)
            } throws: { error in
                let error = error as? UVError
                return error?.name == "EADDRINUSE" && error?.description.contains("\(first.localAddress)") == true
            }
        }
    }

    @Test func aStoppedLoopRejectsSocketsSendsAndReads() throws {
        let loop = try EventLoop.startOnNewThread()
        let socket = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
        let reading = Recorder<Datagram, UVError>()
        socket.datagrams.start(reading.observer(loop))
        #expect(eventually { loop.execute {} })
        loop.stop()
        loop.waitUntilStopped()
        #expect(reading.ending.value == "interrupted")
        #expect(loop.closeStatus == 0)
        #expect(throws: UVError.loopStopped) { try UDPSocket(boundTo: socket.localAddress, on: loop) }
        let outcome = Box<UVError?>(nil)
        socket.send([1], to: socket.localAddress) { outcome.value = $0 }
        #expect(outcome.value == .loopStopped)
        let late = Recorder<Datagram, UVError>()
        socket.datagrams.start(late.observer(loop))
        #expect(late.ending.value == "interrupted")
    }

    @Test func socketAddressesParseAndPrint() throws {
        #expect(try SocketAddress(host: "127.0.0.1", port: 8125).description == "127.0.0.1:8125")
        #expect(try SocketAddress(host: "::1", port: 53).description == "[::1]:53")
        #expect(try SocketAddress(host: "::1", port: 53) == SocketAddress(host: "0:0::1", port: 53))
        #expect {
            try SocketAddress(host: "localhost", port: 1)
        } throws: { error in
            (error as? UVError)?.description.contains("SocketAddress(host: \"localhost\", port: 1)") == true
        }
    }
}

@Suite("TCP on the loop")
struct TCPTests {
    /// A listener on loopback whose accepted connections' lines are recorded, one recorder per
    /// connection, in accept order.
    final class LineServer: @unchecked Sendable {
        let listener: TCPListener
        let connections = Box<[TCPConnection]>([])
        let lines = Box<[Recorder<String, UVError>]>([])

        init(loop: EventLoop, maxLength: Int = 64) throws {
            listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            listener.connections.startWithResult { [self] result in
                guard case let .success(connection) = result else { return }
                let recorder = Recorder<String, UVError>()
                connections.modify { $0.append(connection) }
                lines.modify { $0.append(recorder) }
                connection.lines(maxLength: maxLength).start(recorder.observer(loop))
            }
        }
    }

    static func connect(_ loop: EventLoop, _ address: SocketAddress) throws -> TCPConnection {
        let result = try #require(
            SignalProducer<TCPConnection, UVError>.timeout(TCPConnection.connect(to: address, on: loop)))
        return try result.get()
    }

    @Test func linesRoundTripAndThePeerClosingCompletes() throws {
        try withLoop { loop in
            let server = try LineServer(loop: loop)
            let client = try Self.connect(loop, server.listener.localAddress)
            #expect(client.remoteAddress == server.listener.localAddress)
            let replies = Recorder<ReceivedBytes, UVError>()
            client.bytes.start(replies.observer(loop))
            let written = Box(0)
            for piece in ["one\ntw", "o\r\n", "\nthr", "ee\n"] {
                client.write(Array(piece.utf8)) { if $0 == nil { written.modify { $0 += 1 } } }
            }
            #expect(eventually { written.value == 4 })
            #expect(eventually { server.lines.value.first?.values.value.count == 4 })
            let lines = try #require(server.lines.value.first)
            #expect(lines.values.value == ["one", "two", "", "three"])
            #expect(!lines.offLoop.value)

            let accepted = try #require(server.connections.value.first)
            #expect(accepted.remoteAddress == client.localAddress)
            accepted.write(Array("ok\n".utf8))
            #expect(eventually { replies.values.value.map(\.description).joined() == "ok\n" })

            client.close()
            #expect(eventually { lines.ending.value == "completed" })
            #expect(eventually { replies.ending.value == "completed" })
        }
    }

    @Test func aPeerThatDisconnectsMidLineLosesOnlyTheUnfinishedLine() throws {
        try withLoop { loop in
            let server = try LineServer(loop: loop)
            let client = try Self.connect(loop, server.listener.localAddress)
            client.write(Array("whole\npart".utf8))
            client.close()
            #expect(eventually { server.lines.value.first?.ending.value == "completed" })
            #expect(server.lines.value.first?.values.value == ["whole"])
        }
    }

    @Test func anOverlongLineFailsThatConnectionOnly() throws {
        try withLoop { loop in
            let server = try LineServer(loop: loop, maxLength: 8)
            let good = try Self.connect(loop, server.listener.localAddress)
            #expect(eventually { server.lines.value.count == 1 })
            let bad = try Self.connect(loop, server.listener.localAddress)
            #expect(eventually { server.lines.value.count == 2 })
            // Exactly the limit passes, with or without `\r`. Two bytes more (one more could
            // still be a `\r`) fail at once, before any newline: memory stays bounded.
            good.write(Array("12345678\n12345678\r\n".utf8))
            bad.write(Array("1234567890".utf8))
            let badLines = server.lines.value[1]
            #expect(eventually { badLines.ending.value == "failed" })
            #expect(badLines.error.value?.name == "EMSGSIZE")
            #expect(badLines.error.value?.description.contains("lines(maxLength: 8)") == true)
            good.write(Array("after\n".utf8))
            let goodLines = server.lines.value[0]
            #expect(eventually { goodLines.values.value == ["12345678", "12345678", "after"] })
            #expect(goodLines.ending.value == nil)
            bad.close()
        }
    }

    @Test func connectingToAClosedPortFailsWithTheReason() throws {
        try withLoop { loop in
            // Bind a port, then close it: nothing listens there.
            let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let address = listener.localAddress
            listener.close()
            let result = try #require(
                SignalProducer<TCPConnection, UVError>.timeout(TCPConnection.connect(to: address, on: loop)))
            #expect(throws: UVError.self) { try result.get() }
            if case let .failure(error) = result { #expect(error.name == "ECONNREFUSED") }
        }
    }

    @Test func listeningOnAPortInUseThrowsANamedError() throws {
        try withLoop { loop in
            let first = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            #expect {
                try TCPListener(boundTo: first.localAddress, on: loop)
            } throws: { error in
                (error as? UVError)?.name == "EADDRINUSE"
            }
        }
    }

    @Test func connectionsWaitInTheBacklogUntilTheListenerIsStarted() throws {
        try withLoop { loop in
            let listener = try TCPListener(boundTo: SocketAddress(host: "::1", port: 0), on: loop)
            let client = try Self.connect(loop, listener.localAddress)
            let accepted = Recorder<TCPConnection, UVError>()
            listener.connections.start(accepted.observer(loop))
            #expect(eventually { accepted.values.value.count == 1 })
            #expect(accepted.values.value.first?.remoteAddress == client.localAddress)
        }
    }

    @Test func stoppingTheLoopInterruptsReadsAndClosesEveryHandle() throws {
        let loop = try EventLoop.startOnNewThread()
        let server = try LineServer(loop: loop)
        _ = try Self.connect(loop, server.listener.localAddress)
        #expect(eventually { server.lines.value.count == 1 })
        loop.stop()
        loop.waitUntilStopped()
        #expect(server.lines.value.first?.ending.value == "interrupted")
        #expect(loop.closeStatus == 0)
    }
}

@Suite("Lines")
struct LineFramingTests {
    @Test func linesAcrossChunksBoundariesAndEndings() {
        var framer = _LineFramer(maxLength: 5)
        var lines: [String] = []
        for chunk in ["ab", "c\nde", "\r", "\n\n", "x"] {
            #expect(framer.feed(ReceivedBytes(Array(chunk.utf8))) { lines.append($0.description) })
        }
        #expect(lines == ["abc", "de", ""])
        // The pending "x" plus 6 more bytes without a newline is too long (5 bytes and a `\r`
        // at most could still end well).
        #expect(framer.feed(ReceivedBytes(Array("1234".utf8))) { lines.append($0.description) })
        #expect(!framer.feed(ReceivedBytes(Array("5\r".utf8))) { lines.append($0.description) })
    }

    @Test func anUnterminatedTailIsHandedOverWhenTheStreamEnds() {
        func tails(_ chunks: [String], ending: Signal<ReceivedBytes, UVError>.Event) -> (
            lines: [String], tails: [String]
        ) {
            var lines: [String] = []
            var tails: [String] = []
            let (input, observer) = Signal<ReceivedBytes, UVError>.pipe()
            SignalProducer(input).lineBytes(maxLength: 16) { tails.append($0.description) }
                .startWithResult { if case let .success(line) = $0 { lines.append(line.description) } }
            for chunk in chunks { observer.send(value: ReceivedBytes(Array(chunk.utf8))) }
            observer.send(ending)
            return (lines, tails)
        }
        let reset = UVError(code: -104, operation: "read")
        #expect(tails(["a:1|c\nb:", "2|c"], ending: .completed) == (["a:1|c"], ["b:2|c"]))
        #expect(tails(["a:1|c\nb:2\r"], ending: .failed(reset)) == (["a:1|c"], ["b:2\r"]))
        #expect(tails(["a:1|c\n"], ending: .completed) == (["a:1|c"], []), "no tail, no call")
        #expect(tails(["a:1|c\nb"], ending: .interrupted) == (["a:1|c"], []), "interrupted: not a peer's close")
        #expect(tails(["0123456789abcdefXYZ"], ending: .completed) == ([], []), "failed as too long already")
    }

    @Test func aLineInOneChunkIsASliceOfIt() {
        var framer = _LineFramer(maxLength: 16)
        let chunk = ReceivedBytes(Array("first\nsecond\n".utf8))
        var lines: [ReceivedBytes] = []
        #expect(framer.feed(chunk) { lines.append($0) })
        #expect(lines.map(\.description) == ["first", "second"])
        #expect(lines.allSatisfy { $0.storage === chunk.storage })
    }
}

extension SignalProducer where Value == TCPConnection, Error == UVError {
    /// The first value or the failure, waiting up to 10 s; nil on timeout.
    static func timeout(_ producer: SignalProducer<TCPConnection, UVError>) -> Result<TCPConnection, UVError>? {
        let outcome = Box<Result<TCPConnection, UVError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        producer.start { event in
            switch event {
            case let .value(connection): outcome.value = .success(connection)
            case let .failed(error): outcome.value = .failure(error)
            default: break
            }
            if event.isTerminating { done.signal() }
        }
        _ = done.wait(timeout: .now() + 10)
        return outcome.value
    }
}

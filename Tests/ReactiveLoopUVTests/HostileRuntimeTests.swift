import CLibUV
import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopUV

// The runtime played from the other side: threads racing the loop's start, loops released
// without running, callbacks that close, dispose and stop, peers that close, reset and
// half-close. Bounded in count and time; loopback only.

/// The number of open descriptors of this process.
func openDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// Calls `body` with 127.0.0.1:`port` as a `sockaddr` for the raw socket calls of a peer.
func withLoopbackAddress<Result>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// Sends `count` one-byte datagrams to 127.0.0.1:`port` from a raw socket, without the runtime
/// (whose send would wait for a loop thread the test may be holding).
func sendRawDatagrams(to port: Int, count: Int = 1) {
    let sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    for _ in 0..<count {
        _ = withLoopbackAddress(port: port) { sendto(sender, "x", 1, 0, $0, $1) }
    }
    Glibc.close(sender)
}

/// A raw loopback socket for playing a peer, without the runtime under test.
struct RawPeer {
    let fd: Int32

    /// A TCP socket connected to `port` on 127.0.0.1.
    ///
    /// - Parameter receiveBuffer: The `SO_RCVBUF` to set before connecting, which fixes the
    ///   window the peer offers; the kernel's default (which grows) when nil.
    static func connect(port: Int, receiveBuffer: Int32? = nil) throws -> RawPeer {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let status = withLoopbackAddress(port: port) { Glibc.connect(fd, $0, $1) }
        try #require(status == 0, "connect to 127.0.0.1:\(port): errno \(errno)")
        return RawPeer(fd: fd)
    }

    func send(_ text: String) { _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }

    /// Closes normally (FIN).
    func close() { Glibc.close(fd) }

    /// Closes with a reset (RST): SO_LINGER with a zero timeout.
    func reset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        Glibc.close(fd)
    }

    /// Shuts down the sending side only (half-close).
    func halfClose() { shutdown(fd, Int32(SHUT_WR)) }
}

@Suite("Hostile: the loop's life")
struct HostileLoopLifeTests {
    @Test func runStartedWhileAnotherThreadCreatesSocketsNeverTraps() throws {
        for _ in 0..<30 {
            let loop = try EventLoop()
            let created = Box(0)
            let creator = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                for _ in 0..<20 {
                    if (try? UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)) != nil {
                        created.modify { $0 += 1 }
                    }
                }
                creator.signal()
            }
            let runner = Thread { loop.run() }
            runner.start()
            creator.wait()
            #expect(created.value == 20)
            loop.stop()
            loop.waitUntilStopped()
            #expect(loop.closeStatus == 0)
        }
    }

    @Test func anOuterPollLoopRacingSocketCreationNeverTraps() throws {
        let loop = try EventLoop()
        let done = Box(false)
        let created = Box(0)
        Thread.detachNewThread {
            for _ in 0..<200 {
                if (try? TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)) != nil {
                    created.modify { $0 += 1 }
                }
            }
            done.value = true
            loop.stop()
        }
        var turns = 0
        while !loop.isStopped && turns < 1_000_000 {
            var descriptor = pollfd(fd: loop.backendFileDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, min(loop.backendTimeout, 10))
            loop.runNoWait()
            turns += 1
        }
        #expect(done.value)
        #expect(created.value == 200)
        #expect(loop.isStopped)
    }

    @Test func loopsReleasedWithoutRunningLeaveNoDescriptors() throws {
        _ = try EventLoop()  // libuv's process-wide descriptors (its signal pipe) are made once.
        let baseline = openDescriptorCount()
        for _ in 0..<100 {
            let loop = try EventLoop()
            _ = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            _ = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            LoopScheduler(loop: loop).schedule(after: Date(timeIntervalSinceNow: 3600)) {}
        }
        // About 7 descriptors a loop were kept before; other suites running meanwhile open a few.
        #expect(openDescriptorCount() - baseline < 60)
    }

    @Test func aLoopReleasedWithoutRunningFreesItsSocketsTimerAndPort() throws {
        weak var weakLoop: EventLoop?
        weak var weakUDP: UDPSocket?
        var (udpPort, tcpPort) = (0, 0)
        for closeFirst in [false, true] {
            try {
                let loop = try EventLoop()
                let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let tcp = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let scheduler = LoopScheduler(loop: loop)
                scheduler.schedule(after: Date(timeIntervalSinceNow: 3600)) {}
                scheduler.schedule(after: Date(timeIntervalSinceNow: 3600), interval: .seconds(1), leeway: .seconds(0))
                {}
                udp.datagrams.start()
                if closeFirst {
                    udp.close()
                    tcp.close()
                }
                (udpPort, tcpPort) = (udp.localAddress.port, tcp.localAddress.port)
                weakLoop = loop
                weakUDP = udp
            }()
            #expect(weakLoop == nil, "closeFirst: \(closeFirst)")
            #expect(weakUDP == nil, "closeFirst: \(closeFirst)")
            // The port is free again, for UDP and TCP.
            let again = try EventLoop()
            _ = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: udpPort), on: again)
            _ = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: tcpPort), on: again)
        }
    }

    @Test func aStartUpFailingAfterItsFirstSocketKeepsNoPort() throws {
        let blocker = try EventLoop()
        let taken = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: blocker)
        weak var weakLoop: EventLoop?
        var port = 0
        do {
            // A daemon's start-up: its UDP socket binds, its TCP listener finds the port taken.
            let loop = try EventLoop()
            let udp = try UDPSocket(boundTo: taken.localAddress, on: loop)
            port = udp.localAddress.port
            weakLoop = loop
            #expect(throws: UVError.self) { _ = try TCPListener(boundTo: taken.localAddress, on: loop) }
        }
        #expect(weakLoop == nil)
        taken.close()
        let again = try EventLoop()
        _ = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: port), on: again)
    }

    @Test func stopFromEveryThreadAndCallbackAnyNumberOfTimes() throws {
        let loop = try EventLoop.startOnNewThread()
        let scheduler = LoopScheduler(loop: loop)
        scheduler.schedule {
            loop.stop(); loop.stop()
        }
        DispatchQueue.concurrentPerform(iterations: 4) { _ in loop.stop() }
        loop.waitUntilStopped()
        loop.stop()
        #expect(loop.closeStatus == 0)
        #expect(!loop.runOnce())
    }
}

@Suite("Hostile: LoopScheduler")
struct HostileLoopSchedulerTests {
    /// A timed action is disposed by another callback of the same poll in which its timer fired,
    /// while nothing else holds the scheduler: the timer's callback must not find it freed
    /// (AddressSanitizer reports a use after free otherwise; CI runs this suite under it).
    @Test func disposingAPendingActionInTheCallbackBatchOfItsTimerIsSafe() throws {
        try withLoop { loop in
            for round in 0..<20 {
                let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let ran = Box(0)
                let fired = DispatchSemaphore(value: 0)
                let ready = DispatchSemaphore(value: 0)
                let release = DispatchSemaphore(value: 0)
                let pending = Box<(any Disposable)?>(nil)
                loop.execute {
                    // Only the pending action keeps its scheduler alive.
                    pending.value = LoopScheduler(loop: loop).schedule(after: Date(timeIntervalSinceNow: 0.02)) {
                        ran.modify { $0 += 1 }
                    }
                    // Hold the loop until both the timer is due and a datagram is waiting.
                    ready.signal()
                    release.wait()
                }
                udp.datagrams.startWithResult { _ in
                    pending.value?.dispose()
                    pending.value = nil
                    fired.signal()
                }
                ready.wait()
                usleep(40_000)
                // A raw send: the loop thread is held, and the runtime's send would wait for it.
                sendRawDatagrams(to: udp.localAddress.port)
                usleep(20_000)
                release.signal()
                #expect(fired.wait(timeout: .now() + 10) == .success, "round \(round)")
                #expect(ran.value <= 1)
                udp.close()
            }
        }
    }

    /// A is scheduled for D while D is ahead; a callback runs past D; B is then scheduled for the
    /// same D: B must not overtake A.
    @Test func anActionForADatePastDueNeverOvertakesOnePendingForTheSameDate() throws {
        try withLoop { loop in
            let scheduler = LoopScheduler(loop: loop)
            for sameThread in [true, false] {
                let order = Box<[String]>([])
                let date = Date(timeIntervalSinceNow: 0.01)
                let queued = DispatchSemaphore(value: 0)
                loop.execute {
                    scheduler.schedule(after: date) { order.modify { $0.append("A") } }
                    usleep(30_000)  // Past D, on the loop thread.
                    if sameThread {
                        scheduler.schedule(after: date) { order.modify { $0.append("B") } }
                    } else {
                        Thread.detachNewThread {
                            scheduler.schedule(after: date) { order.modify { $0.append("B") } }
                            queued.signal()
                        }
                        queued.wait()
                    }
                }
                #expect(eventually { order.value.count == 2 })
                #expect(order.value == ["A", "B"], "sameThread: \(sameThread)")
            }
            // Both from another thread while the loop is busy past D: A's insertion and B reach
            // the loop in one drain, A first.
            let order = Box<[String]>([])
            let date = Date(timeIntervalSinceNow: 0.01)
            let release = DispatchSemaphore(value: 0)
            loop.execute { release.wait() }
            usleep(30_000)
            scheduler.schedule(after: date) { order.modify { $0.append("A") } }
            scheduler.schedule(after: date) { order.modify { $0.append("B") } }
            release.signal()
            #expect(eventually { order.value.count == 2 })
            #expect(order.value == ["A", "B"], "from another thread")
        }
    }

    @Test func queueSchedulerKeepsTheSameDateOrderWhenItsQueueRunsLate() throws {
        let scheduler = QueueScheduler(qos: .userInitiated, name: "hostile")
        for _ in 0..<5 {
            let order = Box<[String]>([])
            let done = DispatchSemaphore(value: 0)
            let date = Date(timeIntervalSinceNow: 0.01)
            scheduler.schedule(after: date) { order.modify { $0.append("A") } }
            scheduler.schedule {
                usleep(30_000)  // The queue runs past D.
                scheduler.schedule(after: date) { order.modify { $0.append("B") } }
                scheduler.schedule(after: date) { done.signal() }
            }
            #expect(done.wait(timeout: .now() + 10) == .success)
            #expect(order.value == ["A", "B"])
        }
    }

    @Test func aSchedulerWithoutADescriptorForItsTimerFallsBackToALibuvTimer() throws {
        try withLoop { loop in
            let scheduler = LoopScheduler(loop: loop)
            scheduler.timerDescriptorForTesting = -EMFILE
            let order = Box<[Int]>([])
            let done = DispatchSemaphore(value: 0)
            let start = Date()
            scheduler.schedule(after: start.addingTimeInterval(0.03)) { order.modify { $0.append(2) } }
            scheduler.schedule(after: start.addingTimeInterval(0.01)) { order.modify { $0.append(1) } }
            scheduler.schedule(after: start.addingTimeInterval(0.05)) { done.signal() }
            #expect(done.wait(timeout: .now() + 10) == .success)
            #expect(Date().timeIntervalSince(start) >= 0.05)
            #expect(order.value == [1, 2])
            let fallback = Box(false)
            let checked = DispatchSemaphore(value: 0)
            loop.execute {
                fallback.value = scheduler.usesFallbackTimer
                checked.signal()
            }
            checked.wait()
            #expect(fallback.value)
        }
    }
}

/// What a callback does to the handle it came from.
enum FaultAction: String, CaseIterable, Sendable {
    case close, dispose, stop, everything

    /// Applies the action (`everything`: all three, twice, in a hostile order).
    func apply(close: () -> Void, dispose: () -> Void, stop: () -> Void) {
        switch self {
        case .close: close()
        case .dispose: dispose()
        case .stop: stop()
        case .everything:
            for _ in 0..<2 {
                stop()
                dispose()
                close()
            }
        }
    }
}

/// The close, dispose and stop contract: safe from inside any callback of any handle, in any
/// order, any number of times, whatever the peer does.
@Suite("Hostile: close, dispose and stop from inside callbacks")
struct HostileCallbackTests {
    enum Peer: String, CaseIterable, Sendable { case closes, resets, halfCloses, staysOpen }
    enum TCPCallback: String, CaseIterable, Sendable { case value, ending, writeCompletion }

    /// Runs a loop on its own thread until `body` is done with it, then stops it and checks that
    /// it shut down cleanly.
    func scenario(_ name: String, _ body: (EventLoop) throws -> Void) throws {
        let loop = try EventLoop.startOnNewThread()
        try body(loop)
        loop.stop()
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            loop.waitUntilStopped()
            stopped.signal()
        }
        #expect(stopped.wait(timeout: .now() + 10) == .success, "\(name): the loop did not shut down")
        #expect(loop.closeStatus == 0, "\(name)")
    }

    @Test(arguments: Peer.allCases)
    func aTCPConnectionsCallbacksMayCloseDisposeOrStop(peer: Peer) throws {
        for callback in TCPCallback.allCases {
            for action in FaultAction.allCases {
                let name = "peer \(peer), \(callback), \(action)"
                try scenario(name) { loop in
                    let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                    let acted = DispatchSemaphore(value: 0)
                    let run = Box<(any Disposable)?>(nil)
                    let actedOnce = Box(false)
                    let accepted = DispatchSemaphore(value: 0)
                    listener.connections.startWithResult { result in
                        guard case let .success(connection) = result else { return }
                        defer { accepted.signal() }
                        let act = {
                            let already = actedOnce.modify { (done: inout Bool) -> Bool in
                                defer { done = true }
                                return done
                            }
                            guard !already else { return }
                            action.apply(
                                close: { connection.close() }, dispose: { run.value?.dispose() },
                                stop: { loop.stop() })
                            acted.signal()
                        }
                        run.value = connection.bytes.start { event in
                            switch (callback, event) {
                            case (.value, .value), (.ending, .completed), (.ending, .failed), (.ending, .interrupted):
                                act()
                            case (.writeCompletion, .value):
                                connection.write(Array("reply\n".utf8)) { _ in act() }
                            default: break
                            }
                        }
                    }
                    let client = try RawPeer.connect(port: listener.localAddress.port)
                    client.send("hello\n")
                    #expect(accepted.wait(timeout: .now() + 5) == .success, "\(name): not accepted")
                    switch peer {
                    case .closes: client.close()
                    case .resets: client.reset()
                    case .halfCloses: client.halfClose()
                    case .staysOpen: break
                    }
                    // With the peer open, the ending comes only from our own close or stop; a
                    // reset may discard the data before it is read, and then no value comes.
                    let required =
                        !(peer == .staysOpen && callback == .ending) && !(peer == .resets && callback != .ending)
                    let waited = acted.wait(timeout: .now() + (required ? 5 : 0.2))
                    if required {
                        #expect(waited == .success, "\(name): the callback never came")
                    }
                    if peer == .halfCloses || peer == .staysOpen { client.close() }
                }
            }
        }
    }

    @Test func aUDPSocketsValueCallbackMayCloseDisposeOrStopMidBatch() throws {
        for action in FaultAction.allCases {
            try scenario("\(action)") { loop in
                let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let seen = Box(0)
                let run = Box<(any Disposable)?>(nil)
                let acted = DispatchSemaphore(value: 0)
                // Hold the loop so that several datagrams arrive in one batch.
                let held = DispatchSemaphore(value: 0)
                loop.execute { held.wait() }
                run.value = udp.datagrams.startWithResult { _ in
                    let count = seen.modify { (count: inout Int) -> Int in
                        count += 1
                        return count
                    }
                    if count == 2 {
                        action.apply(close: { udp.close() }, dispose: { run.value?.dispose() }, stop: { loop.stop() })
                        acted.signal()
                    }
                }
                sendRawDatagrams(to: udp.localAddress.port, count: 10)
                held.signal()
                #expect(acted.wait(timeout: .now() + 5) == .success, "\(action)")
                // Nothing is delivered after the action, except by `stop` alone (it ends the
                // run only when the loop shuts down).
                if action != .stop { #expect(seen.value == 2, "\(action)") }
            }
        }
    }

    @Test func aListenersAcceptCallbackMayCloseDisposeOrStop() throws {
        for action in FaultAction.allCases {
            try scenario("\(action)") { loop in
                let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let run = Box<(any Disposable)?>(nil)
                let acted = DispatchSemaphore(value: 0)
                run.value = listener.connections.startWithResult { result in
                    if case let .success(connection) = result { connection.close() }
                    action.apply(close: { listener.close() }, dispose: { run.value?.dispose() }, stop: { loop.stop() })
                    acted.signal()
                }
                let first = try RawPeer.connect(port: listener.localAddress.port)
                #expect(acted.wait(timeout: .now() + 5) == .success, "\(action)")
                first.close()
            }
        }
    }

    @Test func signalTimerAndConnectCallbacksMayDisposeOrStop() throws {
        for action in [FaultAction.dispose, .stop, .everything] {
            // A timer's action.
            try scenario("timer \(action)") { loop in
                let scheduler = LoopScheduler(loop: loop)
                let acted = DispatchSemaphore(value: 0)
                let timer = Box<(any Disposable)?>(nil)
                timer.value = scheduler.schedule(after: Date(), interval: .milliseconds(1), leeway: .seconds(0)) {
                    action.apply(close: {}, dispose: { timer.value?.dispose() }, stop: { loop.stop() })
                    acted.signal()
                }
                #expect(acted.wait(timeout: .now() + 5) == .success)
            }
            // A signal's delivery.
            try scenario("signal \(action)") { loop in
                let acted = DispatchSemaphore(value: 0)
                let run = Box<(any Disposable)?>(nil)
                run.value = loop.signals(SIGUSR2).startWithValues { _ in
                    action.apply(close: {}, dispose: { run.value?.dispose() }, stop: { loop.stop() })
                    acted.signal()
                }
                let installed = DispatchSemaphore(value: 0)
                loop.execute { installed.signal() }
                installed.wait()
                kill(getpid(), SIGUSR2)
                #expect(acted.wait(timeout: .now() + 5) == .success)
            }
            // A connect's success and failure.
            try scenario("connect \(action)") { loop in
                let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let closedPort = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
                let refused = closedPort.localAddress
                closedPort.close()
                for target in [listener.localAddress, refused] {
                    let acted = DispatchSemaphore(value: 0)
                    let run = Box<(any Disposable)?>(nil)
                    run.value = TCPConnection.connect(to: target, on: loop).startWithResult { result in
                        if case let .success(connection) = result { connection.close() }
                        action.apply(close: {}, dispose: { run.value?.dispose() }, stop: { loop.stop() })
                        acted.signal()
                    }
                    #expect(acted.wait(timeout: .now() + 5) == .success, "connect to \(target)")
                    if action != .dispose { break }  // The loop is stopping.
                }
            }
        }
    }
}

@Suite("Hostile: slow and idle peers", .serialized)
struct HostileSlowPeerTests {
    /// A connected pair: the loop's accepted side, and a raw peer that does what the test says.
    func pair(_ loop: EventLoop, receiveBuffer: Int32? = nil) throws -> (TCPConnection, RawPeer, TCPListener) {
        let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
        let accepted = Box<TCPConnection?>(nil)
        listener.connections.startWithResult { accepted.value = try? $0.get() }
        let peer = try RawPeer.connect(port: listener.localAddress.port, receiveBuffer: receiveBuffer)
        #expect(eventually { accepted.value != nil })
        return (try #require(accepted.value), peer, listener)
    }

    @Test func aPeerThatNeverReadsMeetsTheHighWaterMark() throws {
        try withLoop { loop in
            let (connection, peer, listener) = try pair(loop, receiveBuffer: 64 << 10)
            let mark = 4 << 20
            connection.setLimits(.init(writeHighWaterMark: mark))
            let refused = Box(0)
            let chunkSize = 64 << 10
            let chunk = [UInt8](repeating: 0x61, count: chunkSize)
            // 64 MiB offered to a peer that reads nothing. A write that is not refused is queued
            // (at most the mark) or in the kernel's hands: the loop's socket's send queue or the
            // peer's receive queue, read back once every write was handled. The rest is refused,
            // and said so.
            let offered = 1024
            for _ in 0..<offered {
                connection.write(chunk) { error in
                    if error?.code == Int32(UV_ENOBUFS.rawValue) { refused.modify { $0 += 1 } }
                }
            }
            // The writes are handled in order, and a refusal is reported as its write is.
            let handled = DispatchSemaphore(value: 0)
            loop.execute { handled.signal() }
            #expect(handled.wait(timeout: .now() + 10) == .success)
            let peerPort = try #require(Self.port(of: peer.fd))
            let server = try #require(Self.descriptor(localPort: listener.localAddress.port, peerPort: peerPort))
            let held = Self.queuedBytes(server, Self.sendQueue) + Self.queuedBytes(peer.fd, Self.receiveQueue)
            let accepted = offered - refused.value
            #expect(refused.value > 0)
            #expect(accepted * chunkSize <= mark + held, "\(accepted) writes taken; the kernel holds \(held) bytes")
            #expect(connection.queuedWriteBytes <= mark)
            peer.close()
        }
    }

    /// `SIOCOUTQ` (the bytes a TCP socket has sent without their acknowledgement, or not yet
    /// sent) and `SIOCINQ` (the bytes waiting to be read), which Swift's Glibc does not name.
    static let sendQueue: UInt = 0x5411
    static let receiveQueue: UInt = 0x541B

    static func queuedBytes(_ fd: Int32, _ request: UInt) -> Int {
        var count: Int32 = 0
        return ioctl(fd, request, &count) == 0 ? Int(count) : 0
    }

    /// The local port of IPv4 socket `fd`, or with `peer`, its peer's.
    static func port(of fd: Int32, peer: Bool = false) -> Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
            }
        }
        guard status == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// This process's descriptor of the TCP connection from `localPort` to `peerPort`.
    static func descriptor(localPort: Int, peerPort: Int) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { Int32($0) }.first {
            port(of: $0) == localPort && port(of: $0, peer: true) == peerPort
        }
    }

    @Test func aStalledPeerTimesOutAndItsQueuedWritesFail() throws {
        try withLoop { loop in
            let (connection, peer, _) = try pair(loop)
            let reading = Recorder<ReceivedBytes, UVError>()
            connection.bytes.start(reading.observer(loop))
            connection.setLimits(.init(writeTimeout: 0.3))
            let failures = Box<[Int32]>([])
            let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
            for _ in 0..<64 {
                connection.write(chunk) { error in if let error { failures.modify { $0.append(error.code) } } }
            }
            #expect(eventually { reading.ending.value == "failed" })
            #expect(reading.error.value?.code == Int32(UV_ETIMEDOUT.rawValue))
            #expect(eventually { connection.queuedWriteBytes == 0 })
            #expect(!failures.value.isEmpty)
            peer.close()
        }
    }

    @Test func anIdleConnectionTimesOutAndAnActiveOneDoesNot() throws {
        try withLoop { loop in
            let (idle, idlePeer, listener) = try pair(loop)
            let accepted = Box<TCPConnection?>(nil)
            listener.connections.startWithResult { accepted.value = try? $0.get() }
            let idleReading = Recorder<ReceivedBytes, UVError>()
            idle.bytes.start(idleReading.observer(loop))
            idle.setLimits(.init(idleTimeout: 0.2))
            #expect(eventually { idleReading.ending.value == "failed" })
            #expect(idleReading.error.value?.code == Int32(UV_ETIMEDOUT.rawValue))
            idlePeer.close()
        }
        try withLoop { loop in
            let (active, activePeer, _) = try pair(loop)
            let reading = Recorder<ReceivedBytes, UVError>()
            active.bytes.start(reading.observer(loop))
            active.setLimits(.init(idleTimeout: 0.3))
            for _ in 0..<10 {
                activePeer.send("x")
                usleep(100_000)
            }
            #expect(reading.ending.value == nil, "a peer sending every 0.1 s is not idle")
            activePeer.close()
        }
    }

    @Test func idleConnectionsHoldNoReadBuffer() throws {
        try withLoop { loop in
            let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let lines = Box(0)
            listener.connections.startWithResult { result in
                guard case let .success(connection) = result else { return }
                connection.lineBytes(maxLength: 1024).startWithResult { _ in lines.modify { $0 += 1 } }
            }
            let buffersBefore = _ByteStorage.live.load(ordering: .relaxed)
            var peers: [RawPeer] = []
            for index in 0..<300 {
                let peer = try RawPeer.connect(port: listener.localAddress.port)
                peer.send("line \(index)\npartial")
                peers.append(peer)
            }
            #expect(eventually { lines.value == 300 })
            // A buffer per connection would be 300 (19 MiB); other suites may hold a few.
            let held = _ByteStorage.live.load(ordering: .relaxed) - buffersBefore
            #expect(held < 50, "\(held) read buffers held by 300 idle connections")
            for peer in peers { peer.close() }
        }
    }

    @Test func writingToAPeerThatHasGoneFailsWithoutKillingTheProcess() throws {
        try withLoop { loop in
            let (connection, peer, _) = try pair(loop)
            peer.reset()
            let errors = Box<[Int32]>([])
            for _ in 0..<20 {
                connection.write(Array("after the peer left\n".utf8)) { error in
                    errors.modify { $0.append(error?.code ?? 0) }
                }
                usleep(5_000)
            }
            #expect(eventually { errors.value.count == 20 })
            #expect(errors.value.contains { $0 == Int32(UV_EPIPE.rawValue) || $0 == Int32(UV_ECONNRESET.rawValue) })
        }
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP listener on a loopback port that plays a Graphite receiver: it accepts when told, reads
/// or not, and closes as a restarting carbon does.
final class FakeReceiver {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    private(set) var port = 0

    init() throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound, listen(fd, 16) == 0 else { throw LoopdTestError.missing("a loopback listener: errno \(errno)") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }

    /// Accepts one connection, waiting at most `seconds`; -1 if none came.
    func accept(seconds: Double = 10) -> Int32 {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) == 1 else { return -1 }
        return Glibc.accept(fd, nil, nil)
    }

    /// Reads what `connection` has until nothing comes for `quiet` seconds, or for one second.
    static func drain(_ connection: Int32, quiet: Double = 0.3) -> String {
        var timeout = timeval(tv_sec: 0, tv_usec: Int(quiet * 1e6))
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(1)
        while Date() < deadline {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }
}

/// loopd played from the other side: receivers that restart or never read, clients that never
/// read their response, an output nobody reads. Bounded in count and time; loopback only.
@Suite("Hostile: loopd's outputs", .serialized)
struct HostileLoopdOutputTests {
    @Test func aGraphiteReceiverThatRestartsDoesNotKillLoopd() throws {
        let receiver = try FakeReceiver()
        let loopd = try LoopdProcess(["--graphite", "127.0.0.1:\(receiver.port)"])
        let udp = UDPSender(port: loopd.port)
        for restart in 0..<3 {
            let connection = receiver.accept()
            try #require(connection >= 0, "restart \(restart): loopd did not connect")
            udp.send("restart.count:1|c")
            #expect(
                eventually(seconds: 10, pollingEvery: 0.01) { FakeReceiver.drain(connection).contains("restart.count") }
            )
            // Carbon restarts: its end closes; it comes back on the same port.
            close(connection)
        }
        let again = receiver.accept()
        #expect(again >= 0, "loopd reconnected after the last restart")
        close(again)
        #expect(loopd.process.isRunning, "loopd is alive: \(loopd.log())")
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(loopd.process.terminationStatus == 0)
    }

    @Test func aGraphiteReceiverThatNeverReadsKeepsLoopdsMemoryBounded() throws {
        let receiver = try FakeReceiver()
        let loopd = try LoopdProcess(
            ["--graphite", "127.0.0.1:\(receiver.port)", "--graphite-max-queued", "\(1 << 20)"], flushInterval: 0.05)
        let connection = receiver.accept()
        try #require(connection >= 0)
        defer { close(connection) }
        let udp = UDPSender(port: loopd.port)
        // 20,000 series, kept fresh: each flush is about 1.5 MB of Graphite text nobody reads.
        let datagrams = counterDatagrams("stalled.graphite.series", series: 20_000)
        for datagram in datagrams { udp.send(datagram) }
        try loopd.waitForLines(20_000)
        let settled = loopd.residentBytes
        // Flushes pile up behind the receiver until the bound drops some: each flush is about
        // 1.5 MB nobody reads, so once the kernel's socket buffers are full, the next one is
        // over the 1 MiB bound. A few seconds; at most 90 under a sanitizer in a busy run, where
        // formatting 20,000 series takes long enough that most ticks are skipped.
        let end = Date().addingTimeInterval(90)
        var dropped = 0.0
        var rounds = 0
        while Date() < end && dropped == 0 {
            for datagram in datagrams { udp.send(datagram) }
            usleep(100_000)
            rounds += 1
            if rounds.isMultiple(of: 10) {
                dropped = Totals(try loopd.flushes()).counters["loopd.graphite_dropped_lines"] ?? 0
            }
        }
        #expect(dropped > 0, "the lines over the bound are counted")
        let grown = loopd.residentBytes - settled
        #expect(grown < 48 << 20, "loopd grew by \(grown >> 20) MiB")
        #expect(loopd.process.isRunning)
        // About 2.7 s at most whatever the outputs do, plus reading what the socket still holds
        // (the loop above keeps it full) and formatting the last flush of 20,000 series, which
        // take several times as long under a sanitizer (5.35 s in all, once, on a busy machine).
        let stopped = loopd.signal(SIGTERM)
        #expect(stopped < (underSanitizer ? 15 : 5), "SIGTERM took \(stopped) s with a stalled receiver")
    }

    @Test func flushesSlowerThanTheIntervalAreSkippedNotPiledUp() throws {
        // 20,000 series at --flush-interval 0.01: formatting a flush takes longer than that.
        let loopd = try LoopdProcess(flushInterval: 0.01)
        let udp = UDPSender(port: loopd.port)
        let datagrams = counterDatagrams("slow.flush.series", series: 20_000)
        for datagram in datagrams { udp.send(datagram) }
        try loopd.waitForLines(20_000)
        let settled = loopd.residentBytes
        usleep(3_000_000)
        let grown = loopd.residentBytes - settled
        #expect(grown < 64 << 20, "loopd grew by \(grown >> 20) MiB while its flushes lagged")
        let stopped = loopd.signal(SIGTERM)
        #expect(stopped < 5, "SIGTERM took \(stopped) s")
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["loopd.flushes_skipped"] ?? 0 > 0, "the skipped ticks are counted")
        #expect(totals.counters["slow.flush.series.0"] == 1, "nothing is lost: the interval went on")
    }

    @Test func prometheusClientsThatNeverReadHoldNoCopyEachAndOthersAreServed() throws {
        let loopd = try LoopdProcess(["--prometheus", "127.0.0.1:0"], flushInterval: 0.2)
        let line = try loopd.waitForLog("serving Prometheus metrics at http://")
        let port = Int(line.split(separator: ":").last!.split(separator: "/").first!)!
        let udp = UDPSender(port: loopd.port)
        for datagram in counterDatagrams("exposed.series.number", series: 10_000) { udp.send(datagram) }
        try loopd.waitForLines(10_000)
        usleep(500_000)
        let settled = loopd.residentBytes
        // 300 clients ask and never read a byte of the answer.
        var stalled: [TCPClient] = []
        for _ in 0..<300 {
            guard let client = try? TCPClient(port: port) else { break }
            var small: Int32 = 4096
            setsockopt(client.fd, SOL_SOCKET, SO_RCVBUF, &small, 4)
            client.send("GET /metrics HTTP/1.1\r\n\r\n")
            stalled.append(client)
        }
        usleep(1_000_000)
        let grown = loopd.residentBytes - settled
        #expect(grown < 32 << 20, "loopd grew by \(grown >> 20) MiB for 300 stalled clients")
        // The stalled clients hold at most the connection bound; after the write timeout
        // (10 s) they are gone, and a reading client is served.
        stalled = []
        let reader = try TCPClient(port: port)
        reader.send("GET /metrics HTTP/1.1\r\n\r\n")
        let response = String(decoding: reader.readToEnd(seconds: 15).bytes, as: UTF8.self)
        #expect(response.hasPrefix("HTTP/1.1 200 OK"))
        #expect(loopd.signal(SIGTERM) < 5)
        let refused = Totals(try loopd.flushes()).counters["loopd.prometheus_connections_refused"] ?? 0
        #expect(refused > 0, "clients beyond the bound are counted")
    }

    @Test func aStalledStandardOutputDelaysNoOtherOutputNorSIGTERM() throws {
        // Standard output is a pipe nobody reads: its buffer fills, and writes block.
        let pipe = Pipe()
        let loopd = try LoopdProcess(
            ["--output", "-", "--prometheus", "127.0.0.1:0"], flushInterval: 0.05,
            standardOutput: .descriptor(pipe.fileHandleForWriting.fileDescriptor))
        let line = try loopd.waitForLog("serving Prometheus metrics at http://")
        let port = Int(line.split(separator: ":").last!.split(separator: "/").first!)!
        let udp = UDPSender(port: loopd.port)
        // Enough series that the pipe (64 KiB) fills within a few flushes.
        for datagram in counterDatagrams("stdout.stall.series", series: 4000) { udp.send(datagram) }
        usleep(1_500_000)
        func linesReceived() -> Double? {
            guard let client = try? TCPClient(port: port) else { return nil }
            client.send("GET /metrics HTTP/1.1\r\n\r\n")
            let text = String(decoding: client.readToEnd().bytes, as: UTF8.self)
            guard let found = text.split(separator: "\n").first(where: { $0.hasPrefix("loopd_lines_received") })
            else { return nil }
            return Double(found.split(separator: " ").last ?? "")
        }
        let before = try #require(linesReceived())
        udp.send("after.the.stall:1|c")
        #expect(
            eventually(seconds: 10, pollingEvery: 0.01) { (linesReceived() ?? 0) > before }, "Prometheus kept flushing")
        let stopped = loopd.signal(SIGTERM)
        #expect(stopped < 6, "SIGTERM took \(stopped) s with a stalled standard output")
        #expect(!loopd.process.isRunning)
        #expect(loopd.log().contains("output_dropped") || loopd.log().contains("dropped"))
        pipe.fileHandleForReading.closeFile()
    }
}

/// loopd with its standard error played as the test likes (the usual harness reads it all).
@Suite("Hostile: loopd's logs and requests", .serialized)
struct HostileLoopdLogTests {
    /// Reads `fd` until `text` appears (20 s at most); returns what was read.
    func read(_ fd: Int32, until text: String) -> String {
        var seen = ""
        let deadline = Date().addingTimeInterval(20)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !seen.contains(text) && Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) == 1 else { continue }
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count <= 0 { break }
            seen += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        return seen
    }

    @Test func aStandardErrorNobodyReadsStallsNothing() throws {
        let stderrPipe = Pipe()
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("loopd-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: output) }
        let process = try ChildProcess(
            executable: LoopdProcess.binary.path,
            arguments: [
                "--port", "0", "--prometheus", "127.0.0.1:0", "--flush-interval", "0.05", "--log-level", "debug",
                "--output", output.path,
            ], standardError: .descriptor(stderrPipe.fileHandleForWriting.fileDescriptor))
        // Only loopd writes to the pipe: if it dies, the reads below see the end.
        try stderrPipe.fileHandleForWriting.close()
        defer { withExtendedLifetime(stderrPipe) {} }  // Its read end is read below, by number.
        let fd = stderrPipe.fileHandleForReading.fileDescriptor
        let startup = read(fd, until: "/metrics")
        let port = Int(
            startup.components(separatedBy: "listening on ")[1].split(separator: " ")[0].split(separator: ":").last!)!
        let metricsLine = startup.split(separator: "\n").first { $0.contains("/metrics") }!
        let metricsPort = Int(metricsLine.split(separator: ":").last!.split(separator: "/").first!)!
        // From now on nobody reads standard error. Every bad line logs at debug level: 64 KiB of
        // pipe fill in a moment.
        let udp = UDPSender(port: port)
        for _ in 0..<2000 { udp.send((0..<20).map { "bad.line.\($0):x|c\n" }.joined()) }
        udp.send("after.the.flood:1|c")
        let served = eventually(seconds: 10, pollingEvery: 0.01) {
            guard let client = try? TCPClient(port: metricsPort) else { return false }
            client.send("GET /metrics HTTP/1.1\r\n\r\n")
            return String(decoding: client.readToEnd(seconds: 2).bytes, as: UTF8.self).contains("after_the_flood")
        }
        #expect(served, "flushes and Prometheus go on while standard error is full")
        let start = Date()
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning && Date().timeIntervalSince(start) < 10 { usleep(10_000) }
        #expect(!process.isRunning, "SIGTERM ends loopd while standard error is full")
        #expect(Date().timeIntervalSince(start) < 5)
    }

    @Test func aRequestSentAByteAtATimeIsCutAtTheRequestTimeout() throws {
        let loopd = try LoopdProcess(["--prometheus", "127.0.0.1:0"])
        let line = try loopd.waitForLog("serving Prometheus metrics at http://")
        let port = Int(line.split(separator: ":").last!.split(separator: "/").first!)!
        let slow = try TCPClient(port: port)
        let start = Date()
        var closed = false
        // One byte every half second: never idle, never done.
        for byte in "GET /metrics HTTP/1.1\r\nHost: slowloris.example\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaa" {
            slow.send(String(byte))
            var poller = pollfd(fd: slow.fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 500) == 1 {
                closed = true
                break
            }
        }
        #expect(closed, "the slow client was disconnected")
        let elapsed = Date().timeIntervalSince(start)
        #expect(elapsed >= 9 && elapsed < 14, "after the 10 s request timeout: \(elapsed) s")
        loopd.signal(SIGTERM)
    }

    @Test func eachFlushSaysTheIntervalItReallyCovered() throws {
        let loopd = try LoopdProcess(flushInterval: 0.1)
        UDPSender(port: loopd.port).send("x:1|c")
        usleep(1_500_000)
        loopd.signal(SIGTERM)
        let flushes = try loopd.flushes()
        try #require(flushes.count >= 5)
        let intervals = flushes.compactMap { $0["interval"] as? Double }
        let stamps = flushes.compactMap { $0["timestamp"] as? Double }
        // The intervals tile the time between the flushes (the last one, at SIGTERM, is short).
        let covered = intervals.dropFirst().reduce(0, +)
        let elapsed = stamps.last! - stamps.first!
        #expect(abs(covered - elapsed) < 0.05, "intervals \(covered) s against \(elapsed) s between flushes")
        // A tick that comes late shortens the next interval (ticks keep their planned times).
        #expect(intervals.allSatisfy { $0 > 0 })
    }
}

/// Datagrams of 20 lines each that count 1 for `series` counters named `prefix.0`, `prefix.1`, …
func counterDatagrams(_ prefix: String, series: Int) -> [String] {
    stride(from: 0, to: series, by: 20).map { first in
        (first..<min(first + 20, series)).map { "\(prefix).\($0):1|c\n" }.joined()
    }
}

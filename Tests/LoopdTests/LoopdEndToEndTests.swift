import Foundation
import LoopdCore
import ReactiveLoopTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built daemon, run as users run it: a child process on a loopback port, fed over UDP and
/// TCP, stopped with signals, checked through its JSON-lines output.
@Suite("loopd end to end", .serialized)
struct LoopdEndToEndTests {
    @Test func flushedTotalsAreExactOverUDPAndTCPThroughSIGTERM() throws {
        let loopd = try LoopdProcess()
        let udp = UDPSender(port: loopd.port)
        var lines = 0.0
        // 200 datagrams of 20 lines: counters with sample rates and tags in any order, packed
        // values, gauges with deltas, every sampled kind, sets.
        for round in 0..<200 {
            var datagram = ""
            for key in 0..<5 { datagram += "app.requests.\(key):1|c|#env:prod,route:/\(key % 2)\n" }
            datagram += "app.requests.0:1|c|#route:/0,env:prod\n"  // the same series, tags reordered
            datagram += "app.sampled:1|c|@0.1\n"
            datagram += "app.packed:1:2:3|c\n"
            datagram += "app.latency:\(round % 10):5|ms|#host:a\n"
            datagram += "app.size:\(round)|h|@0.5\n"
            datagram += "app.dist:2|d|c:container-1|T1700000000\n"
            datagram += "app.users:user\(round % 7)|s\n"
            datagram += "app.gauge:+1|g\n"
            datagram += "app.level:\(round)|g\n"
            datagram += "app.requests.0:1|c|#env:prod,route:/0|x:ignored\n"
            // The malformed: bad number, unknown type, empty name, bad rate, no type, not UTF-8.
            datagram += "bad.number:1x|c\nbad.type:1|q\n:1|c\nbad.rate:1|c|@2\nbad.notype:1\n"
            udp.send(Array(datagram.utf8) + Array("bad.utf8\u{FF}:1|c\n".utf8).map { $0 == 0xBF ? 0xFF : $0 })
            lines += 20 + 1
        }
        let tcp = try TCPClient(port: loopd.port)
        for _ in 0..<100 { tcp.send("tcp.count:2|c\ntcp.timer:10|ms\n") }
        tcp.send("tcp.count:1|c\r\n")  // CRLF is a line ending too
        lines += 201
        try loopd.waitForLines(lines)
        #expect(loopd.signal(SIGTERM) < 5, "exits promptly on SIGTERM")
        #expect(loopd.process.terminationStatus == 0)
        #expect(!loopd.log().contains("ThreadSanitizer"), "clean when built with --sanitize=thread")

        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["app.requests.0|#env:prod,route:/0"] == 600)
        #expect(totals.counters["app.requests.1|#env:prod,route:/1"] == 200)
        #expect(totals.counters["app.requests.4|#env:prod,route:/0"] == 200)
        #expect(totals.counters["app.sampled"] == 2000)
        #expect(totals.counters["app.packed"] == 1200)
        #expect(totals.counters["tcp.count"] == 201)
        #expect(totals.timerCounts["app.latency|#host:a"] == 400)
        #expect(totals.timerSums["app.latency|#host:a"] == Double((0..<200).reduce(0) { $0 + $1 % 10 + 5 }))
        #expect(totals.timerCounts["app.size"] == 400, "scaled by 1/0.5")
        #expect(totals.timerSamples["app.size"] == 200)
        #expect(totals.timerCounts["app.dist"] == 200)
        #expect(totals.timerCounts["tcp.timer"] == 100)
        #expect(totals.gauges["app.gauge"] == 200)
        #expect(totals.gauges["app.level"] == 199)
        #expect(totals.counters["loopd.packets_received"] == 200)
        #expect(totals.counters["loopd.lines_received"] == lines)
        #expect(totals.counters["loopd.bad_lines"] == 1200)
        #expect(totals.counters.keys.allSatisfy { !$0.hasPrefix("bad") })
        #expect(totals.gauges["loopd.series"] == 15)
        #expect(totals.counters["loopd.udp_kernel_drops"] == 0)
        let flushes = try loopd.flushes()
        #expect(flushes.count >= 2)
        let users = flushes.compactMap {
            ($0["sets"] as? [[String: Any]])?.first { $0["name"] as? String == "app.users" }
        }
        #expect(!users.isEmpty && users.allSatisfy { ($0["count"] as! Double) <= 7 })
    }

    @Test(arguments: [
        (["--udp-read-pause", "300"], "; read pause: 300 µs"),
        (["--udp-read-pause", "0"], "; read pause: none (udp-read-pause 0)"),
        (["--udp-buffer", "100000"], "; read pause: none, as the buffer granted is under 2097152 bytes"),
        (["--udp-buffer", "100000", "--udp-read-pause", "1000000"], "; read pause: 1000000 µs"),
    ])
    func theReadPauseInUseIsLogged(arguments: [String], expected: String) throws {
        let loopd = try LoopdProcess(arguments)
        let line = try loopd.waitForLog("listening on")
        #expect(line.contains(expected), "\(line)")
    }

    @Test func everyReaderCountsExactlyThroughSIGTERM() throws {
        // As many readers as the cores (at least two sockets when there are two cores, as on CI);
        // 64 senders, each on its own port, so that the kernel spreads them over the sockets.
        let readers = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let loopd = try LoopdProcess(["--readers", "\(readers)", "--log-level", "debug"], flushInterval: 0.05)
        #expect(try loopd.waitForLog("listening on").contains("\(readers) UDP reader"))
        let senders = (0..<64).map { _ in UDPSender(port: loopd.port) }
        for round in 0..<50 {
            for (index, sender) in senders.enumerated() {
                sender.send(
                    "spread.count:1|c\nspread.sampled:1|c|@0.5\nspread.time:\(round % 7)|ms\n"
                        + "spread.set:m\(index % 10)|s\nsender.\(index):1|c|#r:\(round % 2)\nbad:1|x\n")
            }
        }
        let lines = 64.0 * 50 * 6
        try loopd.waitForLines(lines)
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(loopd.process.terminationStatus == 0)
        #expect(!loopd.log().contains("ThreadSanitizer"), "clean when built with --sanitize=thread")
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["spread.count"] == 3200)
        #expect(totals.counters["spread.sampled"] == 6400)
        #expect(totals.timerCounts["spread.time"] == 3200)
        #expect(totals.timerSums["spread.time"] == Double((0..<50).reduce(0) { $0 + $1 % 7 } * 64))
        for index in 0..<64 {
            #expect(totals.counters["sender.\(index)|#r:0"] == 25 && totals.counters["sender.\(index)|#r:1"] == 25)
        }
        #expect(totals.counters["loopd.packets_received"] == 3200)
        #expect(totals.counters["loopd.lines_received"] == lines)
        #expect(totals.counters["loopd.bad_lines"] == 3200)
        #expect(totals.counters["loopd.udp_kernel_drops"] == 0)
        let flushes = try loopd.flushes()
        let sets = flushes.compactMap {
            ($0["sets"] as? [[String: Any]])?.first { $0["name"] as? String == "spread.set" }
        }
        #expect(!sets.isEmpty && sets.allSatisfy { ($0["count"] as! Double) <= 10 }, "members join across readers")
        if readers > 1 {
            // Bad lines are logged by whichever reader took them.
            #expect(loopd.log().contains("bad line (unknown metric type"))
        }
    }

    @Test func malformedLinesAreLoggedAtDebugWithTheirReason() throws {
        let loopd = try LoopdProcess(["--log-level", "debug"])
        UDPSender(port: loopd.port).send("ok:1|c\nbroken:1|zz\n")
        try loopd.waitForLog("unknown metric type")
        #expect(loopd.log().contains("\"broken:1|zz\""))
        loopd.signal(SIGTERM)
        #expect(Totals(try loopd.flushes()).counters["ok"] == 1)
    }

    @Test func aTCPClientThatDisconnectsMidLineLosesOnlyThatLineAndItIsCounted() throws {
        let loopd = try LoopdProcess(["--log-level", "debug"])
        do {
            let client = try TCPClient(port: loopd.port)
            client.send("whole:1|c\nhalf:1")
        }
        let next = try TCPClient(port: loopd.port)
        next.send("after:1|c\n")
        try loopd.waitForLines(3)
        try loopd.waitForLog("a line without its newline, or a frame cut short, when the connection ended")
        loopd.signal(SIGTERM)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["whole"] == 1)
        #expect(totals.counters["after"] == 1)
        #expect(totals.counters["half"] == nil, "it may be cut short: not recorded")
        #expect(totals.counters["loopd.bad_lines"] == 1, "but counted")
        #expect(totals.counters["loopd.lines_received"] == 3)
    }

    @Test func aTCPLineOverTheLimitClosesOnlyThatConnection() throws {
        let loopd = try LoopdProcess(["--max-line", "64"])
        let other = try TCPClient(port: loopd.port)
        other.send("other:1|c\n")
        let offender = try TCPClient(port: loopd.port)
        offender.send("fine:1|c\n" + String(repeating: "x", count: 100) + ":1|c\n")
        let (_, closed) = offender.readToEnd()
        #expect(closed, "loopd closes the connection")
        try loopd.waitForLog("longer than --max-line 64")
        other.send("other:1|c\n")
        try loopd.waitForLines(4)
        loopd.signal(SIGTERM)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["other"] == 2)
        #expect(totals.counters["fine"] == 1)
        #expect(totals.counters["loopd.bad_lines"] == 1)
    }

    @Test func aUDPLineOverTheLimitIsABadLine() throws {
        let loopd = try LoopdProcess(["--max-line", "64"])
        UDPSender(port: loopd.port).send("fine:1|c\n" + String(repeating: "y", count: 100) + ":1|c\nfine:1|c")
        try loopd.waitForLines(3)
        loopd.signal(SIGTERM)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["fine"] == 2)
        #expect(totals.counters["loopd.bad_lines"] == 1)
    }

    @Test func sighupReopensTheOutputForLogRotation() throws {
        let loopd = try LoopdProcess()
        let rotated = loopd.directory.appendingPathComponent("flushes.jsonl.1")
        UDPSender(port: loopd.port).send("before:1|c")
        try loopd.waitForLines(1)
        try FileManager.default.moveItem(at: loopd.output, to: rotated)
        loopd.signal(SIGHUP)
        try loopd.waitForLog("SIGHUP")
        let deadline = Date().addingTimeInterval(20)
        while try loopd.flushes().isEmpty && Date() < deadline { usleep(20_000) }
        UDPSender(port: loopd.port).send("after:1|c")
        loopd.signal(SIGTERM)
        #expect(loopd.process.terminationStatus == 0)
        #expect(Totals(try loopd.flushes(rotated)).counters["before"] == 1)
        #expect(Totals(try loopd.flushes()).counters["after"] == 1, "written to the new file")
        #expect(Totals(try loopd.flushes()).counters["before"] == 0)
    }

    @Test func sigintAlsoFlushesAndExitsZero() throws {
        let loopd = try LoopdProcess(flushInterval: 60)
        UDPSender(port: loopd.port).send("only.final:3|c")
        try loopd.waitForLog("listening")
        usleep(100_000)
        #expect(loopd.signal(SIGINT) < 5)
        #expect(loopd.process.terminationStatus == 0)
        #expect(Totals(try loopd.flushes()).counters["only.final"] == 3, "the final flush carries it")
    }

    @Test func aPortInUseIsAClearErrorNamingTheFlag() throws {
        let first = try LoopdProcess()
        let second = try LoopdProcess(["--port", "\(first.port)"], waitForListening: false)
        second.waitForExit()
        #expect(second.process.terminationStatus == 1)
        let log = second.log()
        #expect(log.contains("--host/--port 127.0.0.1:\(first.port)"))
        #expect(log.contains("address already in use"))
        first.signal(SIGTERM)
    }

    @Test func anUnwritableOutputIsAClearErrorNamingTheFlag() throws {
        let loopd = try LoopdProcess(["--output", "/nonexistent-dir/flushes.jsonl"], waitForListening: false)
        loopd.waitForExit()
        #expect(loopd.process.terminationStatus == 1)
        #expect(loopd.log().contains("--output /nonexistent-dir/flushes.jsonl: cannot open for writing"))
    }

    @Test(arguments: [
        (["--flush-interval", "0"], "--flush-interval must be in"), (["--max-line", "0"], "--max-line must be in"),
        (["--graphite", "nohost"], "--graphite nohost: expected host:port"),
        (["--graphite", "127.0.0.1:0"], "--graphite 127.0.0.1:0: expected host:port, such as carbon.example.com:2003"),
        (["--graphite", "bad host:2003"], "--graphite bad host:2003: expected host:port"),
        (["--graphite", ":2003"], "--graphite :2003: expected host:port"),
        (["--prometheus", "x"], "--prometheus x: expected host:port, such as 127.0.0.1:9102"),
        (["--tcp-idle-timeout", "-1"], "--tcp-idle-timeout must be in 0...86400 seconds, got -1.0"),
        (["--graphite-max-queued", "10"], "--graphite-max-queued must be in 1024...1099511627776 bytes, got 10"),
        (["--host", "example.com"], "--host/--port example.com: not a numeric"),
        (["--log-level", "loud"], "--log-level must be one of"),
        (["--prometheus-timers", "both"], "--prometheus-timers must be histogram or summary, got \"both\""),
        (["--unix-socket-mode", "999"], "--unix-socket-mode must be octal permissions in 0...777, got \"999\""),
        (
            ["--unix-socket", "/nonexistent-dir/loopd.sock"],
            "--unix-socket /nonexistent-dir/loopd.sock: cannot receive there"
        ),
        (["--prometheus-buckets", "1,0.5"], "--prometheus-buckets 1,0.5: bounds must be strictly ascending"),
        (["--prometheus-buckets", "0.1,x"], "--prometheus-buckets 0.1,x: \"x\" is not a number"),
        (["--prometheus-buckets", "-1,-2"], "--prometheus-buckets -1,-2: bounds must be strictly ascending"),
    ])
    func badFlagsAreRejectedWithTheirValue(arguments: [String], message: String) throws {
        let loopd = try LoopdProcess(arguments, waitForListening: false)
        loopd.waitForExit()
        #expect(loopd.process.terminationStatus != 0)
        #expect(loopd.log().contains(message))
    }

    @Test(arguments: [
        ("--port", "--port must be in 0...65535, got -1"),
        ("--udp-buffer", "--udp-buffer must be in 1...2147483647, got -1"),
        ("--udp-read-pause", "--udp-read-pause must be in 0...1000000 microseconds, got -1"),
        ("--max-line", "--max-line must be in 1...65536, got -1"),
        ("--flush-interval", "--flush-interval must be in 0.01...86400 seconds, got -1"),
        ("--max-series", "--max-series must be in 1...2147483647, got -1"),
        ("--expire-after", "--expire-after must be in 0...4294967295, got -1"),
        ("--graphite-max-queued", "--graphite-max-queued must be in 1024...1099511627776 bytes, got -1"),
    ])
    func aNegativeNumberGetsTheRangeMessageNotMissingValue(flag: String, message: String) throws {
        let loopd = try LoopdProcess([flag, "-1"], waitForListening: false)
        loopd.waitForExit()
        #expect(loopd.process.terminationStatus == 64)
        let log = loopd.log()
        #expect(log.contains(message), "\(log)")
        #expect(!log.contains("Missing value"))
    }

    @Test func versionIsTheOneTheStartupLineNames() throws {
        let version = try LoopdProcess(["--version"], waitForListening: false, standardOutput: .captured)
        version.waitForExit()
        #expect(version.process.terminationStatus == 0)
        #expect(version.process.waitForCapturedEnd())
        let printed = version.process.standardOutputText
        #expect(printed == LoopdVersion.string + "\n")
        let loopd = try LoopdProcess()
        #expect(loopd.log().contains("loopd \(LoopdVersion.string) listening on "))
        loopd.signal(SIGTERM)
    }

    @Test func aUnixDatagramSocketReceivesAndItsFileGoesAtExit() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-uds-\(UUID().uuidString.prefix(8))"
        ).path
        defer { unlink(path) }
        // A file left by a loopd that was killed: replaced.
        leaveStaleUnixSocket(at: path)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let loopd = try LoopdProcess(["--unix-socket", path, "--unix-socket-mode", "600"])
        try loopd.waitForLog("receiving on the Unix datagram socket \(path)")
        var status = stat()
        #expect(lstat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
        // A second loopd on the same path is refused, naming the flag.
        let second = try LoopdProcess(["--unix-socket", path], waitForListening: false)
        second.waitForExit()
        #expect(second.process.terminationStatus == 1)
        #expect(second.log().contains("--unix-socket \(path): cannot receive there"))
        var sent = 0
        for _ in 0..<100 {
            let datagram = Array("uds.count:1|c\nuds.timer:5|ms".utf8)
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
                    defer { close(fd) }
                    return sendto(fd, datagram, datagram.count, 0, target, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == datagram.count { sent += 1 }
        }
        #expect(sent == 100)
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(loopd.process.terminationStatus == 0)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["uds.count"] == 100, "every datagram, through SIGTERM")
        #expect(access(path, F_OK) != 0, "the socket file is removed at exit")
    }

    @Test func aUnixStreamSocketTakesLinesAndDogStatsDFramesExactlyThroughSIGTERM() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-uss-\(UUID().uuidString.prefix(8))"
        ).path
        defer { unlink(path) }
        leaveStaleUnixSocket(at: path, type: SOCK_STREAM)
        // The same path for both Unix sockets is refused before anything is opened.
        let clash = try LoopdProcess(["--unix-socket", path, "--unix-stream", path], waitForListening: false)
        clash.waitForExit()
        #expect(clash.process.terminationStatus != 0)
        #expect(clash.log().contains("--unix-stream must differ from --unix-socket"))
        let loopd = try LoopdProcess(["--unix-stream", path, "--unix-socket-mode", "600"])
        try loopd.waitForLog("receiving on the Unix stream socket \(path)")
        var status = stat()
        #expect(lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK && status.st_mode & 0o777 == 0o600)
        /// Writes `bytes` to a new client in pieces of 1 to 7 bytes, then closes it.
        func send(_ bytes: [UInt8], pieces: Bool = true) {
            let fd = connectUnixStream(to: path)
            #expect(fd >= 0)
            var offset = 0
            while offset < bytes.count {
                let count = pieces ? min(bytes.count - offset, 1 + offset % 7) : bytes.count - offset
                let written = bytes[offset..<offset + count].withUnsafeBytes { write(fd, $0.baseAddress, count) }
                if written <= 0 { break }
                offset += written
            }
            close(fd)
        }
        func frame(_ text: String) -> [UInt8] {
            let payload = Array(text.utf8)
            let count = UInt32(payload.count)
            return [UInt8(count & 0xff), UInt8(count >> 8 & 0xff), UInt8(count >> 16 & 0xff), UInt8(count >> 24)]
                + payload
        }
        // DogStatsD clients: 4 × 50 frames of two lines, the last line of each not ended.
        for _ in 0..<4 { send((0..<50).flatMap { _ in frame("us.frames:1|c\nus.t:5|ms|#via:frame") }) }
        // Line clients: one ends every line, one leaves its last line unended (lost, counted).
        send(Array(String(repeating: "us.lines:1|c\n", count: 100).utf8))
        send(Array((String(repeating: "us.lines:1|c\n", count: 99) + "us.lines:1|c").utf8))
        // A frame longer than loopd takes: the client is disconnected after its first frame.
        send(frame("us.frames:1|c") + [0x70, 0x11, 0x01, 0x00] + Array(repeating: 65, count: 1000), pieces: false)
        // Fewer than 4 bytes, then the end: an unended line.
        send(Array("ab".utf8))
        // 400 framed lines + 1, 199 lines, and 3 bad ones.
        try loopd.waitForLines(400 + 1 + 199 + 3)
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(loopd.process.terminationStatus == 0)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["us.frames"] == 201)
        #expect(totals.timerCounts["us.t|#via:frame"] == 200)
        #expect(totals.counters["us.lines"] == 199)
        #expect(totals.counters["loopd.bad_lines"] == 3)
        #expect(loopd.log().contains("a DogStatsD frame of 70000 bytes, longer than 65536"))
        #expect(access(path, F_OK) != 0, "the socket file is removed at exit")
    }

    @Test func aLineOrFrameLeftUnfinishedAtSIGTERMIsCountedAsBad() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-uss-\(UUID().uuidString.prefix(8))"
        ).path
        defer { unlink(path) }
        let loopd = try LoopdProcess(["--unix-stream", path])
        try loopd.waitForLog("receiving on the Unix stream socket \(path)")
        // A TCP client and a Unix stream client with a line each, the last unfinished, and a
        // frame client with half a frame; all still connected at SIGTERM.
        let tcp = try TCPClient(port: loopd.port)
        let lines = connectUnixStream(to: path)
        let frames = connectUnixStream(to: path)
        defer {
            close(lines)
            close(frames)
        }
        for (fd, bytes) in [
            (tcp.fd, Array("ok:1|c\npart:1|".utf8)), (lines, Array("ok:1|c\npart:1|".utf8)),
            (frames, [6, 0, 0, 0] + Array("ok:1|c".utf8) + [9, 0, 0, 0] + Array("par".utf8)),
        ] {
            #expect(write(fd, bytes, bytes.count) == bytes.count)
        }
        try loopd.waitForLines(3)
        #expect(loopd.signal(SIGTERM) < 5)
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["ok"] == 3)
        #expect(totals.counters["loopd.bad_lines"] == 3, "each unfinished line or frame, counted")
    }

    /// A datagram socket playing systemd's notification socket, at `path` (a leading `@`:
    /// abstract).
    final class NotifySocket {
        let fd: Int32

        init(path: String) throws {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(path.utf8)
            if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            try #require(status == 0, "bind \(path): errno \(errno)")
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// The next notification, or nil after 20 s without one.
        func next() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
        }
    }

    @Test(arguments: ["file", "abstract"])
    func underSystemdItNotifiesReadyWatchdogAndStopping(socket kind: String) throws {
        let name = "loopd-notify-\(UUID().uuidString.prefix(8))"
        let path =
            kind == "file" ? FileManager.default.temporaryDirectory.appendingPathComponent(name).path : "@" + name
        defer { if kind == "file" { unlink(path) } }
        let notifications = try NotifySocket(path: path)
        let loopd = try LoopdProcess(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"])
        let ready = try #require(notifications.next())
        #expect(ready.split(separator: "\n").contains("READY=1"))
        #expect(ready.contains("MAINPID=\(loopd.process.processIdentifier)"))
        // Pings every 0.1 s, from the loop thread.
        #expect(notifications.next() == "WATCHDOG=1")
        #expect(notifications.next() == "WATCHDOG=1")
        loopd.signal(SIGTERM)
        var stopping = false
        while let message = notifications.next(), !stopping {
            stopping = message.split(separator: "\n").contains("STOPPING=1")
            if message != "WATCHDOG=1" && !stopping { Issue.record("unexpected: \(message)") }
        }
        #expect(stopping)
        #expect(loopd.process.terminationStatus == 0)
    }

    @Test func aTinyWatchdogIntervalIsPingedEveryMillisecondAtMost() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-notify-\(UUID().uuidString.prefix(8))"
        ).path
        defer { unlink(path) }
        let notifications = try NotifySocket(path: path)
        // 1 µs: half of it is 0, which a timer cannot take (loopd trapped here).
        let loopd = try LoopdProcess(environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1"])
        #expect(try #require(notifications.next()).contains("READY=1"))
        #expect(notifications.next() == "WATCHDOG=1")
        // The test reads no more: the queue fills, and loopd must not wait for it.
        Thread.sleep(forTimeInterval: 0.3)
        UDPSender(port: loopd.port).send("after:1|c")
        try loopd.waitForLines(1)
        #expect(loopd.signal(SIGTERM) < 5 && loopd.process.terminationStatus == 0)
    }

    @Test func aWatchdogForAnotherProcessIsNotPingedAndNoSocketChangesNothing() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-notify-\(UUID().uuidString.prefix(8))"
        ).path
        defer { unlink(path) }
        let notifications = try NotifySocket(path: path)
        let loopd = try LoopdProcess(
            environment: ["NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"])
        #expect(try #require(notifications.next()).contains("READY=1"))
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(notifications.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        #expect(notifications.next() == nil, "the watchdog is another process's")
        loopd.signal(SIGTERM)
        // A NOTIFY_SOCKET that names nothing loopd can use: it runs as if it were not set, and
        // says so.
        let plain = try LoopdProcess(environment: ["NOTIFY_SOCKET": "relative/path"])
        try plain.waitForLog("NOTIFY_SOCKET names no socket loopd can use")
        UDPSender(port: plain.port).send("x:1|c")
        try plain.waitForLines(1)
        #expect(plain.signal(SIGTERM) < 5 && plain.process.terminationStatus == 0)
    }

    @Test func prometheusServesTheLastFlushWithCumulativeCounters() throws {
        let loopd = try LoopdProcess(["--prometheus", "127.0.0.1:0"])
        let line = try loopd.waitForLog("serving Prometheus metrics at http://")
        let port = Int(line.split(separator: ":").last!.split(separator: "/").first!)!
        UDPSender(port: loopd.port).send("web.hits:2|c|#code:200\nweb.time:5|ms")
        try loopd.waitForLines(2)
        usleep(300_000)  // a later flush: the counter is cumulative, not the interval's 0
        let client = try TCPClient(port: port)
        client.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = String(decoding: client.readToEnd().bytes, as: UTF8.self)
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(response.contains("\nweb_hits_total{code=\"200\"} 2\n"))
        #expect(response.contains("# TYPE web_time_seconds histogram"))
        #expect(response.contains("\nweb_time_seconds_bucket{le=\"0.005\"} 1\n"))
        #expect(response.contains("\nweb_time_seconds_count 1\n"))
        let missing = try TCPClient(port: port)
        missing.send("GET / HTTP/1.1\r\n\r\n")
        #expect(String(decoding: missing.readToEnd().bytes, as: UTF8.self).hasPrefix("HTTP/1.1 404"))
        // HEAD: the head of GET, then the connection closes with no body.
        let head = try TCPClient(port: port)
        head.send("HEAD /metrics HTTP/1.1\r\n\r\n")
        let headResponse = String(decoding: head.readToEnd().bytes, as: UTF8.self)
        #expect(headResponse.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(headResponse.hasSuffix("Connection: close\r\n\r\n"))
        for route in ["/-/healthy", "/-/ready"] {
            let client = try TCPClient(port: port)
            client.send("GET \(route) HTTP/1.1\r\n\r\n")
            #expect(
                String(decoding: client.readToEnd().bytes, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"), "\(route)")
        }
        loopd.signal(SIGTERM)
        #expect(!loopd.log().contains("ThreadSanitizer"), "clean when built with --sanitize=thread")
    }

    /// A config file in a fresh folder, removed with it.
    final class ConfigFolder {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "loopd-config-\(UUID().uuidString)")
        var path: String { directory.appendingPathComponent("loopd.yaml").path }

        init() throws { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }

        deinit { try? FileManager.default.removeItem(at: directory) }

        /// Replaces the file's text, at once (rename over the old file).
        func write(_ text: String) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    /// A config file whose rules map `load.<key>` to `<name>{key}`.
    static func loadConfig(_ name: String) -> String {
        "mappings:\n  - match: load.*\n    name: \(name)\n    labels:\n      key: $1\n  - match: noise.*\n    action: drop\n"
    }

    @Test func aReloadWhileClientsSendLosesNothingAndABadFileKeepsTheRunningRules() throws {
        let config = try ConfigFolder()
        try config.write(Self.loadConfig("first"))
        let loopd = try LoopdProcess(["--config", config.path, "--prometheus", "127.0.0.1:0"], flushInterval: 0.05)
        let line = try loopd.waitForLog("serving Prometheus metrics at http://")
        let httpPort = Int(line.split(separator: ":").last!.split(separator: "/").first!)!
        let udp = UDPSender(port: loopd.port)
        // The loop runs (and handles signals) once it has counted a line.
        udp.send("noise.ready:1|c")
        try loopd.waitForLines(1)
        var lines = 0.0
        var applied = 0.0
        var refused = 0.0
        var signalled = 0.0
        for round in 0..<400 {
            var datagram = ""
            for key in 0..<10 { datagram += "load.k\(key % 3):1|c\n" }
            datagram += "noise.x:1|c\n"
            udp.send(datagram)
            lines += 11
            if round % 50 == 49 {
                // Alternately: new rules by SIGHUP, a broken file by SIGHUP, new rules by POST.
                // A signal is handled when the loop gets to it: wait for its log line before the
                // file changes again.
                func reloaded(_ text: String, count: Double) throws {
                    let deadline = Date().addingTimeInterval(20)
                    while Double(loopd.log().components(separatedBy: text).count - 1) < count {
                        guard Date() < deadline else { throw LoopdTestError.missing("\(text) × \(count)") }
                        usleep(2_000)
                    }
                }
                switch round / 50 % 3 {
                case 0:
                    try config.write(Self.loadConfig("by_signal\(round)"))
                    loopd.signal(SIGHUP)
                    applied += 1
                    signalled += 1
                    try reloaded("SIGHUP: applied", count: signalled)
                case 1:
                    try config.write("mappings:\n  - match: [\n")
                    loopd.signal(SIGHUP)
                    refused += 1
                    try reloaded("the config file is refused", count: refused)
                default:
                    try config.write(Self.loadConfig("by_post\(round)"))
                    let client = try TCPClient(port: httpPort)
                    client.send("POST /-/reload HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                    let response = String(decoding: client.readToEnd().bytes, as: UTF8.self)
                    #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(response)")
                    #expect(response.contains("applied 2 mapping rules"))
                    applied += 1
                }
            }
        }
        try loopd.waitForLines(lines)
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(loopd.process.terminationStatus == 0)
        let totals = Totals(try loopd.flushes())
        let mapped = totals.counters.filter { !$0.key.hasPrefix("loopd.") }
        #expect(mapped.values.reduce(0, +) == 4000, "every line counted once, under one rule set or another")
        #expect(mapped.keys.allSatisfy { $0.contains("|#key:k") }, "\(mapped.keys.sorted())")
        #expect(mapped.keys.contains { $0.hasPrefix("first|") } && mapped.keys.contains { $0.hasPrefix("by_post") })
        #expect(totals.counters["loopd.mapping_dropped_lines"] == 401, "400 and the first line")
        #expect(totals.counters["loopd.config_reloads"] == applied)
        #expect(totals.counters["loopd.config_reloads_refused"] == refused)
        #expect(loopd.log().contains("the config file is refused, the running settings stay: "))
        #expect(!loopd.log().contains("ThreadSanitizer"), "clean when built with --sanitize=thread")
    }

    @Test func aReloadNamesTheSettingsThatNeedARestart() throws {
        let config = try ConfigFolder()
        try config.write("max-series: 1000\npercentiles: [50]\n")
        let loopd = try LoopdProcess(["--config", config.path])
        // The loop runs (and handles signals) once it has counted a line.
        UDPSender(port: loopd.port).send("ready:1|c")
        try loopd.waitForLines(1)
        try config.write("max-series: 2000\npercentiles: [50, 99]\n")
        loopd.signal(SIGHUP)
        let line = try loopd.waitForLog("SIGHUP: applied")
        #expect(line.contains("percentiles 50,99"))
        #expect(line.contains("changed but applied only at a restart: max-series"))
        UDPSender(port: loopd.port).send("t:1|ms")
        try loopd.waitForLines(2)
        loopd.signal(SIGTERM)
        let timers = try loopd.flushes().flatMap { $0["timers"] as? [[String: Any]] ?? [] }
        #expect(timers.contains { $0["p99"] != nil }, "the reloaded percentiles")
    }

    @Test(arguments: [GraphiteFormat.Layout.loopd, .etsy])
    func theFinalFlushReachesGraphiteAtSIGTERM(layout: GraphiteFormat.Layout) throws {
        // The JSON line's completion ended the shutdown before Graphite was handed the flush.
        let carbon = try FakeReceiver()
        let loopd = try LoopdProcess(
            ["--graphite", "127.0.0.1:\(carbon.port)", "--graphite-layout", layout.rawValue], flushInterval: 60)
        let connection = carbon.accept()
        #expect(connection >= 0)
        defer { close(connection) }
        UDPSender(port: loopd.port).send("fin:1:2:3:4|c")
        usleep(100_000)
        #expect(loopd.signal(SIGTERM) < 5)
        let received = FakeReceiver.drain(connection, quiet: 1)
        #expect(
            received.contains(layout == .etsy ? "stats_counts.fin 10 " : "\nfin 10 ") || received.hasPrefix("fin 10 "))
    }

    @Test func aConfigFileThatIsNotARegularFileIsRefusedAndReadOnce() throws {
        let config = try ConfigFolder()
        #expect(mkfifo(config.path, 0o600) == 0)
        // A FIFO would block the loop on open and be read empty a second time.
        let loopd = try LoopdProcess(["--config", config.path], waitForListening: false)
        loopd.waitForExit(seconds: 10)
        #expect(!loopd.process.isRunning, "not waiting for a writer")
        #expect(loopd.log().contains("\(config.path): not a regular file"))
    }

    @Test func aSIGHUPWhileLoopdStartsDoesNotEndIt() throws {
        // Sent as soon as loopd says it listens, before its loop handles signals: SIGHUP's
        // default action ended the process (a `systemctl reload` during the start).
        for _ in 0..<5 {
            let loopd = try LoopdProcess()
            loopd.signal(SIGHUP)
            UDPSender(port: loopd.port).send("alive:1|c")
            try loopd.waitForLines(1)
            #expect(loopd.process.isRunning)
            #expect(loopd.signal(SIGTERM) < 5 && loopd.process.terminationStatus == 0)
        }
    }

    @Test func SIGTERMWhileSendersKeepSendingExitsWithoutWaitingForThemToStop() throws {
        // Each socket's drain at SIGTERM reads what its buffer held, not what keeps coming: it
        // went on as long as the senders did.
        // A 1 MiB buffer: what a drain reads stays small even for a loopd built with a sanitizer,
        // which reads far slower than senders send.
        let loopd = try LoopdProcess(
            ["--readers", "\(min(2, Self.cores))", "--udp-buffer", "\(1 << 20)"], flushInterval: 0.2)
        let port = loopd.port
        let stop = Box(false)
        let senders = (0..<4).map { _ in
            Thread {
                let sender = UDPSender(port: port)
                let datagram = Array(String(repeating: "blast:1|c\n", count: 20).utf8)
                let deadline = Date().addingTimeInterval(20)
                while !stop.value && Date() < deadline { sender.send(datagram) }
            }
        }
        for sender in senders { sender.start() }
        defer { stop.value = true }
        try loopd.waitForLines(1000)
        usleep(300_000)
        let exit = loopd.signal(SIGTERM)
        stop.value = true
        #expect(exit < 12, "exited \(exit) s after SIGTERM, while senders went on for up to 20 s")
        loopd.waitForExit()
        try #require(!loopd.process.isRunning, "loopd did not exit")
        // A sanitizer's report ends the process with status 66: its tail says what it saw.
        #expect(loopd.process.terminationStatus == 0, "\(loopd.stderrText.suffix(6000))")
        let totals = Totals(try loopd.flushes())
        #expect(totals.counters["blast"] == totals.counters["loopd.lines_received"], "every line read is counted")
    }

    static var cores: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    @Test func aBadConfigFileAtStartIsRefusedNamingTheLine() throws {
        let config = try ConfigFolder()
        // The flush interval is a flag too here (LoopdProcess gives one): a bad value in the
        // file is refused even where a flag overrides it.
        try config.write("max-series: 100\nflush-interval: soon\n")
        let loopd = try LoopdProcess(["--config", config.path], waitForListening: false)
        loopd.waitForExit()
        #expect(loopd.process.terminationStatus == 64)
        #expect(loopd.log().contains("\(config.path):2: flush-interval: expected a number, got \"soon\""))
    }

    @Test func aGraphiteHostThatDoesNotResolveIsRetriedWithoutStoppingLoopd() throws {
        let loopd = try LoopdProcess(["--graphite", "no-such-host.invalid:2003"])
        try loopd.waitForLog("cannot connect to Graphite at no-such-host.invalid:2003: ")
        UDPSender(port: loopd.port).send("still.working:1|c")
        try loopd.waitForLines(1)
        #expect(loopd.signal(SIGTERM) < 5)
        #expect(Totals(try loopd.flushes()).counters["still.working"] == 1)
    }

    @Test func graphiteReceivesFlushesAfterTheReceiverComesUp() throws {
        // A port that nothing listens on yet: loopd queues and retries.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        // By name: resolved at each attempt, the failed ones and the one that connects.
        let loopd = try LoopdProcess(["--graphite", "localhost:\(port)"])
        UDPSender(port: loopd.port).send("g.count:7|c")
        try loopd.waitForLines(1)
        try loopd.waitForLog("cannot connect to Graphite")
        #expect(listen(listener, 4) == 0)
        let connection = accept(listener, nil, nil)
        #expect(connection >= 0)
        defer { close(connection) }
        var received = ""
        var buffer = [UInt8](repeating: 0, count: 65536)
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while !received.contains("g.count 7 ") {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += String(decoding: buffer[0..<count], as: UTF8.self)
        }
        #expect(received.contains("g.count 7 "), "the queued flush arrives")
        #expect(received.contains("loopd.lines_received "))
        loopd.signal(SIGTERM)
        #expect(loopd.process.terminationStatus == 0)
        #expect(!loopd.log().contains("ThreadSanitizer"), "clean when built with --sanitize=thread")
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built `loopd` binary, run as a child process on a loopback port the system chooses.
final class LoopdProcess: @unchecked Sendable {  // Immutable after init but for the child's own state.
    let process: ChildProcess
    let output: URL
    let directory: URL
    /// What loopd wrote to standard error so far (its log, and a sanitizer's report).
    var stderrText: String { process.standardErrorText }
    private(set) var port = 0

    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("loopd")
    }

    /// Starts loopd with `arguments` (plus --port 0 and an --output in a fresh folder unless
    /// given) and waits for its "listening on" log line. It inherits this process' environment
    /// with `environment` added and the variables named in `unsetting` taken out.
    init(
        _ arguments: [String] = [], flushInterval: Double = 0.1, waitForListening: Bool = true,
        standardOutput: ChildProcess.Stream = .null, environment: [String: String] = [:],
        unsetting: [String] = []
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("loopd-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        output = directory.appendingPathComponent("flushes.jsonl")
        var all = arguments
        if !all.contains("--port") { all += ["--port", "0"] }
        if !all.contains("--output") { all += ["--output", output.path] }
        if !all.contains("--flush-interval") { all += ["--flush-interval", "\(flushInterval)"] }
        var variables: [String: String]?
        if !environment.isEmpty || !unsetting.isEmpty {
            variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            for name in unsetting { variables?[name] = nil }
        }
        do {
            process = try ChildProcess(
                executable: Self.binary.path, arguments: all, environment: variables, standardOutput: standardOutput,
                standardError: .captured)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        if waitForListening {
            let line = try waitForLog("listening on ")
            let address = line.components(separatedBy: "listening on ")[1].split(separator: " ")[0]
            port = Int(address.split(separator: ":").last!)!
        }
    }

    deinit {
        // The child, if still running, is killed and reaped when `process` goes.
        try? FileManager.default.removeItem(at: directory)
    }

    /// Reads loopd's log until a line containing `text`; returns that line.
    @discardableResult
    func waitForLog(_ text: String, seconds: Double = 20) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = stderrText.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            if !process.isRunning && Date() > deadline.addingTimeInterval(-seconds + 1) { break }
            usleep(5000)
        }
        throw LoopdTestError.missing("a log line containing \(text.debugDescription); log so far:\n\(stderrText)")
    }

    /// Everything loopd logged so far.
    func log() -> String {
        // Once loopd has exited, all it wrote: its standard error ends with it.
        if !process.isRunning { process.waitForCapturedEnd(seconds: 5) } else { usleep(50_000) }
        return stderrText
    }

    /// Sends `signal` and, for SIGTERM and SIGINT, waits for the exit; returns the seconds it took.
    @discardableResult
    func signal(_ signal: Int32) -> Double {
        let start = Date()
        kill(process.processIdentifier, signal)
        if signal == SIGTERM || signal == SIGINT { waitForExit() }
        return Date().timeIntervalSince(start)
    }

    /// loopd's resident memory, in bytes (0 once it has exited).
    var residentBytes: Int {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/statm", encoding: .utf8)
        else { return 0 }
        let fields = text.split(separator: " ")
        return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The most resident memory loopd has had (`VmHWM`), in bytes; nil once it has exited.
    var peakResidentBytes: Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kibibytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kibibytes << 10
    }

    /// Waits for loopd's exit; a test issue if it has not exited within `seconds`.
    func waitForExit(seconds: Double = 20) {
        if !process.waitForExit(seconds: seconds) { Issue.record("loopd did not exit within \(seconds) s") }
    }

    /// The flushes written so far, parsed.
    func flushes(_ file: URL? = nil) throws -> [[String: Any]] {
        guard let data = try? Data(contentsOf: file ?? output) else { return [] }
        // A line still being written (no newline yet) is not a flush yet.
        var text = String(decoding: data, as: UTF8.self)
        if let end = text.lastIndex(of: "\n") { text = String(text[...end]) } else { text = "" }
        return try text.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
    }

    /// The last flush written, parsed: for outputs too large to read whole. Reads the file's
    /// last 32 MiB, which must hold the last flush.
    func lastFlush() throws -> [String: Any]? {
        guard let file = try? FileHandle(forReadingFrom: output) else { return nil }
        defer { try? file.close() }
        let size = try file.seekToEnd()
        try file.seek(toOffset: size > (32 << 20) ? size - (32 << 20) : 0)
        guard let data = try file.readToEnd() else { return nil }
        let lines = data.split(separator: UInt8(ascii: "\n"))
        // A line still being written (no newline yet) is not a flush yet.
        guard let last = data.last == UInt8(ascii: "\n") ? lines.last : lines.dropLast().last else { return nil }
        return try #require(try JSONSerialization.jsonObject(with: Data(last)) as? [String: Any])
    }

    /// Waits until the flushes report `lines` lines received in all.
    func waitForLines(_ lines: Double, seconds: Double = 20) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try Totals(flushes()).counters["loopd.lines_received"] ?? 0 >= lines { return }
            usleep(20_000)
        }
        throw LoopdTestError.missing("\(lines) lines received; got \(try Totals(flushes()).counters)")
    }
}

enum LoopdTestError: Error { case missing(String) }

/// Totals over a run's flushes: counters and timer counts summed, the last gauge, sets summed.
struct Totals {
    var counters: [String: Double] = [:]
    var gauges: [String: Double] = [:]
    var timerCounts: [String: Double] = [:]
    var timerSamples: [String: Double] = [:]
    var timerSums: [String: Double] = [:]
    var sets: [String: Double] = [:]

    init(_ flushes: [[String: Any]]) {
        func key(_ series: [String: Any]) -> String {
            let tags = series["tags"] as? [String] ?? []
            return (series["name"] as! String) + (tags.isEmpty ? "" : "|#" + tags.joined(separator: ","))
        }
        for flush in flushes {
            for series in flush["counters"] as? [[String: Any]] ?? [] {
                counters[key(series), default: 0] += series["value"] as! Double
            }
            for series in flush["gauges"] as? [[String: Any]] ?? [] { gauges[key(series)] = series["value"] as? Double }
            for series in flush["timers"] as? [[String: Any]] ?? [] {
                timerCounts[key(series), default: 0] += series["count"] as! Double
                timerSamples[key(series), default: 0] += series["samples"] as! Double
                timerSums[key(series), default: 0] += series["sum"] as! Double
            }
            for series in flush["sets"] as? [[String: Any]] ?? [] {
                sets[key(series), default: 0] += series["count"] as! Double
            }
        }
    }
}

/// A UDP socket for sending to loopd.
final class UDPSender {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    let port: Int
    init(port: Int) { self.port = port }
    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let sent = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        precondition(sent == bytes.count, "sendto failed: \(errno)")
    }

    func send(_ text: String) { send(Array(text.utf8)) }
}

/// A TCP connection to a loopback port.
final class TCPClient {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)

    init(port: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else { throw LoopdTestError.missing("a TCP connection to port \(port): errno \(errno)") }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            bytes = bytes.dropFirst(sent)
        }
    }

    /// Reads until the peer closes or `seconds` pass; returns what arrived and whether it closed.
    func readToEnd(seconds: Double = 10) -> (bytes: [UInt8], closed: Bool) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { return (received, true) }
            if count < 0 { return (received, false) }
            received += buffer[0..<count]
        }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }
}

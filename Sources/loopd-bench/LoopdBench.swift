import ArgumentParser
import CLoadGen
import Foundation
@_spi(Testing) import LoopdCore

#if canImport(Glibc)
    import Glibc
#endif

/// `loopd-bench`: a StatsD load generator, and a runner that puts loopd and collectd's StatsD
/// plugin through the same load side by side. Loopback only; every run is bounded in time.
@main
struct LoopdBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loopd-bench",
        abstract: "Load loopd and collectd with StatsD counters and measure loss, memory and flush time.",
        subcommands: [Load.self, Compare.self, Memory.self, Soak.self, Parse.self])
}

// MARK: The load

/// Deterministic StatsD counter traffic: `load.key.<k>:1|c` for k in 0..<keys, in order, packed
/// `perDatagram` to a datagram, sent with sendmmsg at a steady rate.
struct LoadGenerator {
    let datagrams: [[UInt8]]
    let perDatagram: Int

    /// Datagrams of `perDatagram` lines over `keys` keys: counters of 1, or with `mixed`, a
    /// counter, a gauge, a timer and a histogram in turn (values that vary from line to line);
    /// with `tagged`, each line with two DogStatsD tags.
    init(keys: Int, perDatagram: Int, mixed: Bool = false, tagged: Bool = false) {
        self.perDatagram = perDatagram
        // Enough distinct datagrams to cycle through every key evenly.
        var count = keys
        while count % perDatagram != 0 { count += keys }
        if mixed {
            while count % 4 != 0 || count % perDatagram != 0 { count += keys }
        }
        var datagrams: [[UInt8]] = []
        for first in stride(from: 0, to: count, by: perDatagram) {
            var bytes: [UInt8] = []
            for line in first..<(first + perDatagram) {
                let key = line % keys
                let tags = tagged ? "|#env:prod,host:h\(key % 10)" : ""
                guard mixed else {
                    bytes += Array("load.key.\(key):1|c\(tags)\n".utf8)
                    continue
                }
                let value = (line * 37) % 1000
                switch key % 4 {
                case 0: bytes += Array("load.count.\(key):1|c\(tags)\n".utf8)
                case 1: bytes += Array("load.gauge.\(key):\(value)|g\(tags)\n".utf8)
                case 2: bytes += Array("load.time.\(key):\(value).\(line % 10)|ms\(tags)\n".utf8)
                default: bytes += Array("load.size.\(key):\(value)|h\(tags)\n".utf8)
                }
            }
            datagrams.append(bytes)
        }
        self.datagrams = datagrams
    }

    /// Sends `rate` metrics per second (0: as fast as possible) to 127.0.0.1:`port` for
    /// `seconds`; returns the metrics sent.
    /// Sends at `rate` metrics per second (0: as fast as possible) for `seconds`, from `sockets`
    /// sockets in turn, one batch each: each has its own source port, so that a server with
    /// several `SO_REUSEPORT` sockets gets them spread over its sockets.
    func run(port: Int, rate: Double, seconds: Double, sockets: Int = 1) -> Int {
        let fds = (0..<sockets).map { _ in
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var buffer: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, 4)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            return fd
        }
        defer { for fd in fds { close(fd) } }
        var turn = 0
        let pointers = datagrams.map { bytes in
            let copy = UnsafeMutableRawPointer.allocate(byteCount: bytes.count, alignment: 1)
            copy.copyMemory(from: bytes, byteCount: bytes.count)
            return UnsafeRawPointer(copy)
        }
        defer { for pointer in pointers { pointer.deallocate() } }
        let lengths = datagrams.map(\.count)
        let datagramRate = rate / Double(perDatagram)
        let start = now()
        var sent = 0
        var next = 0
        var batchPointers = [UnsafeRawPointer?](repeating: nil, count: 256)
        var batchLengths = [Int](repeating: 0, count: 256)
        while true {
            let elapsed = now() - start
            if elapsed >= seconds { break }
            var due = rate > 0 ? Int(elapsed * datagramRate) - sent : 256
            if due <= 0 {
                usleep(50)
                continue
            }
            due = min(due, 256)
            for i in 0..<due {
                batchPointers[i] = pointers[(next + i) % pointers.count]
                batchLengths[i] = lengths[(next + i) % pointers.count]
            }
            let fd = fds[turn]
            turn = (turn + 1) % fds.count
            let result = batchPointers.withUnsafeBufferPointer { p in
                batchLengths.withUnsafeBufferPointer { l in loadgen_send(fd, p.baseAddress, l.baseAddress, UInt32(due))
                }
            }
            if result > 0 {
                sent += Int(result)
                next = (next + Int(result)) % pointers.count
            }
        }
        // Keys are not sent equally often unless the run ends on a whole cycle; the checks
        // compare totals, so that does not matter.
        return sent * perDatagram
    }
}

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send StatsD counters to a loopback port.")
    @Option var port: Int
    @Option(help: "Metrics per second (0: as fast as possible).") var rate: Double = 100_000
    @Option(name: .customLong("per-datagram")) var perDatagram = 20
    @Option var seconds = 10.0
    @Option var keys = 1000
    @Option(help: "Sockets to send from, in turn (each its own source port).") var sockets = 1

    func validate() throws {
        guard (1...256).contains(sockets) else { throw ValidationError("--sockets must be in 1...256, got \(sockets)") }
        guard (1...65535).contains(port) else { throw ValidationError("--port must be in 1...65535, got \(port)") }
        guard rate >= 0 else { throw ValidationError("--rate must be >= 0, got \(rate)") }
        guard (1...200).contains(perDatagram) else {
            throw ValidationError("--per-datagram must be in 1...200, got \(perDatagram)")
        }
        guard seconds > 0 && seconds <= 600 else {
            throw ValidationError("--seconds must be in (0, 600], got \(seconds)")
        }
        guard keys > 0 else { throw ValidationError("--keys must be > 0, got \(keys)") }
    }

    func run() {
        let sent = LoadGenerator(keys: keys, perDatagram: perDatagram).run(
            port: port, rate: rate, seconds: seconds, sockets: sockets)
        print("sent \(sent) metrics in \(seconds) s (\(Int(Double(sent) / seconds))/s)")
    }
}

// MARK: The servers

/// A StatsD server under test: started fresh for each run, stopped, and asked what it counted.
protocol Server {
    var name: String { get }
    /// Starts on `port`; returns when it receives.
    mutating func start(port: Int, keys: Int) throws
    /// Stops and returns the `load.key.*` counter total it recorded, with its own drop count if it has one.
    mutating func stop() throws -> (received: Int, kernelDrops: Int?, flushMilliseconds: [Double])
    /// The bytes its series table held at its last flush, if it says.
    var tableBytes: Int? { get }
    /// The server's process while it runs.
    var process: Process? { get }
}

extension Server {
    /// The process' resident memory now, in bytes.
    func residentBytes() -> Int { process.map { residentMemory(ofProcess: $0.processIdentifier) } ?? 0 }

    /// The most resident memory the server has had, in bytes.
    func peakResidentBytes() -> Int {
        process.map { residentMemory(ofProcess: $0.processIdentifier, peak: true) } ?? 0
    }

    /// The process' minor page faults and CPU time (user + system, in clock ticks) so far.
    func faultsAndTicks() -> (minorFaults: Int, ticks: Int) {
        process.map { processFaultsAndTicks($0.processIdentifier) } ?? (0, 0)
    }
}

func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            bind(fd, pointer, length)
            return getsockname(fd, pointer, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The resident memory of process `pid`, in bytes (0 if it is gone).
///
/// - Parameter peak: the most it has been (`VmHWM`) instead of what it is now (`VmRSS`).
func residentMemory(ofProcess pid: Int32, peak: Bool = false) -> Int {
    let field = peak ? "VmHWM:" : "VmRSS:"
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field) })
    else { return 0 }
    return (Int(line.split(separator: " ")[1]) ?? 0) * 1024
}

/// The minor page faults and the CPU time (user + system, in clock ticks) of process `pid` so
/// far, from /proc/PID/stat; zeros if it is gone.
func processFaultsAndTicks(_ pid: Int32) -> (minorFaults: Int, ticks: Int) {
    // The fields after the command's closing parenthesis, from the state (field 3) on.
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return (0, 0) }
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    // minflt is field 10, utime 14, stime 15: 7, 11 and 12 after the state.
    guard fields.count > 12, let faults = Int(fields[7]), let user = Int(fields[11]), let system = Int(fields[12])
    else { return (0, 0) }
    return (faults, user + system)
}

/// Waits until something receives on UDP `port` (it appears in /proc/net/udp).
func waitForUDP(_ port: Int, seconds: Double = 20) throws {
    let hex = String(format: ":%04X ", port)
    let deadline = now() + seconds
    while now() < deadline {
        if let table = try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8), table.contains(hex) { return }
        usleep(20_000)
    }
    throw ValidationError("nothing listens on UDP port \(port) after \(seconds) s")
}

struct LoopdServer: Server {
    let binary: String
    var flushInterval: Double
    var udpBuffer: Int
    /// `--readers`; nil: loopd's default.
    var readers: Int? = nil
    var name: String { "loopd" }
    var process: Process?
    var directory = ""
    var tableBytes: Int?

    mutating func start(port: Int, keys: Int) throws {
        directory = NSTemporaryDirectory() + "loopd-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments =
            [
                "--port", "\(port)", "--flush-interval", "\(flushInterval)", "--output", directory + "/flushes.jsonl",
                "--udp-buffer", "\(udpBuffer)", "--max-series", "\(max(keys * 2, 1000))", "--log-level", "warning",
            ] + (readers.map { ["--readers", "\($0)"] } ?? [])
        try process.run()
        self.process = process
        try waitForUDP(port)
    }

    mutating func stop() throws -> (received: Int, kernelDrops: Int?, flushMilliseconds: [Double]) {
        guard let process else { return (0, nil, []) }
        process.terminate()
        process.waitUntilExit()
        var received = 0.0
        var drops = 0.0
        var flushes: [Double] = []
        let text = try String(contentsOfFile: directory + "/flushes.jsonl", encoding: .utf8)
        for line in text.split(separator: "\n") {
            let flush = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            for series in flush["counters"] as! [[String: Any]] {
                let name = series["name"] as! String
                if name.hasPrefix("load.key.") { received += series["value"] as! Double }
                if name == "loopd.udp_kernel_drops" { drops += series["value"] as! Double }
            }
            for series in flush["gauges"] as! [[String: Any]] {
                if series["name"] as? String == "loopd.flush_duration_seconds" {
                    flushes.append(series["value"] as! Double * 1000)
                }
                if series["name"] as? String == "loopd.table_bytes" { tableBytes = Int(series["value"] as! Double) }
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        self.process = nil
        // The first flush reports the flush before it, which did not exist: drop its 0.
        return (Int(received), Int(drops), Array(flushes.dropFirst()))
    }
}

/// collectd with its StatsD plugin, writing counters (cumulative `derive` values) with the CSV plugin.
struct CollectdServer: Server {
    var name: String { "collectd" }
    var tableBytes: Int? { nil }
    var process: Process?
    var directory = ""

    mutating func start(port: Int, keys: Int) throws {
        directory = NSTemporaryDirectory() + "collectd-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let config = """
            Hostname "bench"
            FQDNLookup false
            Interval 1
            BaseDir "\(directory)"
            PIDFile "\(directory)/collectd.pid"
            PluginDir "/usr/lib/collectd"
            TypesDB "/usr/share/collectd/types.db"
            LoadPlugin statsd
            LoadPlugin csv
            <Plugin statsd>
              Host "127.0.0.1"
              Port "\(port)"
              DeleteCounters false
            </Plugin>
            <Plugin csv>
              DataDir "\(directory)/csv"
              StoreRates false
            </Plugin>

            """
        try config.write(toFile: directory + "/collectd.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/collectd")
        process.arguments = ["-f", "-C", directory + "/collectd.conf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        try waitForUDP(port)
    }

    mutating func stop() throws -> (received: Int, kernelDrops: Int?, flushMilliseconds: [Double]) {
        guard let process else { return (0, nil, []) }
        usleep(2_500_000)  // Two intervals, for the last values to reach the CSV files.
        process.terminate()
        process.waitUntilExit()
        var received = 0.0
        let folder = directory + "/csv/bench/statsd"
        for file in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        where file.hasPrefix("derive-load.key.") {
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            if let last = text.split(separator: "\n").last, let value = Double(last.split(separator: ",").last ?? "") {
                received += value
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        self.process = nil
        return (Int(received), nil, [])
    }
}

// MARK: Compare

struct Point: ExpressibleByArgument, CustomStringConvertible {
    var rate: Double
    var perDatagram: Int
    init?(argument: String) {
        let parts = argument.split(separator: "x")
        guard parts.count == 2, let rate = Double(parts[0]), let per = Int(parts[1]), rate >= 0, per > 0 else {
            return nil
        }
        (self.rate, perDatagram) = (rate, per)
    }
    var description: String {
        rate == 0 ? "full blast, \(perDatagram)/datagram" : "\(Int(rate))/s, \(perDatagram)/datagram"
    }
}

struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run loopd and collectd through the same loads; print loss per run as a Markdown table.")
    @Option(help: "The loopd binary.") var loopd: String
    @Option(parsing: .upToNextOption, help: "Loads as RATExPER_DATAGRAM (rate 0: full blast).")
    var points: [Point] = [Point(argument: "1000000x20")!, Point(argument: "150000x1")!]
    @Option(parsing: .upToNextOption) var targets: [String] = ["loopd", "collectd"]
    @Option var runs = 3
    @Option var seconds = 10.0
    @Option var keys = 1000
    @Option(name: .customLong("flush-interval")) var flushInterval = 1.0
    @Option(name: .customLong("udp-buffer")) var udpBuffer = 8 << 20
    @Option(help: "loopd's --readers (default: loopd's own, one per core).") var readers: Int?
    @Option(help: "Sockets the load is sent from, in turn (each its own source port).") var sockets = 1

    func validate() throws {
        guard (1...256).contains(sockets) else { throw ValidationError("--sockets must be in 1...256, got \(sockets)") }
        guard (1...10).contains(runs) else { throw ValidationError("--runs must be in 1...10, got \(runs)") }
        guard seconds > 0 && seconds <= 120 else {
            throw ValidationError("--seconds must be in (0, 120], got \(seconds)")
        }
        guard targets.allSatisfy({ $0 == "loopd" || $0 == "collectd" }) else {
            throw ValidationError("--targets takes loopd and collectd, got \(targets)")
        }
    }

    func run() throws {
        print("| target | load | run | sent | received | lost | received/s | kernel drops | flush p99 (ms) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for point in points {
            let generator = LoadGenerator(keys: keys, perDatagram: point.perDatagram)
            for target in targets {
                for run in 1...runs {
                    var server: any Server =
                        target == "loopd"
                        ? LoopdServer(
                            binary: loopd, flushInterval: flushInterval, udpBuffer: udpBuffer, readers: readers)
                        : CollectdServer()
                    let port = freePort()
                    try server.start(port: port, keys: keys)
                    let sent = generator.run(port: port, rate: point.rate, seconds: seconds, sockets: sockets)
                    usleep(300_000)
                    let result = try server.stop()
                    let flushes = result.flushMilliseconds.sorted()
                    let p99 =
                        flushes.isEmpty
                        ? "" : String(format: "%.2f", flushes[min(flushes.count - 1, flushes.count * 99 / 100)])
                    print(
                        "| \(target) | \(point) | \(run) | \(sent) | \(result.received) | \(sent - result.received) | \(Int(Double(result.received) / seconds)) | \(result.kernelDrops.map(String.init) ?? "") | \(p99) |"
                    )
                    fflush(nil)
                }
            }
        }
    }
}

// MARK: Memory

struct Memory: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Resident memory of loopd (and collectd) holding N counter series, flushing every second.")
    @Option(help: "The loopd binary.") var loopd: String
    @Option(parsing: .upToNextOption) var series: [Int] = [10_000, 100_000]
    @Option(parsing: .upToNextOption) var targets: [String] = ["loopd", "collectd"]
    @Option var seconds = 10.0
    @Option(help: "loopd's --readers (default: loopd's own, one per core).") var readers: Int?

    func run() throws {
        print(
            "| target | series | resident at start (MiB) | resident at most (MiB, `VmHWM`) | resident bytes per series over the empty process | table bytes per series | flush, median and longest (ms) | CPU per second of load after the first 2 (ms) | minor page faults per second of load after the first 2 |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for target in targets {
            for count in series {
                var server: any Server =
                    target == "loopd"
                    ? LoopdServer(binary: loopd, flushInterval: 1, udpBuffer: 8 << 20, readers: readers)
                    : CollectdServer()
                let port = freePort()
                try server.start(port: port, keys: count)
                usleep(300_000)
                let empty = server.residentBytes()
                // Every series gets a line each second: 20 per datagram, at count metrics/s.
                let generator = LoadGenerator(keys: count, perDatagram: 20)
                var peak = 0
                let start = now()
                // The first 2 s create the series and grow the tables; what follows is the
                // steady state, a flush a second.
                var steady: (at: Double, minorFaults: Int, ticks: Int)?
                while now() < start + seconds {
                    _ = generator.run(port: port, rate: Double(count), seconds: 1)
                    peak = max(peak, server.residentBytes())
                    if steady == nil && now() >= start + 2 {
                        let counts = server.faultsAndTicks()
                        steady = (now(), counts.minorFaults, counts.ticks)
                    }
                }
                let ended = (now(), server.faultsAndTicks())
                var steadyCosts = ("", "")
                if let steady, ended.0 > steady.at {
                    let elapsed = ended.0 - steady.at
                    let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
                    steadyCosts = (
                        String(format: "%.0f", Double(ended.1.ticks - steady.ticks) / ticksPerSecond * 1000 / elapsed),
                        String(format: "%.0f", Double(ended.1.minorFaults - steady.minorFaults) / elapsed)
                    )
                }
                // The sampled maximum misses what a flush holds between samples.
                peak = max(peak, server.peakResidentBytes())
                let flushes = try server.stop().flushMilliseconds
                let table = server.tableBytes.map { "\($0 / count)" } ?? ""
                let sorted = flushes.sorted()
                let flushTimes =
                    sorted.isEmpty
                    ? "" : String(format: "%.1f, %.1f", sorted[sorted.count / 2], sorted[sorted.count - 1])
                print(
                    "| \(target) | \(count) | \(String(format: "%.1f", Double(empty) / 1048576)) | \(String(format: "%.1f", Double(peak) / 1048576)) | \((peak - empty) / count) | \(table) | \(flushTimes) | \(steadyCosts.0) | \(steadyCosts.1) |"
                )
                fflush(nil)
            }
        }
    }
}

// MARK: Soak

struct Soak: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A steady load on loopd for minutes: no loss, and resident memory flat after warm-up.")
    @Option(help: "The loopd binary.") var loopd: String
    @Option var minutes = 3.0
    @Option(help: "Metrics per second.") var rate = 200_000.0
    @Option var keys = 10_000
    @Option(name: .customLong("per-datagram")) var perDatagram = 20

    func validate() throws {
        guard minutes > 0 && minutes <= 120 else {
            throw ValidationError("--minutes must be in (0, 120], got \(minutes)")
        }
        guard rate > 0 else { throw ValidationError("--rate must be > 0, got \(rate)") }
    }

    func run() throws {
        var server = LoopdServer(binary: loopd, flushInterval: 1, udpBuffer: 8 << 20)
        let port = freePort()
        try server.start(port: port, keys: keys)
        let generator = LoadGenerator(keys: keys, perDatagram: perDatagram)
        var sent = 0
        var samples: [Int] = []
        let chunks = max(2, Int(minutes * 6))
        print("| minute | resident (MiB) |")
        print("|---:|---:|")
        for chunk in 1...chunks {
            sent += generator.run(port: port, rate: rate, seconds: 10)
            samples.append(server.residentBytes())
            print(
                "| \(String(format: "%.1f", Double(chunk) / 6)) | \(String(format: "%.1f", Double(samples.last!) / 1048576)) |"
            )
            fflush(nil)
        }
        usleep(300_000)
        let result = try server.stop()
        // Warm-up: the first minute (tables and buffers reach their size).
        let settled = samples[min(5, samples.count - 1)]
        let growth = Double(samples.max()! - settled) / Double(settled)
        print(
            "sent \(sent), received \(result.received), lost \(sent - result.received); resident after the first minute \(settled / 1048576) MiB, largest \(samples.max()! / 1048576) MiB (+\(String(format: "%.1f", growth * 100))%)"
        )
        if sent != result.received || growth > 0.10 {
            print("FAILED: the soak expects no loss and resident memory within 10% of its size after the first minute")
            throw ExitCode(1)
        }
    }
}

// MARK: Parse

struct Parse: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Parse and record datagrams of 20 lines (counters over 1,000 keys by default) in this process: ns per line.",
        discussion: """
            Run it under valgrind with two counts (valgrind loopd-bench parse --datagrams 10000, then \
            20000): the same "total heap usage" for both means no allocation per line once the \
            series exist, and the difference in instructions over the lines between is the cost \
            of a line.
            """)
    @Option var datagrams = 200_000
    @Option(help: "Distinct keys.") var keys = 1000
    @Flag(help: "Counters, gauges, timers and histograms in turn, instead of counters only.") var mixed = false
    @Flag(help: "Two DogStatsD tags on every line.") var tagged = false
    @Flag(help: "Every line through the full parse, without the short path of plain lines (to measure it).")
    var fullParse = false

    func validate() throws {
        guard datagrams > 0 else { throw ValidationError("--datagrams must be > 0, got \(datagrams)") }
        guard keys > 0 else { throw ValidationError("--keys must be > 0, got \(keys)") }
    }

    func run() {
        let ingest = Ingest(maxLineLength: 8192, maxSeries: 100_000)
        ingest.usesPlainLines = !fullParse
        let generator = LoadGenerator(keys: keys, perDatagram: 20, mixed: mixed, tagged: tagged)
        let start = now()
        for index in 0..<datagrams {
            generator.datagrams[index % generator.datagrams.count].withUnsafeBytes { ingest.ingest(datagram: $0) }
        }
        let elapsed = now() - start
        print(
            "\(ingest.counts.lines) lines, \(ingest.table.count) series, \(String(format: "%.1f", elapsed / Double(ingest.counts.lines) * 1e9)) ns per line"
        )
    }
}

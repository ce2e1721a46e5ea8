import ArgumentParser
import Logging
import LoopdCore
import ReactiveLoop
import ReactiveLoopUV

#if canImport(Glibc)
    import Glibc
#endif

/// `loopd`: the command line. Parses and checks the flags, then runs a `Daemon` on the process's
/// main thread until SIGTERM or SIGINT.
@main
struct Loopd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loopd",
        abstract: "A StatsD and DogStatsD metrics daemon on a ReactiveLoop event loop.",
        discussion: """
            Receives StatsD lines over UDP and TCP (and a Unix datagram socket with --unix-socket), aggregates them, and every --flush-interval \
            seconds writes a JSON line per flush (--output), sends Graphite plaintext \
            (--graphite) and serves Prometheus' text format (--prometheus). SIGTERM or SIGINT: \
            final flush and exit 0. SIGHUP: reopen the output file. See docs/loopd.md.
            """,
        version: LoopdVersion.string)

    @Option(help: "The address to receive on (a numeric IPv4 or IPv6 address, or localhost).")
    var host = "127.0.0.1"

    // The numeric options parse their value `.unconditional`ly: by default a value that starts
    // with "-" is taken for a flag, and `--port -1` said "Missing value" instead of the range.

    @Option(parsing: .unconditional, help: "The UDP and TCP port to receive on (0: one the system chooses).")
    var port = 8125

    @Option(
        name: .customLong("udp-buffer"), parsing: .unconditional, help: "The UDP receive buffer to ask for, in bytes.")
    var udpBuffer = 8 * 1024 * 1024

    @Option(name: .customLong("max-line"), parsing: .unconditional, help: "The longest line accepted, in bytes.")
    var maxLine = 8192

    @Option(name: .customLong("flush-interval"), parsing: .unconditional, help: "Seconds between flushes.")
    var flushInterval = 10.0

    @Option(help: "The JSON-lines output: a file (appended to), or - for standard output.")
    var output = "-"

    @Option(
        help:
            "A Graphite plaintext receiver (carbon) to send each flush to, as host:port; a host name is resolved anew at each connection attempt."
    )
    var graphite: String?

    @Option(
        help:
            "An address to serve Prometheus' text format on, at GET /metrics (and /-/healthy, /-/ready), as host:port; :port listens on every IPv4 interface."
    )
    var prometheus: String?

    @Option(
        name: .customLong("prometheus-timers"),
        help: "How Prometheus shows timers, histograms and distributions: histogram or summary.")
    var prometheusTimers = "histogram"

    @Option(
        name: .customLong("prometheus-buckets"), parsing: .unconditional,
        help:
            "The Prometheus histograms' bucket bounds, ascending and comma-separated: in seconds for timers, as sent for histograms and distributions."
    )
    var prometheusBuckets = PrometheusOptions.defaultBuckets.map { "\($0)" }.joined(separator: ",")

    @Option(
        name: .customLong("unix-socket"),
        help:
            "A Unix datagram socket to receive on too, as DogStatsD clients' socket_path (a stale socket file is replaced; the file is removed at exit)."
    )
    var unixSocket: String?

    @Option(
        name: .customLong("unix-socket-mode"), parsing: .unconditional,
        help: "The --unix-socket file's permissions, in octal.")
    var unixSocketMode = "660"

    @Option(
        name: .customLong("max-series"), parsing: .unconditional,
        help: "The most series kept; lines for new series beyond it are dropped.")
    var maxSeries = 100_000

    @Option(
        name: .customLong("expire-after"), parsing: .unconditional,
        help: "Flush intervals without data after which a series is forgotten (0: never).")
    var expireAfter = 6

    @Option(
        name: .customLong("tcp-idle-timeout"), parsing: .unconditional,
        help: "Seconds a TCP client may send nothing before it is disconnected (0: never).")
    var tcpIdleTimeout = 600.0

    @Option(
        name: .customLong("graphite-max-queued"), parsing: .unconditional,
        help:
            "The most bytes of Graphite lines kept while the receiver is down or slow; the oldest flushes beyond it are dropped and counted."
    )
    var graphiteMaxQueued = 16 << 20

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func validate() throws {
        func check(_ condition: Bool, _ message: String) throws {
            if !condition { throw ValidationError(message) }
        }
        func checkInterval(_ flag: String, _ seconds: Double, in range: ClosedRange<Double>) throws {
            if let problem = _intervalProblem(flag, seconds, .within(range)) { throw ValidationError(problem) }
        }
        try check((0...65535).contains(port), "--port must be in 0...65535, got \(port)")
        try check(
            udpBuffer > 0 && udpBuffer <= Int(Int32.max), "--udp-buffer must be in 1...\(Int32.max), got \(udpBuffer)")
        try check(maxLine > 0 && maxLine <= 65536, "--max-line must be in 1...65536, got \(maxLine)")
        try checkInterval("--flush-interval", flushInterval, in: 0.01...86400)
        try check(
            maxSeries > 0 && maxSeries <= Int(Int32.max), "--max-series must be in 1...\(Int32.max), got \(maxSeries)")
        try check(
            expireAfter >= 0 && expireAfter <= Int(UInt32.max),
            "--expire-after must be in 0...\(UInt32.max), got \(expireAfter)")
        try checkInterval("--tcp-idle-timeout", tcpIdleTimeout, in: 0...86400)
        try check(
            graphiteMaxQueued >= 1024 && graphiteMaxQueued <= 1 << 40,
            "--graphite-max-queued must be in 1024...\(1 << 40) bytes, got \(graphiteMaxQueued)")
        try check(
            Logger.Level(rawValue: logLevel) != nil,
            "--log-level must be one of trace, debug, info, notice, warning, error, critical; got \(logLevel)")
        try check(!output.isEmpty, "--output must be a file path or -, got an empty string")
        try check(
            PrometheusOptions.Timers(rawValue: prometheusTimers) != nil,
            "--prometheus-timers must be histogram or summary, got \(prometheusTimers)")
        try check(
            UInt32(unixSocketMode, radix: 8).map { $0 <= 0o777 } == true,
            "--unix-socket-mode must be octal permissions in 0...777, got \(unixSocketMode)")
        try check(unixSocket?.isEmpty != true, "--unix-socket must be a path, got an empty string")
        do {
            _ = try PrometheusOptions.bucketList(prometheusBuckets)
        } catch {
            throw ValidationError("--prometheus-buckets \(prometheusBuckets): \(error)")
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            var handler = QueuedLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
        defer { LogOutput.shared.flush(within: 0.5) }
        let configuration: Daemon.Configuration
        do {
            configuration = Daemon.Configuration(
                listen: try Daemon.address(host: host, port: port, flag: "--host/--port"),
                udpBuffer: udpBuffer, maxLine: maxLine, flushInterval: flushInterval, output: output,
                graphite: try graphite.map {
                    try Daemon.endpoint($0, flag: "--graphite", example: "carbon.example.com:2003")
                },
                prometheus: try prometheus.map {
                    try Daemon.address($0, flag: "--prometheus", example: "127.0.0.1:9102", listening: true)
                },
                maxSeries: maxSeries, expireAfter: UInt32(expireAfter),
                tcpIdleTimeout: tcpIdleTimeout, graphiteMaxQueued: graphiteMaxQueued,
                prometheusTimers: PrometheusOptions.Timers(rawValue: prometheusTimers)!,
                prometheusBuckets: try PrometheusOptions.bucketList(prometheusBuckets), unixSocket: unixSocket,
                unixSocketMode: UInt32(unixSocketMode, radix: 8)!)
        } catch let error as Daemon.StartupError {
            throw ValidationError(error.description)
        }
        do {
            let daemon = try Daemon(configuration, logger: Logger(label: "loopd"))
            daemon.run()
        } catch {
            StandardError.write("loopd: \(error)\n")
            throw ExitCode(1)
        }
    }
}

/// Writes to standard error without Foundation.
enum StandardError {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}

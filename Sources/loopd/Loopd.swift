import ArgumentParser
import Logging
import LoopdCore
import ReactiveLoopCore
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
            Receives StatsD lines over UDP and TCP (and Unix sockets with --unix-socket and --unix-stream), aggregates them, and every --flush-interval \
            seconds writes a JSON line per flush (--output), sends Graphite plaintext \
            (--graphite) and serves Prometheus' text format (--prometheus). Settings come from the flags and, with --config, a YAML file, \
            which also holds mapping rules. SIGTERM or SIGINT: final flush and exit 0. SIGHUP: \
            reopen the output file and read the config file again. See docs/loopd.md.
            """,
        version: LoopdVersion.string)

    // Each setting is a flag and a key of the same name in --config's file; a flag given here
    // overrides the file, and the file the default (see `Settings`). The numeric options parse
    // their value `.unconditional`ly: by default a value that starts with "-" is taken for a
    // flag, and `--port -1` said "Missing value" instead of the range.

    @Option(
        help:
            "A YAML config file: the flags' names as keys, plus percentiles and mappings (docs/loopd.md). Flags override it; SIGHUP and POST /-/reload read it again."
    )
    var config: String?

    @Option(help: "The address to receive on (a numeric IPv4 or IPv6 address, or localhost). Default: 127.0.0.1.")
    var host: String?

    @Option(
        parsing: .unconditional, help: "The UDP and TCP port to receive on (0: one the system chooses). Default: 8125.")
    var port: Int?

    @Option(
        parsing: .unconditional,
        help:
            "UDP sockets on the port (SO_REUSEPORT), each read into a table of its own on a core of its own, merged at each flush; at most the cores. Default: one per core."
    )
    var readers: Int?

    @Option(
        name: .customLong("udp-buffer"), parsing: .unconditional,
        help: "The UDP receive buffer to ask for, in bytes. Default: 8388608.")
    var udpBuffer: Int?

    @Option(
        name: .customLong("max-line"), parsing: .unconditional,
        help: "The longest line accepted, in bytes. Default: 8192."
    )
    var maxLine: Int?

    @Option(name: .customLong("flush-interval"), parsing: .unconditional, help: "Seconds between flushes. Default: 10.")
    var flushInterval: Double?

    @Option(help: "The JSON-lines output: a file (appended to), or - for standard output. Default: -.")
    var output: String?

    @Option(
        help:
            "A Graphite plaintext receiver (carbon) to send each flush to, as host:port; a host name is resolved anew at each connection attempt."
    )
    var graphite: String?

    @Option(
        help:
            "An address to serve Prometheus' text format on, at GET /metrics (and /-/healthy, /-/ready, POST /-/reload), as host:port; :port listens on every IPv4 interface."
    )
    var prometheus: String?

    @Option(
        name: .customLong("prometheus-timers"),
        help: "How Prometheus shows timers, histograms and distributions: histogram or summary. Default: histogram.")
    var prometheusTimers: String?

    @Option(
        name: .customLong("prometheus-buckets"), parsing: .unconditional,
        help:
            "The Prometheus histograms' bucket bounds, ascending and comma-separated: in seconds for timers, as sent for histograms and distributions. Default: \(PrometheusOptions.defaultBuckets.map { "\($0)" }.joined(separator: ","))."
    )
    var prometheusBuckets: String?

    @Option(
        parsing: .unconditional,
        help:
            "The percentiles each flush reports for timers, histograms and distributions, comma-separated, each in (0, 100]. Default: 50,90,95,99."
    )
    var percentiles: String?

    @Option(
        help:
            "A prefix for every series' name (a . is added): myapp makes api.requests myapp.api.requests. Default: none."
    )
    var prefix: String?

    @Option(name: .customLong("prefix-counter"), help: "A prefix for counters' names, after --prefix. Default: none.")
    var prefixCounter: String?

    @Option(name: .customLong("prefix-gauge"), help: "A prefix for gauges' names, after --prefix. Default: none.")
    var prefixGauge: String?

    @Option(name: .customLong("prefix-timer"), help: "A prefix for timers' names (ms), after --prefix. Default: none.")
    var prefixTimer: String?

    @Option(
        name: .customLong("prefix-histogram"),
        help: "A prefix for histograms' and distributions' names (h, d), after --prefix. Default: none.")
    var prefixHistogram: String?

    @Option(name: .customLong("prefix-set"), help: "A prefix for sets' names, after --prefix. Default: none.")
    var prefixSet: String?

    @Option(
        name: .customLong("tag"),
        help:
            "A tag every series gets, as key:value or key, unless the line has a tag of that key; repeat it for several (host:web1, env:prod)."
    )
    var tag: [String] = []

    @Option(
        name: .customLong("graphite-layout"),
        help:
            "How series are laid out for Graphite: loopd, or etsy (stats., stats_counts., stats.timers.<name>.upper...). Default: loopd."
    )
    var graphiteLayout: String?

    @Option(
        name: .customLong("unix-socket"),
        help:
            "A Unix datagram socket to receive on too, as DogStatsD clients' socket_path (a stale socket file is replaced; the file is removed at exit)."
    )
    var unixSocket: String?

    @Option(
        name: .customLong("unix-stream"),
        help:
            "A Unix stream socket to receive lines on too, as over TCP (a stale socket file is replaced; the file is removed at exit)."
    )
    var unixStream: String?

    @Option(
        name: .customLong("unix-socket-mode"), parsing: .unconditional,
        help: "The --unix-socket and --unix-stream files' permissions, in octal. Default: 660.")
    var unixSocketMode: String?

    @Option(
        name: .customLong("max-series"), parsing: .unconditional,
        help: "The most series kept; lines for new series beyond it are dropped. Default: 100000.")
    var maxSeries: Int?

    @Option(
        name: .customLong("expire-after"), parsing: .unconditional,
        help: "Flush intervals without data after which a series is forgotten (0: never). Default: 6.")
    var expireAfter: Int?

    @Option(
        name: .customLong("tcp-idle-timeout"), parsing: .unconditional,
        help: "Seconds a TCP client may send nothing before it is disconnected (0: never). Default: 600.")
    var tcpIdleTimeout: Double?

    @Option(
        name: .customLong("graphite-max-queued"), parsing: .unconditional,
        help:
            "The most bytes of Graphite lines kept while the receiver is down or slow; the oldest flushes beyond it are dropped and counted. Default: 16777216."
    )
    var graphiteMaxQueued: Int?

    @Option(
        name: .customLong("log-level"),
        help: "trace, debug, info, notice, warning, error or critical. Default: info.")
    var logLevel: String?

    /// The flags as given (nil: not given), for `Settings`.
    var flags: Settings.Flags {
        Settings.Flags(
            host: host, port: port, udpBuffer: udpBuffer, maxLine: maxLine, flushInterval: flushInterval,
            output: output, graphite: graphite, prometheus: prometheus, prometheusTimers: prometheusTimers,
            prometheusBuckets: prometheusBuckets, percentiles: percentiles, unixSocket: unixSocket,
            unixStream: unixStream, unixSocketMode: unixSocketMode, maxSeries: maxSeries, expireAfter: expireAfter,
            tcpIdleTimeout: tcpIdleTimeout, graphiteMaxQueued: graphiteMaxQueued, logLevel: logLevel, prefix: prefix,
            prefixCounter: prefixCounter, prefixGauge: prefixGauge, prefixTimer: prefixTimer,
            prefixHistogram: prefixHistogram, prefixSet: prefixSet, tags: tag.isEmpty ? nil : tag,
            graphiteLayout: graphiteLayout, readers: readers)
    }

    // Settings are resolved in `run()`, not in `validate()`: the config file is read once (a
    // `--config <(…)` or a FIFO cannot be read twice).

    func run() throws {
        // Until the loop handles SIGHUP, an early one (a reload while loopd starts) would end
        // the process: it is ignored until then.
        signal(SIGHUP, SIG_IGN)
        let settings: Settings
        do {
            settings = try Settings.resolve(flags, configPath: config)
        } catch {
            throw ValidationError(error.description)
        }
        LoggingSystem.bootstrap { label in
            var handler = QueuedLogHandler(label: label)
            handler.logLevel = settings.logLevel
            return handler
        }
        defer { LogOutput.shared.flush(within: 0.5) }
        let (flags, config) = (flags, config)
        do {
            let daemon = try Daemon(
                settings.configuration, logger: Logger(label: "loopd"),
                reload: config.map { path in { try Settings.resolve(flags, configPath: path) } })
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

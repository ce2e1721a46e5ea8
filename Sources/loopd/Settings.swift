import Logging
import LoopdCore
import ReactiveLoopCore
import ReactiveLoopUV

#if canImport(Glibc)
    import Glibc
#endif

/// loopd's settings: each from its flag if given, else from the config file if it has the key,
/// else the default; checked, with messages that name where the value came from (`--port` or
/// `loopd.yaml:3: port`).
struct Settings {
    /// The flags as given on the command line; nil: not given.
    struct Flags {
        var host: String?
        var port: Int?
        var udpBuffer: Int?
        var udpReadPause: Int?
        var maxLine: Int?
        var flushInterval: Double?
        var output: String?
        var graphite: String?
        var prometheus: String?
        var prometheusTimers: String?
        var prometheusBuckets: String?
        var percentiles: String?
        var unixSocket: String?
        var unixStream: String?
        var unixSocketMode: String?
        var maxSeries: Int?
        var expireAfter: Int?
        var tcpIdleTimeout: Double?
        var graphiteMaxQueued: Int?
        var logLevel: String?
        var prefix: String?
        var prefixCounter: String?
        var prefixGauge: String?
        var prefixTimer: String?
        var prefixHistogram: String?
        var prefixSet: String?
        var tags: [String]?
        var graphiteLayout: String?
        var readers: Int?
    }

    /// The cores loopd may run on (its CPU affinity, as `taskset` or a container's cpuset
    /// sets it): the default number of readers, and the most.
    static var cores: Int {
        // `Cpus_allowed` in /proc/self/status: the affinity mask in hex, 32 bits per group
        // (Glibc's module does not offer sched_getaffinity).
        let online = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        guard let file = fopen("/proc/self/status", "r") else { return online }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("Cpus_allowed:") else { continue }
            let count = text.dropFirst("Cpus_allowed:".count).reduce(0) { count, character in
                count + (character.hexDigitValue?.nonzeroBitCount ?? 0)
            }
            return count > 0 ? min(count, online) : online
        }
        return online
    }

    /// A setting that cannot be used, naming where it came from and the value.
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// The daemon's configuration.
    var configuration: Daemon.Configuration
    /// The log level.
    var logLevel: Logger.Level
    /// Whether the config file (if any) set nothing at all.
    var configFileIsEmpty = false

    /// The default percentiles.
    static let defaultPercentiles: [Double] = [50, 90, 95, 99]

    /// Resolves and checks every setting: `flags`, then the file at `configPath` if given, then
    /// the defaults.
    static func resolve(_ flags: Flags, configPath: String?) throws(Problem) -> Settings {
        var file: ConfigFile?
        if let configPath {
            do {
                file = try ConfigFile.load(configPath)
            } catch {
                throw Problem(description: error.description)
            }
        }
        do {
            return try resolve(flags, file: file)
        } catch let problem as ConfigFile.Problem {
            throw Problem(description: problem.description)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw Problem(description: "\(error)")
        }
    }

    /// Resolves and checks every setting from `flags`, then `file`, then the defaults.
    static func resolve(_ flags: Flags, file: ConfigFile?) throws -> Settings {
        // Every value of the file is read, and its type checked, even where a flag overrides it:
        // a file with a problem is refused whole. Where a value came from, for messages.
        func origin(_ key: String, flag: Any?) -> String {
            flag != nil || file?.entries[key] == nil ? "--\(key)" : file!.origin(key)
        }
        func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(Problem) {
            if !condition { throw Problem(description: message()) }
        }
        func checkInterval(_ key: String, _ flag: Double?, _ seconds: Double, in range: ClosedRange<Double>)
            throws(Problem)
        {
            if let problem = _intervalProblem(origin(key, flag: flag), seconds, .within(range)) {
                throw Problem(description: problem)
            }
        }

        let hostFile = try file?.string("host")
        let host = flags.host ?? hostFile ?? "127.0.0.1"
        let portFile = try file?.int("port")
        let port = flags.port ?? portFile ?? 8125
        let udpBufferFile = try file?.int("udp-buffer")
        let udpBuffer = flags.udpBuffer ?? udpBufferFile ?? 8 * 1024 * 1024
        let udpReadPauseFile = try file?.int("udp-read-pause")
        let udpReadPause = flags.udpReadPause ?? udpReadPauseFile
        let maxLineFile = try file?.int("max-line")
        let maxLine = flags.maxLine ?? maxLineFile ?? 8192
        let flushIntervalFile = try file?.double("flush-interval")
        let flushInterval = flags.flushInterval ?? flushIntervalFile ?? 10
        let outputFile = try file?.string("output")
        let output = flags.output ?? outputFile ?? "-"
        let graphiteFile = try file?.string("graphite")
        let graphite = flags.graphite ?? graphiteFile
        let prometheusFile = try file?.string("prometheus")
        let prometheus = flags.prometheus ?? prometheusFile
        let prometheusTimersFile = try file?.string("prometheus-timers")
        let prometheusTimers = flags.prometheusTimers ?? prometheusTimersFile ?? "histogram"
        let unixSocketFile = try file?.string("unix-socket")
        let unixSocket = flags.unixSocket ?? unixSocketFile
        let unixStreamFile = try file?.string("unix-stream")
        let unixStream = flags.unixStream ?? unixStreamFile
        let unixSocketModeFile = try file?.string("unix-socket-mode")
        let unixSocketMode = flags.unixSocketMode ?? unixSocketModeFile ?? "660"
        let maxSeriesFile = try file?.int("max-series")
        let maxSeries = flags.maxSeries ?? maxSeriesFile ?? 100_000
        let expireAfterFile = try file?.int("expire-after")
        let expireAfter = flags.expireAfter ?? expireAfterFile ?? 6
        let tcpIdleTimeoutFile = try file?.double("tcp-idle-timeout")
        let tcpIdleTimeout = flags.tcpIdleTimeout ?? tcpIdleTimeoutFile ?? 600
        let graphiteMaxQueuedFile = try file?.int("graphite-max-queued")
        let graphiteMaxQueued = flags.graphiteMaxQueued ?? graphiteMaxQueuedFile ?? 16 << 20
        let logLevelFile = try file?.string("log-level")
        let logLevel = flags.logLevel ?? logLevelFile ?? "info"

        let readersFile = try file?.int("readers")
        let readers = flags.readers ?? readersFile ?? Self.cores
        try check(
            (1...Self.cores).contains(readers),
            "\(origin("readers", flag: flags.readers)) must be in 1...\(Self.cores) (the cores), got \(readers)")
        let graphiteLayoutFile = try file?.string("graphite-layout")
        let graphiteLayout = flags.graphiteLayout ?? graphiteLayoutFile ?? "loopd"
        let tagsFile = try file?.tagList("tags")
        let tags = flags.tags ?? tagsFile ?? []
        // The namespace: each prefix from its flag, else the file.
        var prefixes: [(key: String, flag: String?, kinds: [MetricKind], value: String?)] = [
            ("prefix", flags.prefix, [], nil), ("prefix-counter", flags.prefixCounter, [.counter], nil),
            ("prefix-gauge", flags.prefixGauge, [.gauge], nil), ("prefix-timer", flags.prefixTimer, [.timer], nil),
            ("prefix-histogram", flags.prefixHistogram, [.histogram, .distribution], nil),
            ("prefix-set", flags.prefixSet, [.set], nil),
        ]
        for index in prefixes.indices {
            let fromFile = try file?.string(prefixes[index].key)
            prefixes[index].value = prefixes[index].flag ?? fromFile
            guard let value = prefixes[index].value, !value.isEmpty else { continue }
            // A type's prefix comes after the global one: `app.loopd` is not loopd's own.
            let global = index > 0 ? prefixes[0].value ?? "" : ""
            if let problem = Mapper.prefixProblem(global.isEmpty ? value : global + "." + value) {
                throw Problem(description: "\(origin(prefixes[index].key, flag: prefixes[index].flag)) \(problem)")
            }
        }
        try check(
            tags.count <= Mapper.maxTags,
            "\(flags.tags != nil ? "--tag" : file!.origin("tags")): at most \(Mapper.maxTags) tags, got \(tags.count)")
        for tag in tags {
            if let problem = Mapper.tagProblem(tag) {
                throw Problem(description: "\(flags.tags != nil ? "--tag" : file!.origin("tags")): each tag \(problem)")
            }
        }
        guard let layout = GraphiteFormat.Layout(rawValue: graphiteLayout) else {
            throw Problem(
                description:
                    "\(origin("graphite-layout", flag: flags.graphiteLayout)) must be loopd or etsy, got \(Mapper.shown(graphiteLayout))"
            )
        }
        var kindPrefixes: [MetricKind: String] = [:]
        for entry in prefixes.dropFirst() {
            for kind in entry.kinds { if let value = entry.value, !value.isEmpty { kindPrefixes[kind] = value } }
        }
        let mapper = Mapper(
            rules: file?.mappings ?? [], prefix: prefixes[0].value ?? "", kindPrefixes: kindPrefixes, tags: tags)

        try check(
            (0...65535).contains(port), "\(origin("port", flag: flags.port)) must be in 0...65535, got \(port)")
        try check(
            udpBuffer > 0 && udpBuffer <= Int(Int32.max),
            "\(origin("udp-buffer", flag: flags.udpBuffer)) must be in 1...\(Int32.max), got \(udpBuffer)")
        try check(
            udpReadPause.map { (0...1_000_000).contains($0) } ?? true,
            "\(origin("udp-read-pause", flag: flags.udpReadPause)) must be in 0...1000000 microseconds, got \(udpReadPause ?? 0)"
        )
        try check(
            maxLine > 0 && maxLine <= 65536,
            "\(origin("max-line", flag: flags.maxLine)) must be in 1...65536, got \(maxLine)")
        try checkInterval("flush-interval", flags.flushInterval, flushInterval, in: 0.01...86400)
        try check(
            maxSeries > 0 && maxSeries <= Int(Int32.max),
            "\(origin("max-series", flag: flags.maxSeries)) must be in 1...\(Int32.max), got \(maxSeries)")
        try check(
            expireAfter >= 0 && expireAfter <= Int(UInt32.max),
            "\(origin("expire-after", flag: flags.expireAfter)) must be in 0...\(UInt32.max), got \(expireAfter)")
        try checkInterval("tcp-idle-timeout", flags.tcpIdleTimeout, tcpIdleTimeout, in: 0...86400)
        try check(
            graphiteMaxQueued >= 1024 && graphiteMaxQueued <= 1 << 40,
            "\(origin("graphite-max-queued", flag: flags.graphiteMaxQueued)) must be in 1024...\(1 << 40) bytes, got \(graphiteMaxQueued)"
        )
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw Problem(
                description:
                    "\(origin("log-level", flag: flags.logLevel)) must be one of trace, debug, info, notice, warning, error, critical; got \(Mapper.shown(logLevel))"
            )
        }
        try check(
            !output.isEmpty, "\(origin("output", flag: flags.output)) must be a file path or -, got an empty string")
        guard let timers = PrometheusOptions.Timers(rawValue: prometheusTimers) else {
            throw Problem(
                description:
                    "\(origin("prometheus-timers", flag: flags.prometheusTimers)) must be histogram or summary, got \(Mapper.shown(prometheusTimers))"
            )
        }
        guard let mode = UInt32(unixSocketMode, radix: 8), mode <= 0o777 else {
            throw Problem(
                description:
                    "\(origin("unix-socket-mode", flag: flags.unixSocketMode)) must be octal permissions in 0...777, got \(Mapper.shown(unixSocketMode))"
            )
        }
        try check(
            unixSocket?.isEmpty != true,
            "\(origin("unix-socket", flag: flags.unixSocket)) must be a path, got an empty string")
        try check(
            unixStream?.isEmpty != true,
            "\(origin("unix-stream", flag: flags.unixStream)) must be a path, got an empty string")
        if let unixSocket, unixSocket == unixStream {
            throw Problem(
                description:
                    "\(origin("unix-stream", flag: flags.unixStream)) must differ from \(origin("unix-socket", flag: flags.unixSocket)): both are \(unixSocket)"
            )
        }

        let bucketsFile = try file?.numbers("prometheus-buckets")
        let percentilesFile = try file?.numbers("percentiles")
        let buckets: [Double]
        if let text = flags.prometheusBuckets {
            do {
                buckets = try PrometheusOptions.bucketList(text)
            } catch {
                throw Problem(description: "--prometheus-buckets \(text): \(error)")
            }
        } else if let list = bucketsFile {
            do {
                buckets = try PrometheusOptions.bucketList(list.map { "\($0)" }.joined(separator: ","))
            } catch {
                throw Problem(description: "\(file!.origin("prometheus-buckets")): \(error)")
            }
        } else {
            buckets = PrometheusOptions.defaultBuckets
        }

        let percentiles: [Double]
        if let text = flags.percentiles {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            let numbers = parts.compactMap { Double($0) }
            guard numbers.count == parts.count else {
                throw Problem(description: "--percentiles \(text): expected numbers separated by commas")
            }
            percentiles = numbers
        } else {
            percentiles = percentilesFile ?? defaultPercentiles
        }
        do {
            try MappingRule.checkPercentiles(percentiles, what: origin("percentiles", flag: flags.percentiles))
        } catch {
            throw Problem(description: error.description)
        }

        let configuration: Daemon.Configuration
        do {
            configuration = Daemon.Configuration(
                listen: try Daemon.address(
                    host: host, port: port,
                    flag: flags.host == nil && file?.entries["host"] != nil ? file!.origin("host") : "--host/--port"),
                udpBuffer: udpBuffer, udpReadPause: udpReadPause,
                maxLine: maxLine, flushInterval: flushInterval, output: output,
                graphite: try graphite.map {
                    try Daemon.endpoint(
                        $0, flag: origin("graphite", flag: flags.graphite), example: "carbon.example.com:2003")
                },
                prometheus: try prometheus.map {
                    try Daemon.address(
                        $0, flag: origin("prometheus", flag: flags.prometheus), example: "127.0.0.1:9102",
                        listening: true)
                },
                maxSeries: maxSeries, expireAfter: UInt32(expireAfter),
                tcpIdleTimeout: tcpIdleTimeout, graphiteMaxQueued: graphiteMaxQueued,
                prometheusTimers: timers, prometheusBuckets: buckets, unixSocket: unixSocket,
                unixStream: unixStream, unixSocketMode: mode, percentiles: percentiles,
                mapper: mapper.isIdentity ? nil : mapper, graphiteLayout: layout, readers: readers)
        } catch {
            throw Problem(description: "\(error)")
        }
        return Settings(
            configuration: configuration, logLevel: level,
            configFileIsEmpty: file.map { $0.entries.isEmpty && $0.mappings.isEmpty } ?? false)
    }
}

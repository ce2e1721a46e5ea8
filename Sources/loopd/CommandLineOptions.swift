import LoopdCore

/// loopd's command line: `--name value` or `--name=value` for each option (the value is the
/// next argument whatever it starts with, so `--port -1` gets the range message), `--tag` as
/// often as wanted, each other option at most once; `--help` (`-h`) and `--version`.
///
/// Read by hand from a table rather than by a reflection-based parser: that parser's metadata
/// took 4 MiB of an idle loopd's 12.
struct CommandLineOptions {
    /// What the command line asks for.
    enum Action: Equatable {
        case run
        case help
        case version
    }

    var action = Action.run
    /// The settings given as flags (nil: not given).
    var flags = Settings.Flags()
    /// `--config`.
    var config: String?

    /// A problem with the command line, naming the option and the value.
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// An option: its name (without `--`), what its value is, its help, and how it is set.
    struct Option {
        var name: String
        var value: String
        var help: String
        /// Sets the option's value; throws a `Problem`.
        var set: (inout CommandLineOptions, String) throws -> Void
    }

    /// The options, in the order `--help` lists them.
    static var options: [Option] {
        [
            Option(
                name: "config", value: "file",
                help:
                    "A YAML config file: the flags' names as keys, plus percentiles and mappings (docs/loopd.md). Flags override it; SIGHUP and POST /-/reload read it again."
            ) { $0.config = $1 },
            text(
                "host", "address",
                "The address to receive on (a numeric IPv4 or IPv6 address, or localhost). Default: 127.0.0.1.", \.host),
            whole("port", "The UDP and TCP port to receive on (0: one the system chooses). Default: 8125.", \.port),
            whole(
                "readers",
                "UDP sockets on the port (SO_REUSEPORT), each read into a table of its own on a core of its own, merged at each flush; at most the cores. Default: one per core.",
                \.readers),
            whole("udp-buffer", "The UDP receive buffer to ask for, in bytes. Default: 8388608.", \.udpBuffer),
            whole(
                "udp-read-pause",
                "Microseconds a UDP socket's reading pauses when datagrams come fast, so that its next reads take many at once (0: never; at most 1000000). Default: 500 with a receive buffer of 2 MiB or more, else 0.",
                \.udpReadPause),
            whole("max-line", "The longest line accepted, in bytes. Default: 8192.", \.maxLine),
            number("flush-interval", "Seconds between flushes. Default: 10.", \.flushInterval),
            text(
                "output", "file", "The JSON-lines output: a file (appended to), or - for standard output. Default: -.",
                \.output),
            text(
                "graphite", "host:port",
                "A Graphite plaintext receiver (carbon) to send each flush to; a host name is resolved anew at each connection attempt.",
                \.graphite),
            text(
                "prometheus", "host:port",
                "An address to serve Prometheus' text format on, at GET /metrics (and /-/healthy, /-/ready, POST /-/reload); :port listens on every IPv4 interface.",
                \.prometheus),
            text(
                "prometheus-timers", "form",
                "How Prometheus shows timers, histograms and distributions: histogram or summary. Default: histogram.",
                \.prometheusTimers),
            text(
                "prometheus-buckets", "bounds",
                "The Prometheus histograms' bucket bounds, ascending and comma-separated: in seconds for timers, as sent for histograms and distributions. Default: \(PrometheusOptions.defaultBuckets.map { "\($0)" }.joined(separator: ",")).",
                \.prometheusBuckets),
            text(
                "percentiles", "list",
                "The percentiles each flush reports for timers, histograms and distributions, comma-separated, each in (0, 100]. Default: 50,90,95,99.",
                \.percentiles),
            text(
                "prefix", "name",
                "A prefix for every series' name (a . is added): myapp makes api.requests myapp.api.requests. Default: none.",
                \.prefix),
            text(
                "prefix-counter", "name", "A prefix for counters' names, after --prefix. Default: none.",
                \.prefixCounter),
            text("prefix-gauge", "name", "A prefix for gauges' names, after --prefix. Default: none.", \.prefixGauge),
            text(
                "prefix-timer", "name", "A prefix for timers' names (ms), after --prefix. Default: none.", \.prefixTimer
            ),
            text(
                "prefix-histogram", "name",
                "A prefix for histograms' and distributions' names (h, d), after --prefix. Default: none.",
                \.prefixHistogram),
            text("prefix-set", "name", "A prefix for sets' names, after --prefix. Default: none.", \.prefixSet),
            Option(
                name: "tag", value: "key:value",
                help:
                    "A tag every series gets, as key:value or key, unless the line has a tag of that key; repeat it for several (host:web1, env:prod)."
            ) { $0.flags.tags = ($0.flags.tags ?? []) + [$1] },
            text(
                "graphite-layout", "layout",
                "How series are laid out for Graphite: loopd, or etsy (stats., stats_counts., stats.timers.<name>.upper...). Default: loopd.",
                \.graphiteLayout),
            text(
                "unix-socket", "path",
                "A Unix datagram socket to receive on too, as DogStatsD clients' socket_path (a stale socket file is replaced; the file is removed at exit).",
                \.unixSocket),
            text(
                "unix-stream", "path",
                "A Unix stream socket to receive on too: lines as over TCP, or DogStatsD clients' unixstream:// frames (a stale socket file is replaced; the file is removed at exit).",
                \.unixStream),
            text(
                "unix-socket-mode", "mode",
                "The --unix-socket and --unix-stream files' permissions, in octal. Default: 660.",
                \.unixSocketMode),
            whole(
                "max-series", "The most series kept; lines for new series beyond it are dropped. Default: 100000.",
                \.maxSeries),
            whole(
                "expire-after",
                "Flush intervals without data after which a series is forgotten (0: never). Default: 6.",
                \.expireAfter),
            number(
                "tcp-idle-timeout",
                "Seconds a TCP or Unix stream client may send nothing before it is disconnected (0: never). Default: 600.",
                \.tcpIdleTimeout),
            whole(
                "graphite-max-queued",
                "The most bytes of Graphite lines kept while the receiver is down or slow; the oldest flushes beyond it are dropped and counted. Default: 16777216.",
                \.graphiteMaxQueued),
            text(
                "log-level", "level", "trace, debug, info, notice, warning, error or critical. Default: info.",
                \.logLevel),
        ]
    }

    private static func text(
        _ name: String, _ value: String, _ help: String, _ field: WritableKeyPath<Settings.Flags, String?>
    ) -> Option {
        Option(name: name, value: value, help: help) { $0.flags[keyPath: field] = $1 }
    }

    private static func whole(_ name: String, _ help: String, _ field: WritableKeyPath<Settings.Flags, Int?>) -> Option
    {
        Option(name: name, value: "n", help: help) { options, text in
            guard let value = Int(text) else {
                throw Problem(description: "--\(name): expected a whole number, got \(Mapper.shown(text))")
            }
            options.flags[keyPath: field] = value
        }
    }

    private static func number(_ name: String, _ help: String, _ field: WritableKeyPath<Settings.Flags, Double?>)
        -> Option
    {
        Option(name: name, value: "seconds", help: help) { options, text in
            guard let value = Double(text) else {
                throw Problem(description: "--\(name): expected a number, got \(Mapper.shown(text))")
            }
            options.flags[keyPath: field] = value
        }
    }

    /// The command line `arguments` (without the program's name).
    static func parse(_ arguments: [String]) throws(Problem) -> CommandLineOptions {
        var parsed = CommandLineOptions()
        var given = Set<String>()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            switch argument {
            case "--help", "-h":
                parsed.action = .help
                return parsed
            case "--version":
                parsed.action = .version
                return parsed
            default: break
            }
            guard argument.hasPrefix("--") else {
                throw Problem(
                    description: "unexpected argument \(Mapper.shown(argument)): every option is --name value")
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.name == name }) else {
                let plain = name.utf8.count <= 80 && name.utf8.allSatisfy { (0x21...0x7E).contains($0) }
                throw Problem(description: "unknown option \(plain ? "--" + name : Mapper.shown("--" + name))")
            }
            if value == nil {
                guard index < arguments.count else {
                    throw Problem(description: "--\(name) needs a value (--\(name) <\(option.value)>)")
                }
                value = arguments[index]
                index += 1
            }
            guard name == "tag" || given.insert(name).inserted else {
                throw Problem(description: "--\(name) is given twice")
            }
            do {
                try option.set(&parsed, value!)
            } catch {
                throw error as! Problem
            }
        }
        return parsed
    }

    /// What `--help` prints.
    static var help: String {
        var text = """
            loopd: a StatsD and DogStatsD metrics daemon on a ReactiveLoop event loop.

            Usage: loopd [--option value]...


            """
        text += wrapped(
            "Receives StatsD lines over UDP and TCP (and Unix sockets with --unix-socket and --unix-stream), aggregates them, and every --flush-interval seconds writes a JSON line per flush (--output), sends Graphite plaintext (--graphite) and serves Prometheus' text format (--prometheus). Settings come from the flags and, with --config, a YAML file, which also holds mapping rules. SIGTERM or SIGINT: final flush and exit 0. SIGHUP: reopen the output file and read the config file again. See docs/loopd.md.",
            indent: "")
        text += "\nOptions:\n"
        for option in options {
            text += "  --\(option.name) <\(option.value)>\n" + wrapped(option.help, indent: "        ")
        }
        text += "  --version\n" + wrapped("Prints the version and exits.", indent: "        ")
        text += "  -h, --help\n" + wrapped("Prints this help and exits.", indent: "        ")
        return text
    }

    /// `text` in lines of at most 100 columns, each starting with `indent`.
    private static func wrapped(_ text: String, indent: String) -> String {
        var lines: [String] = []
        var line = indent
        for word in text.split(separator: " ") {
            if line.count > indent.count && line.count + 1 + word.count > 100 {
                lines.append(line)
                line = indent
            }
            line += (line.count > indent.count ? " " : "") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }
}

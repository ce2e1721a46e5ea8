import Foundation
import LoopdCore
import Testing

@testable import loopd

/// The config file: what it sets, the flags over it, and a message naming the line for every
/// problem.
@Suite("Config file")
struct ConfigFileTests {
    static func settings(_ text: String, flags: Settings.Flags = Settings.Flags()) throws -> Settings {
        try Settings.resolve(flags, file: try ConfigFile.parse(text, path: "loopd.yaml"))
    }

    /// The message of what `text` (with `flags`) is refused for.
    static func problem(_ text: String, flags: Settings.Flags = Settings.Flags()) -> String {
        do {
            _ = try settings(text, flags: flags)
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    @Test func everyKeyOfTheFileIsASetting() throws {
        let settings = try Self.settings(
            """
            # Every key, as the flags name them.
            host: 127.0.0.2
            port: 9125
            udp-buffer: 1_048_576
            udp-read-pause: 250
            max-line: 4096
            flush-interval: 2.5
            output: /tmp/loopd.jsonl
            graphite: carbon.example.com:2003
            prometheus: :9102
            prometheus-timers: summary
            prometheus-buckets: [0.1, 1, 10]
            percentiles: [50, 99.9]
            unix-socket: /run/loopd.sock
            unix-stream: /run/loopd-stream.sock
            unix-socket-mode: "600"
            max-series: 5000
            expire-after: 3
            tcp-idle-timeout: 30
            graphite-max-queued: 2048
            log-level: debug
            prefix: app
            prefix-counter: c
            prefix-gauge: g
            prefix-timer: t
            prefix-histogram: h
            prefix-set: s
            tags:
              host: web1
              canary: ""
            graphite-layout: etsy
            readers: 1
            mappings:
              - match: a.*
                name: b
                buckets: [0.5, 1]
            """)
        let configuration = settings.configuration
        #expect(configuration.listen.description == "127.0.0.2:9125")
        #expect(configuration.udpBuffer == 1_048_576 && configuration.maxLine == 4096)
        #expect(configuration.udpReadPause == 250 && configuration.readPause(granted: 4096) == .microseconds(250))
        #expect(configuration.flushInterval == 2.5 && configuration.output == "/tmp/loopd.jsonl")
        #expect(configuration.graphite?.description == "carbon.example.com:2003")
        #expect(configuration.prometheus?.description == "0.0.0.0:9102")
        #expect(configuration.prometheusTimers == .summary && configuration.prometheusBuckets == [0.1, 1, 10])
        #expect(configuration.percentiles == [50, 99.9])
        #expect(configuration.unixSocket == "/run/loopd.sock" && configuration.unixSocketMode == 0o600)
        #expect(configuration.unixStream == "/run/loopd-stream.sock")
        #expect(configuration.maxSeries == 5000 && configuration.expireAfter == 3)
        #expect(configuration.tcpIdleTimeout == 30 && configuration.graphiteMaxQueued == 2048)
        #expect(settings.logLevel == .debug)
        #expect(configuration.mapper?.rules.map(\.match) == ["a.*"])
        #expect(configuration.mapper?.rules.first?.buckets == [0.5, 1])
        #expect(configuration.mapper?.prefix == "app")
        #expect(
            configuration.mapper?.kindPrefixes
                == [.counter: "c", .gauge: "g", .timer: "t", .histogram: "h", .distribution: "h", .set: "s"])
        #expect(configuration.mapper?.tags == ["host:web1", "canary"])
        #expect(configuration.graphiteLayout == .etsy)
        #expect(configuration.readers == 1)
        // Every key the file may have was set above.
        #expect(ConfigFile.keys.count == 29)
    }

    @Test func flagsOverrideTheFileAndTheFileTheDefaults() throws {
        var flags = Settings.Flags()
        flags.port = 7000
        flags.percentiles = "75"
        flags.tags = ["env:dev"]
        let settings = try Self.settings(
            "port: 9125\nflush-interval: 3\npercentiles: [1, 2]\ntags: [env:prod, host:a]\n", flags: flags)
        #expect(settings.configuration.mapper?.tags == ["env:dev"], "--tag replaces the file's tags")
        #expect(settings.configuration.listen.port == 7000)
        #expect(settings.configuration.percentiles == [75])
        #expect(settings.configuration.flushInterval == 3)
        #expect(settings.configuration.maxLine == 8192, "the default")
        // Not set: 500 µs with a receive buffer of 2 MiB or more, else none.
        #expect(settings.configuration.udpReadPause == nil)
        #expect(settings.configuration.readPause(granted: 16 << 20) == .microseconds(500))
        #expect(settings.configuration.readPause(granted: 2 << 20) == .microseconds(500))
        #expect(settings.configuration.readPause(granted: (2 << 20) - 1) == nil)
        #expect(try Self.settings("udp-read-pause: 0\n").configuration.readPause(granted: 16 << 20) == nil, "0: none")
        let empty = try Self.settings("")
        #expect(empty.configuration.readers == Settings.cores, "one reader per core by default")
        #expect(empty.configuration.listen.description == "127.0.0.1:8125")
        #expect(empty.configuration.percentiles == [50, 90, 95, 99])
        #expect(empty.configuration.mapper == nil, "no rules and no namespace: lines are recorded as they come")
    }

    @Test(arguments: [
        ("port: -1\n", "loopd.yaml:1: port must be in 0...65535, got -1"),
        ("\n\nport: eighty\n", "loopd.yaml:3: port: expected a whole number, got \"eighty\""),
        ("flush-interval: 0\n", "loopd.yaml:1: flush-interval must be in 0.01...86400 seconds, got 0.0"),
        ("log-level: loud\n", "loopd.yaml:1: log-level must be one of"),
        ("prots: 1\n", "loopd.yaml:1: unknown key \"prots\"; the keys are"),
        ("port: 1\nport: 2\n", "loopd.yaml:2: not valid YAML: the key \"port\" is given twice (first on line 1)"),
        ("port: [1, 2]\n", "loopd.yaml:1: port: expected one value, not a list or a map"),
        ("- port\n", "loopd.yaml:1: expected keys and values"),
        ("port: [1\n", "loopd.yaml:1: not valid YAML: a [ or { opened on this line is not closed"),
        ("percentiles: [50, 0]\n", "loopd.yaml:1: percentiles: each percentile must be in (0, 100], got 0.0"),
        ("prometheus-buckets: [2, 1]\n", "loopd.yaml:1: prometheus-buckets: bounds must be strictly ascending"),
        ("graphite: nohost\n", "loopd.yaml:1: graphite nohost: expected host:port"),
        ("host: example.com\n", "loopd.yaml:1: host example.com: not a numeric"),
        ("unix-socket-mode: 999\n", "loopd.yaml:1: unix-socket-mode must be octal permissions"),
        ("unix-stream: ''\n", "loopd.yaml:1: unix-stream must be a path, got an empty string"),
        (
            "unix-socket: /run/a\nunix-stream: /run/a\n",
            "loopd.yaml:2: unix-stream must differ from loopd.yaml:1: unix-socket: both are /run/a"
        ),
        ("mappings: {}\n", "loopd.yaml:1: mappings: expected a list of rules"),
        ("prefix: loopd\n", "loopd.yaml:1: prefix would make every name one of loopd's own"),
        ("prefix-timer: a:b\n", "loopd.yaml:1: prefix-timer must not contain ':'"),
        ("tags: [host:web1, 'a,b']\n", "loopd.yaml:1: tags: each tag must be key:value or key"),
        ("tags: host\n", "loopd.yaml:1: tags: expected a list of tags"),
        ("graphite-layout: carbon\n", "loopd.yaml:1: graphite-layout must be loopd or etsy, got \"carbon\""),
        ("readers: 0\n", "loopd.yaml:1: readers must be in 1...\(Settings.cores) (the cores), got 0"),
        ("udp-read-pause: 1000001\n", "loopd.yaml:1: udp-read-pause must be in 0...1000000 microseconds, got 1000001"),
        ("readers: 4096\n", "loopd.yaml:1: readers must be in 1...\(Settings.cores) (the cores), got 4096"),
        ("mappings:\n  - name: x\n", "loopd.yaml:2: mapping rule: match is required"),
        ("mappings:\n  - match: a\n    nmae: x\n", "loopd.yaml:3: unknown mapping rule key \"nmae\""),
        (
            "mappings:\n  - match: a\n    match_type: fuzzy\n",
            "loopd.yaml:3: match_type must be glob or regex, got \"fuzzy\""
        ),
        ("mappings:\n  - match: a\n    action: keep\n", "loopd.yaml:3: action must be map or drop, got \"keep\""),
        ("mappings:\n  - match: a\n    match_metric_type: meter\n", "loopd.yaml:3: match_metric_type must be one of"),
        (
            "mappings:\n  - match: a.*\n  - match: b.*\n    name: x.$2\n",
            "loopd.yaml:4: mapping rule: name \"x.$2\": $2 names no capture"
        ),
        ("mappings:\n  - match: a\n    labels: [x]\n", "loopd.yaml:3: labels: expected keys and values"),
        (
            "mappings:\n  - match: a\n    buckets: [2, 1]\n",
            "loopd.yaml:3: mapping rule: buckets: bounds must be strictly ascending"
        ),
        (
            "mappings:\n  - match: a\n    action: drop\n    buckets: [1]\n",
            "a rule that drops takes no name, labels, percentiles or buckets"
        ),
        (
            "mappings:\n  - match: a\n    percentiles: [1, x]\n",
            "loopd.yaml:3: percentiles (line 3): expected numbers, got \"x\""
        ),
        // What a config file could otherwise put where no client line can.
        ("prefix: \"p\\rq\"\n", "loopd.yaml:1: prefix must not contain control characters"),
        ("prefix: \"a\\u0085b\"\n", "loopd.yaml:1: prefix must not contain control characters"),
        ("prefix: \(String(repeating: "a", count: 257))\n", "loopd.yaml:1: prefix must be at most 256 bytes, got 257"),
        ("tags: [\"a:\\e[31m\"]\n", "loopd.yaml:1: tags: each tag must be key:value or key"),
        (
            "tags: [\((0..<65).map { "t\($0)" }.joined(separator: ", "))]\n",
            "loopd.yaml:1: tags: at most 64 tags, got 65"
        ),
        ("mappings:\n  - match: a\n    name: \"a\\nb\"\n", "a name cannot contain control characters"),
        ("mappings:\n  - match: a\n    labels: {x: \"\\e[31m\"}\n", "a value cannot contain control characters"),
        ("mappings:\n  - match: a\n    labels: {x: ~}\n", "loopd.yaml:3: labels: each label is a name and one value"),
        (
            "mappings:\n  - match: a.*.*\n    name: x.$10\n",
            "loopd.yaml:3: mapping rule: name \"x.$10\": $1 followed by \"0\" is ambiguous: write ${1}"
        ),
        ("mappings:\n  - match: a.*\n    labels: {x: $1_y}\n", "$1 followed by \"_\" is ambiguous"),
        ("flush-interval: 0x1p3\n", "loopd.yaml:1: flush-interval: expected a number, got \"0x1p3\""),
        ("prometheus-buckets: [0x10]\n", "expected numbers, got \"0x10\""),
        (
            "log-level: \"\\e[2Jx\\ny\"\n",
            #"log-level must be one of trace, debug, info, notice, warning, error, critical; got "\u{1B}[2Jx\ny""#
        ),
        ("\tport: 1\n", "loopd.yaml:1: not valid YAML: a tab in the indentation"),
        ("port: 1\nprefix: a\u{0}b\n", "loopd.yaml:2: not valid YAML: U+0000 is a control character"),
        ("port: 1\r\nprefix: a\u{2028}b\n", "loopd.yaml:2: not valid YAML: U+2028 is a control character"),
    ])
    func aProblemIsNamedWithItsLine(text: String, message: String) {
        let problem = Self.problem(text)
        #expect(problem.contains(message), "\(problem)")
    }

    @Test func aFlagsProblemNamesTheFlagNotTheFile() {
        var flags = Settings.Flags()
        flags.port = -1
        #expect(Self.problem("port: 1\n", flags: flags).hasPrefix("--port must be in 0...65535, got -1"))
        flags = Settings.Flags()
        flags.percentiles = "50,x"
        #expect(Self.problem("", flags: flags) == "--percentiles 50,x: expected numbers separated by commas")
    }

    @Test func aRuleTakesStatsdExporterKeys() throws {
        let settings = try Self.settings(
            #"""
            mappings:
              - match: 'svc\.(\w+)\.time'
                match_type: regex
                match_metric_type: observer
                name: svc.time
                labels:
                  service: $1
                percentiles: [50, 99]
              - match: junk.*
                action: drop
            """#)
        let rules = try #require(settings.configuration.mapper?.rules)
        #expect(rules.count == 2)
        #expect(rules[0].matchType == .regex && rules[0].kinds == [.timer, .histogram, .distribution])
        #expect(rules[0].labels.map(\.key) == ["service"] && rules[0].percentiles == [50, 99])
        #expect(rules[1].action == .drop)
    }

    @Test func aTypesPrefixAfterTheGlobalOneIsNotReservedAndNullTagsHaveNoValue() throws {
        let settings = try Self.settings("prefix: x\nprefix-counter: loopd\ntags:\n  canary: ~\n  empty:\n  host: a\n")
        #expect(settings.configuration.mapper?.kindPrefixes[.counter] == "loopd")
        #expect(settings.configuration.mapper?.tags == ["canary", "empty", "host:a"])
    }

    @Test func aNullValueLeavesItsKeyUnset() throws {
        let settings = try Self.settings("prefix: ~\noutput: null\nmax-series: NULL\ntags: ~\nmappings:\n")
        #expect(settings.configuration.mapper == nil, "no prefix, no tags, no rules")
        #expect(settings.configuration.output == "-")
        #expect(settings.configuration.maxSeries == 100_000)
        var flags = Settings.Flags()
        flags.prefix = "app"
        #expect(try Self.settings("prefix: ~\n", flags: flags).configuration.mapper?.prefix == "app")
    }

    @Test func aHugeValueIsQuotedCutShort() {
        let huge = String(repeating: "x", count: 200_000)
        for text in [
            "mappings:\n  - match: a\n    match_type: \(huge)\n", "log-level: \(huge)\n", "\(huge): 1\n",
            "port: \(huge)\n", "prefix: a:\(huge)\n",
        ] {
            let problem = Self.problem(text)
            #expect(
                problem.count < 600 && !problem.contains(String(repeating: "x", count: 81)), "\(problem.prefix(700))")
        }
    }

    @Test func aYAMLErrorIsShortAndDoesNotEchoTheFile() {
        let secret = "graphite: secret-carbon.internal:2003\n" + String(repeating: "# padding\n", count: 5000)
        let problem = Self.problem(secret + "port: 1\nport: 2\n")
        #expect(problem.contains("not valid YAML") && problem.count < 400, "\(problem.prefix(500))")
        #expect(!problem.contains("secret-carbon"))
    }

    @Test func anEmptyFileSaysSo() throws {
        #expect(try Self.settings("").configFileIsEmpty)
        #expect(try !Self.settings("port: 1\n").configFileIsEmpty)
        #expect(try !Self.settings("mappings:\n  - match: a\n").configFileIsEmpty)
    }

    @Test func aMissingOrHugeFileIsRefused() throws {
        #expect(throws: ConfigFile.Problem.self) { _ = try ConfigFile.load("/nonexistent/loopd.yaml") }
        let path = "/tmp/loopd-config-test-\(getpid()).yaml"
        defer { unlink(path) }
        let huge = "# " + String(repeating: "x", count: ConfigFile.maxBytes) + "\n"
        writeFile(path, huge)
        #expect {
            _ = try ConfigFile.load(path)
        } throws: { error in
            "\(error)".contains("larger than 1048576 bytes")
        }
    }
}

/// Writes `text` to `path`.
private func writeFile(_ path: String, _ text: String) {
    let file = fopen(path, "w")!
    _ = text.withCString { fputs($0, file) }
    fclose(file)
}

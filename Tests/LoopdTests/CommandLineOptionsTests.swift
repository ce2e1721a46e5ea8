import Testing

@testable import loopd

@Suite("loopd's command line")
struct CommandLineOptionsTests {
    func problem(_ arguments: [String]) -> String {
        do {
            _ = try CommandLineOptions.parse(arguments)
            return "read"
        } catch {
            return error.description
        }
    }

    @Test func everyOptionSetsItsSetting() throws {
        var arguments: [String] = []
        for option in CommandLineOptions.options {
            let value =
                [
                    "port", "readers", "udp-buffer", "udp-read-pause", "max-line", "max-series", "expire-after",
                    "graphite-max-queued",
                ].contains(option.name)
                ? "7" : option.name.hasSuffix("interval") || option.name.hasSuffix("timeout") ? "1.5" : "v"
            arguments += ["--\(option.name)", value]
        }
        let parsed = try CommandLineOptions.parse(arguments + ["--tag=b:c"])
        let flags = parsed.flags
        #expect(parsed.action == .run && parsed.config == "v")
        #expect(flags.port == 7 && flags.readers == 7 && flags.udpBuffer == 7 && flags.maxLine == 7)
        #expect(flags.udpReadPause == 7)
        #expect(flags.maxSeries == 7 && flags.expireAfter == 7 && flags.graphiteMaxQueued == 7)
        #expect(flags.flushInterval == 1.5 && flags.tcpIdleTimeout == 1.5)
        let texts = [
            flags.host, flags.output, flags.graphite, flags.prometheus, flags.prometheusTimers, flags.prometheusBuckets,
            flags.percentiles, flags.prefix, flags.prefixCounter, flags.prefixGauge, flags.prefixTimer,
            flags.prefixHistogram, flags.prefixSet, flags.graphiteLayout, flags.unixSocket, flags.unixStream,
            flags.unixSocketMode, flags.logLevel,
        ]
        #expect(texts.allSatisfy { $0 == "v" })
        #expect(flags.tags == ["v", "b:c"], "--tag repeats, in order")
        // Every option is in the help, and the help names no option that does not exist.
        let help = CommandLineOptions.help
        #expect(CommandLineOptions.options.allSatisfy { help.contains("  --\($0.name) <\($0.value)>\n") })
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 100 })
    }

    @Test(arguments: [
        (["--port", "-1"], "read"),
        (["--port=8125", "--host=::1"], "read"),
        (["--output", "--port"], "read"),
        (["--port", "x"], "--port: expected a whole number, got \"x\""),
        (["--flush-interval", "soon"], "--flush-interval: expected a number, got \"soon\""),
        (["--port", "1", "--port", "2"], "--port is given twice"),
        (["--bogus", "1"], "unknown option --bogus"),
        (["--port"], "--port needs a value (--port <n>)"),
        (["8125"], "unexpected argument \"8125\": every option is --name value"),
        (["-p", "1"], "unexpected argument \"-p\": every option is --name value"),
    ])
    func aBadCommandLineNamesTheOptionAndTheValue(arguments: [String], expected: String) {
        #expect(problem(arguments) == expected)
    }

    @Test func helpAndVersionWinWhereverTheyAre() throws {
        #expect(try CommandLineOptions.parse(["--port", "1", "-h"]).action == .help)
        #expect(try CommandLineOptions.parse(["--help"]).action == .help)
        #expect(try CommandLineOptions.parse(["--version", "--bogus"]).action == .version)
        #expect(try CommandLineOptions.parse([]).action == .run)
    }
}

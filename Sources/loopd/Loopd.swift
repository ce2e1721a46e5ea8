import Logging
import LoopdCore
import ReactiveLoopCore
import ReactiveLoopUV

#if canImport(Glibc)
    import Glibc
#endif

/// `loopd`: the command line. Reads the flags (`CommandLineOptions`), then runs a `Daemon` on the
/// process's main thread until SIGTERM or SIGINT. Exits 64 for a bad flag or config file, 1 when
/// it cannot start (a port in use, say), 0 after a final flush.
@main
enum Loopd {
    static func main() {
        let allocator = AllocatorPolicy.apply()
        let options: CommandLineOptions
        do {
            options = try CommandLineOptions.parse(Array(CommandLine.arguments.dropFirst()))
        } catch {
            usageError(error.description)
        }
        switch options.action {
        case .help:
            StandardOutput.write(CommandLineOptions.help)
            exit(0)
        case .version:
            StandardOutput.write(LoopdVersion.string + "\n")
            exit(0)
        case .run: break
        }
        // Until the loop handles SIGHUP, an early one (a reload while loopd starts) would end
        // the process: it is ignored until then.
        signal(SIGHUP, SIG_IGN)
        let (flags, config) = (options.flags, options.config)
        // The config file is read here, once (a `--config <(…)` or a FIFO cannot be read twice).
        let settings: Settings
        do {
            settings = try Settings.resolve(flags, configPath: config)
        } catch {
            usageError(error.description)
        }
        LoggingSystem.bootstrap { label in
            var handler = QueuedLogHandler(label: label)
            handler.logLevel = settings.logLevel
            return handler
        }
        let logger = Logger(label: "loopd")
        logger.log(
            level: allocator == .fixed ? .debug : .info, "\(AllocatorPolicy.description(of: allocator))")
        do {
            let daemon = try Daemon(
                settings.configuration, logger: logger,
                reload: config.map { path in { try Settings.resolve(flags, configPath: path) } })
            daemon.run()
        } catch {
            StandardError.write("loopd: \(error)\n")
            LogOutput.shared.flush(within: 0.5)
            exit(1)
        }
        LogOutput.shared.flush(within: 0.5)
    }

    /// Reports a bad flag or config file and exits 64 (`EX_USAGE`).
    static func usageError(_ message: String) -> Never {
        StandardError.write("loopd: \(message)\nRun loopd --help for the options.\n")
        exit(64)
    }
}

/// Writes to standard output without Foundation.
enum StandardOutput {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(1, bytes.baseAddress, bytes.count) }
    }
}

/// Writes to standard error without Foundation.
enum StandardError {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}

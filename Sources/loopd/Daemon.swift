import Dispatch
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Logging
import LoopdCore
import ReactiveLoopCore
import ReactiveLoopUV
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon: sockets, the flush timer and the signals, wired on one `EventLoop` driven by
/// the process's main thread.
///
/// Where each piece runs:
/// - the loop thread: UDP datagrams and TCP lines (`UDPSocket.datagrams`,
///   `TCPConnection.lineBytes`), parsed into the `Ingest` stage's table as they arrive; the
///   flush timer (`SignalProducer.timer` on a `LoopScheduler`), which swaps the table; the
///   signals; the Graphite connection and the Prometheus endpoint;
/// - the flush queue (a serial `DispatchQueue`): summarising and formatting each flushed table.
///   Ingestion never waits for it; a tick that finds the previous flush still being formatted
///   is skipped (the table goes on accumulating, so nothing is lost) and counted;
/// - the output writer (`OutputWriter`, a thread of its own): writing the JSON lines, so that a
///   stalled file or pipe delays neither the other outputs nor ingestion nor the shutdown.
final class Daemon: @unchecked Sendable {  // Loop-thread state is confined to the loop; see each field.
    /// The checked flags.
    struct Configuration {
        var listen: SocketAddress
        var udpBuffer: Int
        /// `--udp-read-pause`, in microseconds (0: reading never pauses); nil: not set, so
        /// `defaultReadPause` if the kernel granted a receive buffer of `bufferForReadPause`.
        var udpReadPause: Int?
        var maxLine: Int
        var flushInterval: Double
        var output: String
        var graphite: Endpoint?
        var prometheus: SocketAddress?
        var maxSeries: Int
        var expireAfter: UInt32
        var tcpIdleTimeout: Double = 600
        var graphiteMaxQueued = 16 << 20
        var prometheusTimers = PrometheusOptions.Timers.histogram
        var prometheusBuckets = PrometheusOptions.defaultBuckets
        var unixSocket: String?
        /// `--unix-stream`: a Unix stream socket, read line by line as TCP connections are.
        var unixStream: String?
        var unixSocketMode: UInt32 = 0o660
        var percentiles: [Double] = Settings.defaultPercentiles
        /// The mapping rules and the namespace; nil: lines are recorded as they come.
        var mapper: Mapper?
        var graphiteLayout = GraphiteFormat.Layout.loopd
        /// UDP sockets on the port (`SO_REUSEPORT`), each read on a loop of its own.
        var readers = 1

        /// The UDP sockets' `readPause`, for a receive buffer of `granted` bytes (as
        /// `UDPSocket.receiveBufferSize` reports it).
        func readPause(granted: Int) -> Duration? {
            guard let udpReadPause else { return granted >= Daemon.bufferForReadPause ? Daemon.defaultReadPause : nil }
            return udpReadPause == 0 ? nil : .microseconds(udpReadPause)
        }
    }

    /// The read pause when `--udp-read-pause` is not set (see docs/loopd.md).
    static let defaultReadPause = Duration.microseconds(500)
    /// The smallest receive buffer (as `SO_RCVBUF` reports it) with which reading pauses when
    /// `--udp-read-pause` is not set: with a buffer the kernel capped at its default
    /// `net.core.rmem_max` (208 KiB), loopd can lose a few datagrams at high rates even without
    /// pauses (docs/performance.md), and a pause would hold more in it.
    static let bufferForReadPause = 2 << 20

    /// The most TCP and Unix stream clients connected at once; one beyond it is disconnected at
    /// once and counted (`loopd.tcp_connections_refused`).
    static let maxTCPConnections = 4096

    /// The longest DogStatsD frame a Unix stream client may send, in bytes (as the longest UDP
    /// datagram); a longer one disconnects it and counts as a line too long.
    static let maxFrame = 65536

    /// A failure to start, naming the flag and the value.
    struct StartupError: Error, CustomStringConvertible {
        var description: String
    }

    /// The configuration loopd started with; `reloadable` holds what a reload changed since.
    let configuration: Configuration
    let logger: Logger
    /// Reads the settings again (the config file and the flags), for SIGHUP and POST /-/reload;
    /// nil without a config file.
    private let reloadSettings: (() throws -> Settings)?
    /// What a reload can change, as in force now. Confined to the loop thread.
    private var reloadable: Reloadable
    /// The settings a reload applies while loopd runs; every other one needs a restart.
    struct Reloadable: Equatable {
        var percentiles: [Double]
        var expireAfter: UInt32
        var mappingRules: Int
    }

    let loop: EventLoop
    let scheduler: LoopScheduler
    let udp: UDPSocket
    /// `--unix-socket`: a Unix datagram socket, read as the UDP socket is.
    let unix: UnixDatagramSocket?
    let tcp: TCPListener
    /// `--unix-stream`: a Unix stream socket, whose connections are read as TCP ones are.
    let unixStream: UnixStreamListener?
    /// The readers beyond the first (which is `udp`, on `loop`), and their loops.
    let readers: [Reader]
    private let readerLoops: EventLoopGroup?
    let output: OutputWriter
    let graphite: GraphiteOutput?
    let prometheus: PrometheusEndpoint?
    let flushQueue = DispatchQueue(label: "loopd.flush")
    /// systemd's notifications, when loopd runs as a `Type=notify` service.
    let systemd = SystemdNotifier.fromEnvironment()
    /// The Prometheus exposition's renderer, with the histograms' cumulative buckets. Confined
    /// to the flush queue.
    private let prometheusExposition: PrometheusExposition

    // Confined to the loop thread.
    private let ingest: Ingest
    private let inputs = CompositeDisposable()
    private var connections: [ObjectIdentifier: any StreamConnection] = [:]
    private var stopping = false
    private var exiting = false
    private var flushTimer: (any Disposable)?
    /// Confined to the flush queue (each flush's report is made there, once the readers'
    /// counts are in).
    private var selfMetrics = SelfMetrics()
    /// The readers' tables merged, kept from one flush to the next with their totals (see
    /// `SeriesTable.MergeState`). Confined to the flush queue.
    private var mergeState = SeriesTable.MergeState()
    /// The last flush's summaries, whose storage the next flush reuses (see
    /// `Flush.summaries(into:)`). Confined to the flush queue.
    private var summaryStorage: [Summary] = []
    private var kernelDropsAtStart: UInt64 = 0
    // Whether a flush is being formatted on the flush queue.
    private var formatting = false
    private var skippedFlushes: UInt64 = 0
    private var refusedConnections: UInt64 = 0
    // When the current interval began (the start or the last flush), on the monotonic clock.
    private var intervalStart = DispatchTime.now().uptimeNanoseconds
    private var latestKernelDrops: UInt64 = 0
    private var reloadsApplied: UInt64 = 0
    private var reloadsRefused: UInt64 = 0
    private let lastFlushNanoseconds = Atomic<UInt64>(0)  // Written by the flush queue, read on the loop.
    /// Series left out of the last Prometheus exposition (name or labels taken). Written by the
    /// flush queue, read on the loop.
    private let prometheusLeftOut = Atomic<Int>(0)
    /// Series merged into another in the last Prometheus exposition. Flush queue → loop.
    private let prometheusMerged = Atomic<Int>(0)

    /// Opens the output, the sockets and the outputs' connections; throws what cannot be
    /// opened, naming its flag.
    init(
        _ configuration: Configuration, logger: Logger,
        reload: (() throws -> Settings)? = nil
    ) throws(StartupError) {
        self.configuration = configuration
        self.logger = logger
        self.reloadSettings = reload
        reloadable = Reloadable(
            percentiles: configuration.percentiles, expireAfter: configuration.expireAfter,
            mappingRules: configuration.mapper?.rules.count ?? 0)

        do {
            loop = try EventLoop()
        } catch {
            throw StartupError(description: "cannot create the event loop: \(error)")
        }
        scheduler = LoopScheduler(loop: loop)
        output = OutputWriter(try FileOutput(path: configuration.output), logger: logger)
        (udp, tcp) = try Self.openInputs(configuration, on: loop)
        let (udp, tcp) = (udp, tcp)
        (readers, readerLoops) = try Self.openReaders(configuration, at: udp.localAddress, readPause: udp.readPause) {
            udp.close()
            tcp.close()
        }
        let (loop, scheduler) = (loop, scheduler)
        if let endpoint = configuration.graphite {
            graphite = GraphiteOutput(
                to: endpoint, on: loop, scheduler: scheduler, maxQueuedBytes: configuration.graphiteMaxQueued,
                logger: logger)
        } else {
            graphite = nil
        }
        if let path = configuration.unixSocket {
            do {
                unix = try UnixDatagramSocket(boundTo: path, on: loop, mode: configuration.unixSocketMode)
            } catch {
                udp.close()
                tcp.close()
                throw StartupError(description: "--unix-socket \(path): cannot receive there: \(error.message)")
            }
        } else {
            unix = nil
        }
        if let path = configuration.unixStream {
            do {
                unixStream = try UnixStreamListener(boundTo: path, on: loop, mode: configuration.unixSocketMode)
            } catch {
                udp.close()
                tcp.close()
                unix?.close()
                throw StartupError(description: "--unix-stream \(path): cannot listen there: \(error.message)")
            }
        } else {
            unixStream = nil
        }
        if let address = configuration.prometheus {
            do {
                prometheus = try PrometheusEndpoint(at: address, on: loop, scheduler: scheduler, logger: logger)
            } catch {
                udp.close()
                tcp.close()
                unix?.close()
                unixStream?.close()
                throw StartupError(description: "--prometheus \(address): cannot listen there: \(error.message)")
            }
        } else {
            prometheus = nil
        }
        ingest = Ingest(
            maxLineLength: configuration.maxLine, maxSeries: configuration.maxSeries, mapper: configuration.mapper)
        prometheusExposition = PrometheusExposition(
            options: PrometheusOptions(
                timers: configuration.prometheusTimers, buckets: configuration.prometheusBuckets,
                flushInterval: configuration.flushInterval))
    }

    /// The UDP socket and the TCP listener, on one port. With `--port 0`, TCP takes the port the
    /// system gave UDP; if that port is taken for TCP, another pair is tried (a few times).
    private static func openInputs(_ configuration: Configuration, on loop: EventLoop) throws(StartupError) -> (
        UDPSocket, TCPListener
    ) {
        let listen = configuration.listen
        for attempt in 1...10 {
            let udp: UDPSocket
            do {
                udp = try UDPSocket(
                    boundTo: listen, on: loop, receiveBufferSize: configuration.udpBuffer,
                    reusePort: configuration.readers > 1)
            } catch {
                throw StartupError(description: "--host/--port \(listen): cannot receive UDP there: \(error.message)")
            }
            let tcpAddress = try! SocketAddress(host: udp.localAddress.host, port: udp.localAddress.port)
            // Before the loop runs, on the thread that will run it.
            udp.readPause = configuration.readPause(granted: udp.receiveBufferSize)
            do {
                return (udp, try TCPListener(boundTo: tcpAddress, on: loop))
            } catch {
                udp.close()
                if listen.port == 0 && attempt < 10 && error.code == -EADDRINUSE { continue }
                throw StartupError(
                    description: "--host/--port \(tcpAddress): cannot listen for TCP there: \(error.message)")
            }
        }
        preconditionFailure("Internal inconsistency: openInputs left its loop")
    }

    /// The readers beyond the first, each with a socket bound to `address` (with
    /// `SO_REUSEPORT`, as the first's) on a loop of its own; on failure, `cleanUp` runs.
    private static func openReaders(
        _ configuration: Configuration, at address: SocketAddress, readPause: Duration?, cleanUp: () -> Void
    ) throws(StartupError) -> ([Reader], EventLoopGroup?) {
        guard configuration.readers > 1 else { return ([], nil) }
        let group: EventLoopGroup
        do {
            group = try EventLoopGroup(threads: configuration.readers - 1)
        } catch {
            cleanUp()
            throw StartupError(
                description: "--readers \(configuration.readers): cannot start the readers' loops: \(error)")
        }
        var readers: [Reader] = []
        for loop in group.loops {
            do {
                readers.append(
                    try Reader(
                        address, on: loop, receiveBufferSize: configuration.udpBuffer,
                        readPause: readPause, maxLine: configuration.maxLine,
                        maxSeries: configuration.maxSeries, mapper: configuration.mapper))
            } catch {
                for reader in readers { reader.udp.close() }
                group.shutdownGracefully()
                cleanUp()
                throw StartupError(
                    description:
                        "--readers \(configuration.readers): cannot bind another UDP socket to \(address): \(error.message)"
                )
            }
        }
        return (readers, group)
    }

    /// Runs until SIGTERM or SIGINT and the final flush.
    func run() {
        // Set up on the loop thread, as soon as it runs.
        _ = loop.execute { [self] in start() }
        loop.run()
        readerLoops?.shutdownGracefully()
        logger.info("stopped")
    }

    // MARK: Loop thread

    private func start() {
        let granted = udp.receiveBufferSize
        let pauseDescription =
            switch (udp.readPause, configuration.udpReadPause) {
            case let (pause?, _):
                "\(pause.components.seconds * 1_000_000 + pause.components.attoseconds / 1_000_000_000_000) µs"
            case (nil, 0): "none (udp-read-pause 0)"
            case (nil, _):
                "none, as the buffer granted is under \(Self.bufferForReadPause) bytes (raise net.core.rmem_max, or set --udp-read-pause)"
            }
        logger.info(
            "loopd \(LoopdVersion.string) listening on \(udp.localAddress) (UDP and TCP), \(readers.count + 1) UDP reader\(readers.isEmpty ? "" : "s"); UDP receive buffer: asked \(configuration.udpBuffer) bytes, the kernel granted \(granted) (SO_RCVBUF, half of it for data); read pause: \(pauseDescription)"
        )
        prometheus?.onReload = { [self] in reload("POST /-/reload") }
        prometheus?.start()
        if let prometheus { logger.info("serving Prometheus metrics at http://\(prometheus.address)/metrics") }
        if let graphite { logger.info("sending Graphite plaintext to \(graphite.endpoint)") }
        logger.info(
            "writing a JSON line per flush to \(configuration.output == "-" ? "standard output" : configuration.output)"
        )
        kernelDropsAtStart = kernelDrops()
        intervalStart = DispatchTime.now().uptimeNanoseconds

        let maxLine = configuration.maxLine
        Self.log(ingest, to: logger, maxSeries: configuration.maxSeries, reader: "")
        for reader in readers { reader.start(logger: logger, maxSeries: configuration.maxSeries) }
        // Values and failures apart: each datagram reaches the ingest as a plain argument, not
        // wrapped in an event.
        inputs += udp.datagrams.start(
            Signal.Observer(
                value: { [self] datagram in
                    datagram.bytes.withUnsafeBytes { ingest.ingest(datagram: $0, truncated: datagram.isTruncated) }
                },
                failed: { [self] error in logger.error("UDP receive failed: \(error)") }))
        if let unix {
            logger.info("receiving on the Unix datagram socket \(unix.path)")
            inputs += unix.datagrams.start(
                Signal.Observer(
                    value: { [self] datagram in
                        datagram.bytes.withUnsafeBytes { ingest.ingest(datagram: $0, truncated: datagram.isTruncated) }
                    },
                    failed: { [self] error in logger.error("Unix socket receive failed: \(error)") }))
        }
        inputs += tcp.connections.start { [self] event in
            switch event {
            case let .value(connection):
                accept(connection, from: "TCP client \(connection.remoteAddress)") {
                    connection.lineBytes(maxLength: maxLine, unterminatedTail: $0).map(StreamRecord.line)
                }
            case let .failed(error): logger.error("TCP accept failed: \(error)")
            default: break
            }
        }
        if let unixStream {
            logger.info("receiving on the Unix stream socket \(unixStream.path)")
            var clients = 0
            inputs += unixStream.connections.start { [self] event in
                switch event {
                case let .value(connection):
                    // Unix stream clients have no address: a number tells them apart in the log.
                    clients += 1
                    accept(connection, from: "Unix stream client \(clients) at \(unixStream.path)") {
                        connection.bytes.statsDRecords(
                            maxLine: maxLine, maxFrame: Self.maxFrame, unterminatedTail: $0)
                    }
                case let .failed(error): logger.error("Unix stream accept failed: \(error)")
                default: break
                }
            }
        }
        let interval = DispatchTimeInterval.nanoseconds(Int(configuration.flushInterval * 1e9))
        flushTimer = SignalProducer<Date, Never>.timer(interval: interval, on: scheduler)
            .startWithValues { [self] _ in flush(completion: nil) }
        prometheus?.ready.store(true, ordering: .relaxed)
        if getenv("NOTIFY_SOCKET") != nil && systemd == nil {
            logger.warning(
                "NOTIFY_SOCKET names no socket loopd can use (an absolute path or @name): not notifying systemd")
        }
        if let systemd {
            let receiving =
                [udp.localAddress.description] + (unix.map { [$0.path] } ?? [])
                + (unixStream.map { [$0.path] } ?? [])
            if !systemd.notify(
                "READY=1\nSTATUS=receiving on \(receiving.joined(separator: " and "))\nMAINPID=\(getpid())")
            {
                logger.warning("could not notify systemd at NOTIFY_SOCKET: \(String(cString: strerror(errno)))")
            }
            if let microseconds = systemd.watchdogMicroseconds {
                // From the loop thread: a loop that stops turning stops the pings. At most
                // every millisecond, whatever WATCHDOG_USEC says.
                let ping = DispatchTimeInterval.microseconds(Int(min(max(microseconds / 2, 1000), UInt64(Int32.max))))
                inputs += SignalProducer<Date, Never>.timer(interval: ping, on: scheduler)
                    .startWithValues { _ in systemd.notify("WATCHDOG=1") }
            }
        }
        inputs += loop.signals(SIGTERM, SIGINT, SIGHUP).startWithValues { [self] signal in
            if signal == SIGHUP {
                _ = reload("SIGHUP")
            } else {
                stop(signal == SIGTERM ? "SIGTERM" : "SIGINT")
            }
        }
    }

    /// SIGHUP and POST /-/reload: reopens the output file, then reads the config file again
    /// (with `--config`) and applies what a reload can change: the mapping rules, the
    /// percentiles and `expire-after`. A file with a problem is refused whole and the running
    /// settings stay; settings that need a restart are named in the log, and left as they are.
    /// Returns whether the file was applied, and what happened.
    private func reload(_ cause: String) -> (applied: Bool, message: String) {
        logger.info("\(cause): reopening \(configuration.output)")
        output.reopen()
        guard let reloadSettings else { return (true, "reopened the output; there is no --config file to read\n") }
        let settings: Settings
        do {
            settings = try reloadSettings()
        } catch {
            reloadsRefused += 1
            logger.error("\(cause): the config file is refused, the running settings stay: \(error)")
            return (false, "the config file is refused, the running settings stay: \(error)\n")
        }
        let new = settings.configuration
        let old = configuration
        if settings.configFileIsEmpty {
            logger.warning(
                "\(cause): the config file is empty: no mapping rules, and every setting from its flag or its default (a file being written? write it elsewhere, then rename it over the old one)"
            )
        }
        var restart = [String]()
        func compare<Value: Equatable>(_ key: String, _ a: Value, _ b: Value) { if a != b { restart.append(key) } }
        compare("host/port", old.listen.description, new.listen.description)
        compare("udp-buffer", old.udpBuffer, new.udpBuffer)
        compare("udp-read-pause", old.udpReadPause, new.udpReadPause)
        compare("max-line", old.maxLine, new.maxLine)
        compare("flush-interval", old.flushInterval, new.flushInterval)
        compare("output", old.output, new.output)
        compare("graphite", old.graphite, new.graphite)
        compare("prometheus", old.prometheus?.description, new.prometheus?.description)
        compare("prometheus-timers", old.prometheusTimers, new.prometheusTimers)
        compare("prometheus-buckets", old.prometheusBuckets, new.prometheusBuckets)
        compare("unix-socket", old.unixSocket, new.unixSocket)
        compare("unix-stream", old.unixStream, new.unixStream)
        compare("unix-socket-mode", old.unixSocketMode, new.unixSocketMode)
        compare("max-series", old.maxSeries, new.maxSeries)
        compare("tcp-idle-timeout", old.tcpIdleTimeout, new.tcpIdleTimeout)
        compare("graphite-max-queued", old.graphiteMaxQueued, new.graphiteMaxQueued)
        compare("log-level", logger.logLevel, settings.logLevel)
        compare("graphite-layout", old.graphiteLayout, new.graphiteLayout)
        compare("readers", old.readers, new.readers)
        // Every reader takes the new rules before the reload answers: a line sent after the
        // answer goes through them, whichever reader reads it.
        ingest.setMapper(new.mapper)
        for reader in readers { reader.setMapper(new.mapper) }
        reloadable = Reloadable(
            percentiles: new.percentiles, expireAfter: new.expireAfter, mappingRules: new.mapper?.rules.count ?? 0)
        reloadsApplied += 1
        var message =
            "applied \(reloadable.mappingRules) mapping rules, percentiles \(new.percentiles.map(Self.shortNumber).joined(separator: ",")), expire-after \(new.expireAfter)"
        if !restart.isEmpty { message += "; changed but applied only at a restart: \(restart.joined(separator: ", "))" }
        if restart.isEmpty { logger.info("\(cause): \(message)") } else { logger.warning("\(cause): \(message)") }
        return (true, message + "\n")
    }

    /// `50` for 50.0, `99.9` as is.
    static func shortNumber(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    /// Reads what `connection` sends into the table until it ends: `records`, given what to do
    /// with an unfinished last record, makes the records of its bytes. `peer` names it in the
    /// log.
    private func accept(
        _ connection: any StreamConnection, from peer: String,
        records: (@escaping (ReceivedBytes) -> Void) -> SignalProducer<StreamRecord, UVError>
    ) {
        guard connections.count < Self.maxTCPConnections else {
            refusedConnections += 1
            if refusedConnections == 1 || refusedConnections.isMultiple(of: 1000) {
                logger.warning(
                    "\(Self.maxTCPConnections) TCP and Unix stream clients connected: disconnecting new ones (\(refusedConnections) so far)"
                )
            }
            return connection.close()
        }
        if configuration.tcpIdleTimeout > 0 { connection.setLimits(.init(idleTimeout: configuration.tcpIdleTimeout)) }
        let id = ObjectIdentifier(connection)
        connections[id] = connection
        logger.debug("\(peer) connected")
        // The run's entry in `inputs` goes when the connection ends, so that short-lived
        // connections do not pile up there.
        var entry: (any Disposable)?
        let ended = { [self] in
            connections[id] = nil
            entry?.dispose()
            entry = nil
        }
        // A last line the client did not end before closing may be cut short: it is not
        // recorded, and counted as a bad line.
        let unterminated = { [self] (tail: ReceivedBytes) in
            tail.withUnsafeBytes { ingest.reject(.unterminated, $0) }
        }
        let run = records(unterminated).start { [self] event in
            switch event {
            case let .value(.line(line)): line.withUnsafeBytes { ingest.ingest(line: $0) }
            case let .value(.frame(payload)): ingest.ingest(datagram: payload, truncated: false)
            case let .failed(error):
                if error.code == -EMSGSIZE {
                    ingest.reject(.tooLong, UnsafeRawBufferPointer(start: nil, count: 0))
                    let what =
                        error.operation.hasPrefix("a DogStatsD frame")
                        ? error.operation : "a line longer than --max-line \(configuration.maxLine) bytes"
                    logger.warning("disconnecting \(peer): \(what)")
                } else {
                    logger.info("\(peer) failed: \(error)")
                }
                connection.close()
                ended()
            case .completed, .interrupted:
                ended()
            }
        }
        if connections[id] != nil { entry = inputs += run }
    }

    /// Ends the interval and hands the table to the flush queue; `completion` runs on the loop
    /// thread once every output has been given the flush and the JSON line is written (or
    /// failed, or was dropped). A tick (no `completion`) while the previous flush is still being
    /// formatted is skipped and counted: the interval goes on, so nothing is lost.
    private func flush(completion: (@Sendable () -> Void)?) {
        if formatting && completion == nil {
            skippedFlushes += 1
            if skippedFlushes == 1 || skippedFlushes.isMultiple(of: 100) {
                logger.warning(
                    "a flush takes longer than --flush-interval \(configuration.flushInterval) s: skipping a tick (\(skippedFlushes) so far); the interval goes on"
                )
            }
            return
        }
        formatting = true
        let started = DispatchTime.now().uptimeNanoseconds
        // The interval as it was, not as configured: a busy loop or a skipped tick makes it
        // longer, and rates computed from it stay true.
        let intervalSeconds = Double(started &- intervalStart) / 1e9
        intervalStart = started
        let expireAfter = reloadable.expireAfter
        let (events, serviceChecks) = ingest.takeEvents()
        let main = Reader.Part(
            table: ingest.endInterval(expireAfter: expireAfter), counts: ingest.counts, events: events,
            serviceChecks: serviceChecks, kernelDrops: kernelDrops() &- kernelDropsAtStart)
        var daemon = SelfMetrics.Daemon()
        daemon.outputDroppedFlushes = output.output.droppedFlushes.load(ordering: .relaxed)
        daemon.skippedFlushes = skippedFlushes
        daemon.tcpConnectionsRefused =
            refusedConnections &+ UInt64(tcp.acceptFailures) &+ UInt64(unixStream?.acceptFailures ?? 0)
        daemon.flushDurationSeconds = Double(lastFlushNanoseconds.load(ordering: .relaxed)) / 1e9
        if let prometheus {
            daemon.prometheus = (
                prometheus.refusedConnections.load(ordering: .relaxed), prometheusLeftOut.load(ordering: .relaxed),
                prometheusMerged.load(ordering: .relaxed)
            )
        }
        daemon.graphiteDroppedLines = graphite?.droppedLines
        if reloadSettings != nil { daemon.configReloads = (reloadsApplied, reloadsRefused) }

        let timestamp = Self.wallClock()
        let percentiles = reloadable.percentiles
        collectParts(main, expireAfter: expireAfter) { [self, daemon] parts in
            // The readers' intervals, merged: one table, the counts and drops of all.
            var daemon = daemon
            daemon.udpKernelDrops = parts.reduce(0) { $0 &+ $1.kernelDrops }
            let counts = parts.dropFirst().reduce(parts[0].counts) { $0 + $1.counts }
            let table = SeriesTable.merging(parts.map(\.table), state: &mergeState)
            let metrics = selfMetrics.report(counts, daemon, table: table)
            let flush = Flush(
                table: table, timestamp: timestamp, intervalSeconds: intervalSeconds, internalMetrics: metrics,
                events: parts.flatMap(\.events), serviceChecks: parts.flatMap(\.serviceChecks))
            var summaries: [Summary] = []
            swap(&summaries, &summaryStorage)
            flush.summaries(
                into: &summaries,
                bucketBounds: prometheus == nil ? [] : prometheusExposition.options.bucketBounds,
                percentiles: percentiles, trimmed: graphite != nil && configuration.graphiteLayout == .etsy)
            // Handed back empty once the outputs are done with it.
            defer {
                summaries.removeAll(keepingCapacity: true)
                summaryStorage = summaries
            }
            // Graphite first: the JSON line's completion may end the shutdown, which gives
            // Graphite what it holds by then.
            if let graphite {
                graphite.send(GraphiteFormat.format(flush, summaries, layout: configuration.graphiteLayout))
            }
            output.submit(JSONLinesFormat.write(flush, summaries)) { [loop] in
                if let completion { _ = loop.execute(completion) }
            }
            if let prometheus {
                let exposition = prometheusExposition.render(flush, summaries)
                prometheus.update(exposition.bytes)
                prometheusLeftOut.store(exposition.leftOut, ordering: .relaxed)
                prometheusMerged.store(exposition.merged, ordering: .relaxed)
            }
            let duration = DispatchTime.now().uptimeNanoseconds - started
            lastFlushNanoseconds.store(duration, ordering: .relaxed)
            logger.trace("flushed \(summaries.count) series in \(Double(duration) / 1e6) ms")
            _ = loop.execute { [self] in formatting = false }
        }
    }

    /// Hands `body`, on the flush queue, the main loop's `main` part and each reader's part for
    /// the same flush, in reader order (a reader whose loop has stopped gives none).
    private func collectParts(
        _ main: Reader.Part, expireAfter: UInt32, _ body: @escaping @Sendable ([Reader.Part]) -> Void
    ) {
        guard !readers.isEmpty else {
            flushQueue.async { body([main]) }
            return
        }
        // Confined to the flush queue: each part arrives there.
        final class Collected: @unchecked Sendable {
            var parts: [Reader.Part?]
            var missing: Int
            init(_ count: Int) { (parts, missing) = ([Reader.Part?](repeating: nil, count: count), count) }
        }
        let collected = Collected(readers.count + 1)
        let flushQueue = flushQueue
        let arrived = { @Sendable (index: Int, part: Reader.Part?) in
            flushQueue.async {
                collected.parts[index] = part
                collected.missing -= 1
                if collected.missing == 0 { body(collected.parts.compactMap { $0 }) }
            }
        }
        arrived(0, main)
        for (index, reader) in readers.enumerated() {
            reader.endInterval(expireAfter: expireAfter) { part in arrived(index + 1, part) }
        }
    }

    /// SIGTERM or SIGINT: no new connections; after a short grace for lines already on their
    /// way, stop reading, take what the UDP socket still holds, flush a last time and stop.
    private func stop(_ name: String) {
        guard !stopping else { return }
        stopping = true
        prometheus?.ready.store(false, ordering: .relaxed)
        systemd?.notify("STOPPING=1\nSTATUS=\(name): final flush")
        logger.info("\(name): final flush, then exit")
        tcp.close()
        unixStream?.close()
        prometheus?.close()
        _ = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(0.1)) { [self] in
            // Clients first: closing one ends its run, which counts a line or frame it left
            // unfinished as a bad line; disposing the runs first would lose it uncounted.
            for connection in connections.values { connection.close() }
            connections = [:]
            inputs.dispose()
            flushTimer?.dispose()
            // Each reader drains and closes its socket on its loop, before the final flush
            // takes its interval there.
            for reader in readers { reader.stop() }
            drainUDP()
            udp.close()
            if let unix {
                // Senders get an error from now on, not a success for a datagram never read.
                unix.shutdownReading()
                _ = unix.drain { bytes, truncated in ingest.ingest(datagram: bytes, truncated: truncated) }
                unix.close()
            }
            // Bounded: a stalled output delays the exit by `outputGrace` at most, Graphite by
            // 0.5 s more.
            flush { [self] in finishStopping() }
            _ = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(Self.outputGrace)) { [self] in
                if !exiting {
                    logger.warning(
                        "--output \(configuration.output): the final flush is not written yet; exiting without it")
                }
                finishStopping()
            }
        }
    }

    /// The last step of the shutdown, once the final flush is written or its grace is over.
    private func finishStopping() {
        guard !exiting else { return }
        exiting = true
        if let graphite {
            graphite.finish(within: 0.5) { [loop] in loop.stop() }
        } else {
            loop.stop()
        }
    }

    /// How long the shutdown waits for the final JSON line to be written.
    static let outputGrace = 2.0

    /// Reads what the UDP socket's buffer still holds, without waiting.
    private func drainUDP() {
        let drained = udp.drain(limit: Self.drainLimit(udp.receiveBufferSize)) { bytes, truncated in
            ingest.ingest(datagram: bytes, truncated: truncated)
        }
        if drained > 0 { logger.debug("read \(drained) datagrams left in the UDP buffer") }
        _ = kernelDrops()  // The final flush reports drops up to the close.
    }

    /// The most datagrams read from a UDP socket at SIGTERM: more than its receive buffer can
    /// hold (the kernel charges a datagram at least 256 bytes of it), so that what it held at
    /// the signal is read, and no more: senders that keep sending at full blast would otherwise
    /// keep the drain going, and the exit with it.
    static func drainLimit(_ receiveBufferSize: Int) -> Int { max(1024, receiveBufferSize / 256) }

    /// The datagrams the kernel dropped on the UDP socket since it was opened (0 if the kernel
    /// does not say). Once the socket is closed, the last count read (`drainUDP` reads it just
    /// before closing).
    private func kernelDrops() -> UInt64 {
        if let drops = udp.kernelDrops { latestKernelDrops = drops }
        return latestKernelDrops
    }

    // MARK: Helpers

    /// Logs `ingest`'s bad lines (at debug level, if enabled) and its full table to `logger`;
    /// `reader` names the reader in the table's warning.
    static func log(_ ingest: Ingest, to logger: Logger, maxSeries: Int, reader: String) {
        if logger.logLevel <= .debug {
            ingest.onBadLine = { reason, line in logger.debug("bad line (\(reason)): \(printable(line))") }
        }
        ingest.onTableFull = { line in
            logger.warning(
                "--max-series \(maxSeries) reached\(reader): dropping lines for new series (this interval, first: \(printable(line)))"
            )
        }
    }

    static func printable(_ line: UnsafeRawBufferPointer) -> String {
        var text = String(decoding: line.prefix(200), as: UTF8.self)
        if line.count > 200 { text += "… (\(line.count) bytes)" }
        return text.debugDescription
    }

    static func wallClock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// `host` and `port` as an address; `localhost` is 127.0.0.1.
    static func address(host: String, port: Int, flag: String) throws(StartupError) -> SocketAddress {
        do {
            return try SocketAddress(host: host == "localhost" ? "127.0.0.1" : host, port: port)
        } catch {
            throw StartupError(description: "\(flag) \(host): not a numeric IPv4 or IPv6 address (or localhost)")
        }
    }

    /// A host, by name or numeric address, and a port: resolved at each connection attempt.
    struct Endpoint: CustomStringConvertible, Equatable {
        var host: String
        var port: Int
        var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// `host:port` (`[v6]:port` for IPv6) to connect to, the host a name or a numeric address;
    /// names are resolved when connecting, not here.
    static func endpoint(_ text: String, flag: String, example: String) throws(StartupError) -> Endpoint {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else {
            throw StartupError(description: "\(flag) \(text): expected host:port, such as \(example)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // A name is letters, digits, '-', '_' and '.'; an address, hex digits, '.' and ':'.
        guard !host.isEmpty,
            host.utf8.allSatisfy({
                $0 < 0x80 && ($0 == 0x2D || $0 == 0x2E || $0 == 0x3A || $0 == 0x5F || isalnum(Int32($0)) != 0)
            })
        else {
            throw StartupError(description: "\(flag) \(text): expected host:port, such as \(example)")
        }
        return Endpoint(host: host, port: port)
    }

    /// `host:port` (`[v6]:port` for IPv6) as an address.
    /// - Parameters:
    ///   - example: An address to show in the message for a malformed one.
    ///   - listening: Whether the address is one to listen on, not to connect to: then port 0
    ///     (a port the system picks) and an empty host (`:9102`, every IPv4 interface) are allowed.
    static func address(_ text: String, flag: String, example: String, listening: Bool) throws(StartupError)
        -> SocketAddress
    {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port) || (port == 0 && listening)
        else {
            throw StartupError(description: "\(flag) \(text): expected host:port, such as \(example)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // `:9102`, as statsd_exporter users write it: every IPv4 interface, for a listener.
        if host.isEmpty && listening { host = "0.0.0.0" }
        return try address(host: host, port: port, flag: flag)
    }
}

import Logging
import ReactiveLoopCore
import ReactiveLoopUV

/// Sends each flush, as Graphite plaintext, to a carbon receiver over one TCP connection.
///
/// Bounds, whatever the receiver does (down, restarting, accepting and never reading):
/// - at most `maxInFlightBytes` are handed to the connection and not yet taken by the receiver;
/// - the rest waits in a queue; the queue and the bytes in flight hold at most `maxQueuedBytes`
///   (or one flush, if a single flush is larger), and beyond it the oldest flushes are dropped
///   and their lines counted (`loopd.graphite_dropped_lines`);
/// - a receiver that takes none of the bytes in flight for `writeTimeout` seconds is dropped,
///   and the connection made anew.
/// The connection is retried with exponential backoff, from 100 ms to 10 s. A chunk whose write
/// fails is sent again after reconnecting: carbon keeps one value per timestamp, so a repeat
/// is harmless where a loss is not. The output runs on the loop, so it never delays another
/// output, and the shutdown waits for it for a bounded time (`finish(within:_:)`).
final class GraphiteOutput: @unchecked Sendable {  // Mutable state is confined to the loop thread.
    /// The receiver, resolved anew at each connection attempt (a name that moves is followed).
    let endpoint: Daemon.Endpoint
    /// The most bytes kept while the receiver is unreachable or slow (queued and in flight):
    /// `--graphite-max-queued`.
    let maxQueuedBytes: Int
    /// The most bytes handed to the connection and not yet taken by the receiver.
    static let maxInFlightBytes = 1 << 20
    /// Seconds the receiver may take none of the bytes in flight before the connection is
    /// dropped and made anew.
    static let writeTimeout = 30.0

    private let loop: EventLoop
    private let scheduler: LoopScheduler
    private let logger: Logger
    // Confined to the loop thread.
    private var connection: TCPConnection?
    private var queue: [[UInt8]] = []
    private var queuedBytes = 0
    private var inFlight: [[UInt8]] = []
    private var inFlightBytes = 0
    private var backoff = 0.1
    private var failures = 0
    private var finishing: (() -> Void)?
    private var closed = false
    /// Lines dropped from the queue since start.
    private(set) var droppedLines: UInt64 = 0

    init(
        to endpoint: Daemon.Endpoint, on loop: EventLoop, scheduler: LoopScheduler, maxQueuedBytes: Int,
        logger: Logger
    ) {
        self.endpoint = endpoint
        self.maxQueuedBytes = maxQueuedBytes
        self.loop = loop
        self.scheduler = scheduler
        self.logger = logger
        _ = loop.execute { [self] in connect() }
    }

    /// Queues `bytes` for sending, from any thread.
    func send(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        _ = loop.execute { [self] in
            queue.append(bytes)
            queuedBytes += bytes.count
            keepBound()
            pump()
        }
    }

    /// Drops the oldest queued flushes while the queue and the bytes in flight pass the bound
    /// (the newest flush is always kept), counting their lines.
    private func keepBound() {
        while queuedBytes + inFlightBytes > maxQueuedBytes, queue.count > 1 {
            let dropped = queue.removeFirst()
            queuedBytes -= dropped.count
            droppedLines += UInt64(dropped.lazy.filter { $0 == UInt8(ascii: "\n") }.count)
        }
    }

    /// Calls `completion` once everything queued is written (then closes the connection), or
    /// after `seconds`, whichever comes first. Loop thread.
    func finish(within seconds: Double, _ completion: @escaping () -> Void) {
        finishing = completion
        checkFinished()
        _ = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(seconds)) { [self] in
            guard let finishing else { return }
            let unsent = (queue + inFlight).reduce(0) { $0 + $1.lazy.filter { $0 == UInt8(ascii: "\n") }.count }
            logger.warning("exiting with \(unsent) Graphite lines unsent to \(endpoint)")
            self.finishing = nil
            shutDown()
            finishing()
        }
    }

    // MARK: Loop thread

    private func connect() {
        guard !closed else { return }
        logger.debug("connecting to Graphite at \(endpoint)")
        TCPConnection.connect(toHost: endpoint.host, port: endpoint.port, on: loop).start { [self] event in
            switch event {
            case let .value(connection):
                if failures > 0 { logger.info("connected to Graphite at \(endpoint)") }
                self.connection = connection
                connection.setLimits(.init(writeTimeout: Self.writeTimeout))
                backoff = 0.1
                failures = 0
                // Carbon sends nothing back; the end of its stream is the end of the connection.
                connection.bytes.start { [self] event in
                    switch event {
                    case .value: break
                    case let .failed(error): disconnected(connection, because: "\(error)")
                    case .completed, .interrupted: disconnected(connection, because: "closed by the receiver")
                    }
                }
                pump()
            case let .failed(error):
                failures += 1
                if failures == 1 {
                    logger.warning("cannot connect to Graphite at \(endpoint): \(error.message); retrying with backoff")
                }
                retryLater()
            default: break
            }
        }
    }

    private func retryLater() {
        guard !closed else { return }
        let delay = backoff
        backoff = min(backoff * 2, 10)
        _ = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(delay)) { [self] in connect() }
    }

    private func disconnected(_ lost: TCPConnection, because reason: String) {
        guard connection === lost else { return }
        connection = nil
        lost.close()
        guard !closed else { return }
        logger.warning("lost the Graphite connection to \(endpoint) (\(reason)); reconnecting")
        queue.insert(contentsOf: inFlight, at: 0)
        queuedBytes += inFlightBytes
        inFlight = []
        inFlightBytes = 0
        keepBound()
        failures = 1
        retryLater()
    }

    private func pump() {
        guard let connection else { return }
        while !queue.isEmpty && (inFlightBytes < Self.maxInFlightBytes || inFlight.isEmpty) {
            let chunk = queue.removeFirst()
            queuedBytes -= chunk.count
            inFlight.append(chunk)
            inFlightBytes += chunk.count
            connection.write(chunk) { [self] error in
                if let error {
                    disconnected(connection, because: "\(error)")
                } else if !inFlight.isEmpty && connection === self.connection {
                    inFlightBytes -= inFlight.removeFirst().count
                    pump()
                }
                checkFinished()
            }
        }
    }

    private func checkFinished() {
        guard let finishing, queue.isEmpty, inFlight.isEmpty else { return }
        self.finishing = nil
        shutDown()
        finishing()
    }

    private func shutDown() {
        closed = true
        connection?.close()
        connection = nil
    }
}

import Dispatch
import Logging
import LoopdCore
import ReactiveLoopCore
import ReactiveLoopUV

/// One of the `--readers` beyond the first: a UDP socket bound to loopd's address with
/// `SO_REUSEPORT`, read on a loop of its own (another thread, another core) into an ingest
/// stage of its own. At each flush the daemon takes its ended interval (`endInterval`) and
/// merges it with the others' (`SeriesTable.merging`).
///
/// Everything but `loop` is confined to `loop`'s thread: the daemon reaches the reader through
/// `loop.execute`.
final class Reader: @unchecked Sendable {  // Confined to `loop`, but for the constants.
    let loop: EventLoop
    let udp: UDPSocket
    private let ingest: Ingest
    private var run: (any Disposable)?
    private var latestKernelDrops: UInt64 = 0

    /// What a reader hands over at a flush.
    struct Part: Sendable {
        var table: SeriesTable
        var counts: Ingest.Counts
        var events: [DogStatsDEvent]
        var serviceChecks: [DogStatsDServiceCheck]
        var kernelDrops: UInt64
    }

    /// Binds a socket to `address` (which the first reader's socket holds, with `SO_REUSEPORT`)
    /// on `loop`.
    init(
        _ address: SocketAddress, on loop: EventLoop, receiveBufferSize: Int, readPause: Duration?, maxLine: Int,
        maxSeries: Int, mapper: Mapper?
    ) throws(UVError) {
        self.loop = loop
        udp = try UDPSocket(
            boundTo: address, on: loop, receiveBufferSize: receiveBufferSize, reusePort: true, readPause: readPause)
        ingest = Ingest(maxLineLength: maxLine, maxSeries: maxSeries, mapper: mapper)
    }

    /// Starts reading, with the daemon's logging of bad lines and a full table.
    func start(logger: Logger, maxSeries: Int) {
        _ = loop.execute { [self] in
            Daemon.log(ingest, to: logger, maxSeries: maxSeries, reader: " on a reader")
            // Values and failures apart: each datagram reaches the ingest as a plain argument.
            run = udp.datagrams.start(
                Signal.Observer(
                    value: { [self] datagram in
                        datagram.bytes.withUnsafeBytes { ingest.ingest(datagram: $0, truncated: datagram.isTruncated) }
                    },
                    failed: { error in logger.error("UDP receive failed on a reader: \(error)") }))
        }
    }

    /// Ends the interval and hands over what it holds: on the reader's loop, then `body` with
    /// the part (nil if the loop has stopped), on the reader's loop thread.
    func endInterval(expireAfter: UInt32, _ body: @escaping @Sendable (Part?) -> Void) {
        let accepted = loop.execute { [self] in
            if let drops = udp.kernelDrops { latestKernelDrops = drops }
            let (events, serviceChecks) = ingest.takeEvents()
            body(
                Part(
                    table: ingest.endInterval(expireAfter: expireAfter), counts: ingest.counts, events: events,
                    serviceChecks: serviceChecks, kernelDrops: latestKernelDrops))
        }
        if !accepted { body(nil) }
    }

    /// Replaces the mapping rules and namespace (a reload), and returns once the reader has:
    /// a line that arrives after it goes through the new ones. The calling thread waits for
    /// the reader's loop to get to it (the datagrams of one wake-up at most).
    func setMapper(_ mapper: Mapper?) {
        let applied = DispatchSemaphore(value: 0)
        let accepted = loop.execute { [self] in
            ingest.setMapper(mapper)
            applied.signal()
        }
        if accepted { applied.wait() }
    }

    /// Stops reading, takes what the socket still holds, and closes it (SIGTERM): the next
    /// `endInterval` carries the last datagrams.
    func stop() {
        _ = loop.execute { [self] in
            run?.dispose()
            run = nil
            _ = udp.drain(limit: Daemon.drainLimit(udp.receiveBufferSize)) { bytes, truncated in
                ingest.ingest(datagram: bytes, truncated: truncated)
            }
            if let drops = udp.kernelDrops { latestKernelDrops = drops }
            udp.close()
        }
    }
}

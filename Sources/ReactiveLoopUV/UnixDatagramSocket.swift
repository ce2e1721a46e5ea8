import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// A datagram received on a `UnixDatagramSocket`.
public struct UnixDatagram: Sendable {
    /// The datagram's bytes (a view into the socket's receive buffer: copy what you keep long).
    public let bytes: ReceivedBytes
    /// Whether the datagram was longer than `UnixDatagramSocket.maxDatagram` and cut there.
    public let isTruncated: Bool
}

/// A Unix domain datagram socket bound to a path, as StatsD clients use on one host (DogStatsD's
/// `socket_path`): no network stack between client and server, and a sender that the kernel
/// makes wait (or fail) rather than drop silently when the buffer is full.
///
/// The socket file is created with `mode`. A file left at `path` by a process that is gone (a
/// socket nobody listens on) is removed first; a socket someone is still listening on, or a
/// file that is not a socket, makes `init` throw (`EADDRINUSE`, `EEXIST`). Closing removes the
/// file if the path still names this socket. A full queue (`net.unix.max_dgram_qlen`
/// datagrams) makes a sender wait, or fail with `EAGAIN` if its socket does not block: the
/// kernel drops nothing here. Reading is libuv's poll on the descriptor: datagrams are read as they arrive, at most
/// `maxBatch` per wake-up, so that one busy socket does not starve the loop.
public final class UnixDatagramSocket: _LoopOwnedHandle, @unchecked Sendable {  // Confined to the loop thread.
    /// The loop the socket lives on.
    public let loop: EventLoop
    /// The socket file's path.
    public let path: String

    var handle: UnsafeMutablePointer<uv_handle_t>?
    /// The socket file, which closing removes if the path still names it.
    private let file: _UnixSocketFile
    /// The poll handle, until the socket starts closing.
    private var watching: UnsafeMutablePointer<uv_poll_t>?
    private var descriptor: Int32
    private let reader = _SingleReader<UnixDatagram>()
    private var buffer = _ReceiveBuffer(capacity: UnixDatagramSocket.maxDatagram)

    /// The longest datagram read whole, in bytes: a Unix datagram may be as long as its
    /// sender's `SO_SNDBUF` (208 KiB by default); a longer one is cut and marked.
    public static let maxDatagram = 256 * 1024
    /// The most datagrams read per wake-up.
    public static let maxBatch = 64

    /// Creates a socket bound to `path` on `loop`, from any thread (as `UDPSocket.init`).
    ///
    /// - Parameters:
    ///   - mode: The socket file's permissions (`0o660`: the owner and the group may send). The
    ///     queue's length is the system's `net.unix.max_dgram_qlen`, not a receive buffer size.
    /// - Throws: `UVError`: `ENAMETOOLONG` for a path longer than a socket address holds,
    ///   `EADDRINUSE` if a socket at `path` is in use (`EACCES` if this user may not connect to it), `EEXIST` if a file that is not a socket is
    ///   there, or the system's error from `socket`, `bind` or `chmod`.
    public init(boundTo path: String, on loop: EventLoop, mode: UInt32 = 0o660) throws(UVError) {
        self.loop = loop
        self.path = path
        let operation = "UnixDatagramSocket(boundTo: \"\(path)\")"
        let (fd, file) = try _UnixSocketFile.bind(path, type: Int32(SOCK_DGRAM.rawValue), mode: mode, operation)
        self.file = file
        descriptor = fd
        do throws(UVError) {
            try loop.performSync { () throws(UVError) in
                let poll = try allocateHandle(uv_poll_t.self, "uv_poll_init") { uv_poll_init(loop.uvLoop, $0, fd) }
                self.watching = poll
                self.adopt(poll)
            }
        } catch {
            Glibc.close(fd)
            file.remove()
            throw error
        }
    }

    // The descriptor is closed (and the file removed) as the handle starts closing; see
    // `handleWillClose`.
    deinit { closeOrphanedHandle() }

    /// The datagrams received, on the loop thread, from when the producer is started until its
    /// run is disposed (one run at a time; a second concurrent start fails with `EALREADY`).
    /// Completes when the socket is closed, is interrupted when the loop stops, and fails if
    /// reading fails.
    public var datagrams: SignalProducer<UnixDatagram, UVError> {
        reader.producer(
            "UnixDatagramSocket.datagrams", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in self?.startReading() },
            stop: { [weak self] in if let self, let handle { uv_poll_stop(Self.poll(handle)) } })
    }

    /// Reads, without waiting, what the kernel holds for the socket, as `UDPSocket.drain`: at
    /// most `limit` datagrams, each handed to `body` (valid during the call only, and whether it
    /// was cut at `maxDatagram`). Loop thread only.
    ///
    /// - Returns: The number of datagrams read (0 once closed).
    /// - Precondition: `limit` is positive.
    public func drain(limit: Int = 1_000_000, _ body: (UnsafeRawBufferPointer, _ isTruncated: Bool) -> Void) -> Int {
        _require(limit > 0, "UnixDatagramSocket.drain(limit:_:): limit must be > 0, got \(limit)")
        loop.assertInEventLoop()
        return drainDatagrams(of: handle == nil ? -1 : descriptor, limit: limit, slot: Self.maxDatagram, body)
    }

    /// Stops the socket taking datagrams (`shutdown(SHUT_RD)`): senders get an error from now
    /// on instead of a success for a datagram nobody will read. What was queued before stays
    /// for `drain`. For a shutdown: call it, then `drain`, then `close`. Loop thread only.
    public func shutdownReading() {
        loop.assertInEventLoop()
        if handle != nil { shutdown(descriptor, Int32(SHUT_RD)) }
    }

    /// Closes the socket and removes its file (if the path still names it), from any thread: a
    /// `datagrams` run completes.
    public func close() { closeFromAnyThread() }

    // MARK: Loop thread

    private static func poll(_ handle: UnsafeMutablePointer<uv_handle_t>) -> UnsafeMutablePointer<uv_poll_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_poll_t.self)
    }

    func handleWillClose(interrupted: Bool) {
        reader.finish(interrupted: interrupted)
        // Stopping the poll takes the descriptor out of libuv's watch at once: it can be closed.
        // (An orphan, released before its loop ever ran, was never watched.)
        // (`handle` is already nil here: the poll is kept apart until then.)
        if let watching, loop.inEventLoop { uv_poll_stop(watching) }
        watching = nil
        if descriptor >= 0 {
            Glibc.close(descriptor)
            descriptor = -1
            file.remove()
        }
    }

    private func startReading() -> UVError? {
        guard let handle else { return nil }
        let status = uv_poll_start(Self.poll(handle), Int32(UV_READABLE.rawValue)) { poll, status, _ in
            UnixDatagramSocket.owner(of: poll).readable(status)
        }
        return status < 0 ? UVError(code: status, operation: "uv_poll_start") : nil
    }

    private func readable(_ status: Int32) {
        guard status >= 0 else {
            if let handle { uv_poll_stop(Self.poll(handle)) }
            return reader.fail(UVError(code: status, operation: "UnixDatagramSocket.datagrams (poll)"))
        }
        for _ in 0..<Self.maxBatch {
            guard handle != nil, let observer = reader.observer else { return }
            let storage = buffer.next()
            let received = recv(descriptor, storage.base, storage.capacity, Int32(MSG_DONTWAIT | MSG_TRUNC))
            if received < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
                if let handle { uv_poll_stop(Self.poll(handle)) }
                return reader.fail(UVError(code: -errno, operation: "UnixDatagramSocket.datagrams (recv)"))
            }
            let count = min(received, storage.capacity)
            observer.send(
                value: UnixDatagram(
                    bytes: ReceivedBytes(storage: storage, range: 0..<count), isTruncated: received > storage.capacity))
        }
    }
}

import CLibUV
import Dispatch
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// A listening TCP socket on an `EventLoop`: bound and listening at creation, handing out
/// accepted connections as a producer.
///
/// Connections are accepted while `connections` runs; meanwhile they wait in the listen backlog.
/// The listener stays open until `close()` or until the loop stops, whether or not a reference
/// to it is kept; closing it leaves the accepted connections open.
public final class TCPListener: Sendable {
    /// The loop the listener lives on.
    public let loop: EventLoop
    /// The address the listener is bound to (with the port the system chose, if 0 was asked).
    public let localAddress: SocketAddress
    private let core: _StreamListener<TCPConnection>

    /// Creates a listener bound to `address` on `loop`, listening at once. Call it as you would
    /// `UDPSocket.init(boundTo:on:receiveBufferSize:reuseAddress:reusePort:)`.
    ///
    /// - Parameter backlog: How many connections the kernel queues while none is accepted.
    /// - Throws: `UVError` if the socket cannot be bound or listen (`EADDRINUSE`, say), or
    ///   `UVError.loopStopped`.
    /// - Precondition: `backlog` is positive.
    public init(boundTo address: SocketAddress, on loop: EventLoop, backlog: Int = 511) throws(UVError) {
        _require(
            backlog > 0 && backlog <= Int(Int32.max),
            "TCPListener(boundTo:on:backlog:): backlog must be in 1...\(Int32.max), got \(backlog)")
        self.loop = loop
        let core = _StreamListener<TCPConnection>(loop: loop, api: "TCPListener") { server throws(UVError) in
            let client = try acceptStream(server, uv_tcp_t.self, "uv_tcp_init") { uv_tcp_init(loop.uvLoop, $0) }
            return try TCPConnection.adopting(client, on: loop)
        }
        self.core = core
        localAddress = try loop.performSync { () throws(UVError) -> SocketAddress in
            let tcp = try openTCP(loop, "uv_tcp_init")
            do throws(UVError) {
                try UVError.check(address.withUnsafePointer { uv_tcp_bind(tcp, $0, 0) }, "uv_tcp_bind(\(address))")
                let bound = try SocketAddress.read("uv_tcp_getsockname") { uv_tcp_getsockname(tcp, $0, $1) }
                try core.listen(tcp.stream, backlog: backlog, "uv_listen(\(address))")
                return bound
            } catch {
                uv_close(tcp.handle) { UnsafeMutableRawPointer($0!).deallocate() }
                throw error
            }
        }
    }

    /// Connections that arrived but could not be accepted (the client reset the connection
    /// first, say), from any thread. The listener goes on accepting. When the process is out of
    /// descriptors, libuv closes waiting connections without reporting them, so those are not
    /// counted.
    public var acceptFailures: Int { core.failedAccepts.load(ordering: .relaxed) }

    /// The accepted connections, on the loop thread, while the producer runs (one run at a
    /// time; a second concurrent start fails with `EALREADY`). Completes when the listener is
    /// closed and is interrupted when the loop stops. A connection that cannot be accepted does
    /// not end the run: it is counted in `acceptFailures`.
    public var connections: SignalProducer<TCPConnection, UVError> { core.connections }

    /// Closes the listener, from any thread: a `connections` run completes.
    public func close() { core.closeFromAnyThread() }
}

/// A TCP connection on an `EventLoop`: accepted by a `TCPListener` or made with
/// `connect(to:on:)`.
///
/// Reading starts when `bytes` (or `lines`) is started and stops when its run is disposed;
/// meanwhile the bytes wait in the kernel. When the peer closes its side, the run completes and
/// the connection closes once the writes already queued have gone out. The connection stays open
/// until then, `close()`, a timeout of its `Limits`, or the loop stops, whether or not a
/// reference to it is kept.
///
/// Memory: reads go into one 64 KiB buffer that the loop shares between its connections, so a
/// connection between reads holds no read buffer (a `ReceivedBytes` you keep holds the buffer it
/// views, and the next read then takes a fresh one). Written bytes wait in the connection until
/// the peer takes them: `queuedWriteBytes` says how many, and `Limits` bounds them and the time
/// a peer may stall.
public final class TCPConnection: StreamConnection {
    /// The loop the connection lives on.
    public let loop: EventLoop
    /// This end's address.
    public let localAddress: SocketAddress
    /// The peer's address.
    public let remoteAddress: SocketAddress
    let core: _StreamCore

    /// Bounds on what a peer can make a connection (TCP or Unix) hold or wait for. Every bound
    /// is off (nil) by default.
    public struct Limits: Sendable, Equatable {
        /// The most bytes written and not yet taken by the peer. A write that would pass it
        /// (while other bytes are queued) is refused: its completion gets `ENOBUFS` and the
        /// bytes are not sent; the connection stays open. A single write larger than the mark
        /// is accepted when nothing else is queued, so any write can eventually go out.
        public var writeHighWaterMark: Int?
        /// Seconds that queued bytes may wait without the peer taking any of them. Past it, the
        /// connection is closed: a `bytes` run fails with `ETIMEDOUT`, queued writes fail with
        /// `ECANCELED`.
        public var writeTimeout: Double?
        /// Seconds without a byte read or written. Past it, the connection is closed as for
        /// `writeTimeout`.
        public var idleTimeout: Double?

        /// Limits with the given bounds (nil: none).
        ///
        /// - Precondition: Each bound given is positive; the timeouts are finite, at most 1e9 seconds.
        public init(writeHighWaterMark: Int? = nil, writeTimeout: Double? = nil, idleTimeout: Double? = nil) {
            if let writeHighWaterMark {
                _require(
                    writeHighWaterMark > 0,
                    "TCPConnection.Limits: writeHighWaterMark must be > 0, got \(writeHighWaterMark)")
            }
            for (name, value) in [("writeTimeout", writeTimeout), ("idleTimeout", idleTimeout)] {
                // At most 1e9 s, so that the deadline in nanoseconds fits in a UInt64.
                if let value { _checkInterval(value, "TCPConnection.Limits", .positiveUpTo(1e9), argument: name) }
            }
            self.writeHighWaterMark = writeHighWaterMark
            self.writeTimeout = writeTimeout
            self.idleTimeout = idleTimeout
        }
    }

    private init(core: _StreamCore, local: SocketAddress, remote: SocketAddress) {
        self.core = core
        loop = core.loop
        localAddress = local
        remoteAddress = remote
    }

    /// A connection owning the connected handle `stream`, which `previousOwner` (if any) hands
    /// over; on failure the handle is closed. Loop thread only.
    static func adopting(
        _ stream: UnsafeMutablePointer<uv_stream_t>, on loop: EventLoop,
        from previousOwner: (any _LoopOwnedHandle)? = nil
    ) throws(UVError) -> TCPConnection {
        let tcp = UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_tcp_t.self)
        do throws(UVError) {
            let local = try SocketAddress.read("uv_tcp_getsockname") { uv_tcp_getsockname(tcp, $0, $1) }
            let remote = try SocketAddress.read("uv_tcp_getpeername") { uv_tcp_getpeername(tcp, $0, $1) }
            let core = _StreamCore(loop: loop, api: "TCPConnection")
            core.take(stream, from: previousOwner)
            return TCPConnection(core: core, local: local, remote: remote)
        } catch {
            if let previousOwner {
                previousOwner.closeOnLoop(interrupted: false)
            } else {
                uv_close(tcp.handle) { UnsafeMutableRawPointer($0!).deallocate() }
            }
            throw error
        }
    }

    /// A producer that connects to `address` from `loop` when started, sends the connection
    /// and completes; or fails with the connect error (`ECONNREFUSED`, say). Disposing it
    /// before the connection is made closes the socket. Interrupted if the loop is stopped.
    public static func connect(to address: SocketAddress, on loop: EventLoop) -> SignalProducer<TCPConnection, UVError>
    {
        _connect(
            api: "TCPConnection.connect (uv_tcp_connect)", on: loop,
            open: { () throws(UVError) in
                try openTCP(loop, "uv_tcp_init").stream
            },
            connect: { request, stream, callback in
                address.withUnsafePointer {
                    uv_tcp_connect(
                        request, UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_tcp_t.self), $0, callback)
                }
            }, wrap: { stream, attempt throws(UVError) in try TCPConnection.adopting(stream, on: loop, from: attempt) })
    }

    /// The bytes received, on the loop thread, as they arrive, from when the producer is
    /// started until its run is disposed (one run at a time; a second concurrent start fails
    /// with `EALREADY`). Completes when the peer closes its side or the connection is closed,
    /// is interrupted when the loop stops, and fails with a read error (`ECONNRESET`, say),
    /// which also closes the connection.
    public var bytes: SignalProducer<ReceivedBytes, UVError> { core.bytes }

    /// Writes a copy of `bytes`, from any thread (writes from one thread go out in order).
    ///
    /// - Parameter completion: Called on the loop thread with nil once the bytes are written
    ///   to the socket, or with the error (`ECANCELED` if the connection was closed first,
    ///   `EPIPE` once it is shutting down, `ENOBUFS` if `Limits.writeHighWaterMark` refused
    ///   them). Called at once on the calling thread with `UVError.loopStopped` if the loop had
    ///   stopped.
    public func write(_ bytes: some Sequence<UInt8>, completion: ((UVError?) -> Void)? = nil) {
        core.write(_SendRequest(bytes, completion))
    }

    /// Writes `bytes` without copying them (a `ReceivedBytes` is never modified, so many
    /// connections can send one buffer); see `write(_:completion:)`.
    public func write(_ bytes: ReceivedBytes, completion: ((UVError?) -> Void)? = nil) {
        core.write(_SendRequest(sharing: bytes, completion))
    }

    /// The bytes written and not yet taken by the peer (or failed), from any thread.
    public var queuedWriteBytes: Int { core.queuedWriteBytes }

    /// Sets the connection's bounds, from any thread (on the loop thread, at once).
    public func setLimits(_ limits: Limits) { core.setLimits(limits) }

    /// Closes the connection, from any thread: a `bytes` run completes and pending writes fail
    /// with `ECANCELED`.
    public func close() { core.closeFromAnyThread() }
}

/// A producer that opens a stream socket when started, connects it and sends the connection
/// that `wrap` makes of it, then completes; or fails with the connect error. Disposing it before
/// the connection is made closes the socket. Interrupted if the loop is stopped.
func _connect<Connection>(
    api: String, on loop: EventLoop, open: @escaping () throws(UVError) -> UnsafeMutablePointer<uv_stream_t>,
    connect: @escaping (UnsafeMutablePointer<uv_connect_t>, UnsafeMutablePointer<uv_stream_t>, uv_connect_cb) -> Int32,
    wrap: @escaping (UnsafeMutablePointer<uv_stream_t>, _ConnectAttempt<Connection>) throws(UVError) -> Connection
) -> SignalProducer<Connection, UVError> {
    SignalProducer { observer, lifetime in
        let begin = {
            guard !lifetime.hasEnded else { return }
            do throws(UVError) {
                let stream = try open()
                let attempt = try _ConnectAttempt(
                    loop: loop, api: api, stream: stream, observer: observer,
                    connect: { request, callback in connect(request, stream, callback) }, wrap: wrap)
                lifetime.observeEnded { attempt.closeFromAnyThread() }
            } catch {
                observer.send(error: error)
            }
        }
        if !loop.onLoopThread(begin) { observer.sendInterrupted() }
    }
}

/// A new TCP handle on `loop`. Loop thread only.
func openTCP(_ loop: EventLoop, _ operation: String) throws(UVError) -> UnsafeMutablePointer<uv_tcp_t> {
    try allocateHandle(uv_tcp_t.self, operation) { uv_tcp_init(loop.uvLoop, $0) }
}

extension UnsafeMutablePointer where Pointee == uv_tcp_t {
    var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(self).assumingMemoryBound(to: uv_stream_t.self)
    }
}

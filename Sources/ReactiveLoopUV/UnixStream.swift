import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// A listening Unix domain stream socket bound to a path, on an `EventLoop`: as `TCPListener`,
/// for clients on the same host, with the file's permissions deciding who may connect.
///
/// The socket file is created with `mode`; a stale file at `path` (a socket nobody listens on,
/// left by a process that is gone) is removed first, while a socket someone listens on, or a file
/// that is not a socket, makes `init` throw. Closing removes the file if the path still names
/// this socket. Connections are accepted while `connections` runs; meanwhile they wait in the
/// listen backlog. The listener stays open until `close()` or until the loop stops, whether or
/// not a reference to it is kept; closing it leaves the accepted connections open.
public final class UnixStreamListener: Sendable {
    /// The loop the listener lives on.
    public let loop: EventLoop
    /// The socket file's path.
    public let path: String
    private let core: _StreamListener<UnixStreamConnection>

    /// Creates a listener bound to `path` on `loop`, listening at once, from any thread.
    ///
    /// - Parameters:
    ///   - mode: The socket file's permissions (`0o660`: the owner and the group may connect).
    ///   - backlog: How many connections the kernel queues while none is accepted.
    /// - Throws: `UVError`: `ENAMETOOLONG` for an empty path or one longer than a socket address
    ///   holds (107 bytes), `EADDRINUSE` if a socket at `path` is in use (`EACCES` if this user may not connect to it), `EEXIST` if a file that
    ///   is not a socket is there, the system's error from `socket`, `bind`, `chmod` or
    ///   `listen`, or `UVError.loopStopped`.
    /// - Precondition: `backlog` is positive.
    public init(boundTo path: String, on loop: EventLoop, mode: UInt32 = 0o660, backlog: Int = 511) throws(UVError) {
        _require(
            backlog > 0 && backlog <= Int(Int32.max),
            "UnixStreamListener(boundTo:on:mode:backlog:): backlog must be in 1...\(Int32.max), got \(backlog)")
        self.loop = loop
        self.path = path
        let operation = "UnixStreamListener(boundTo: \"\(path)\")"
        let core = _StreamListener<UnixStreamConnection>(loop: loop, api: "UnixStreamListener") {
            server throws(UVError) in
            let client = try acceptStream(server, uv_pipe_t.self, "uv_pipe_init") { uv_pipe_init(loop.uvLoop, $0, 0) }
            return UnixStreamConnection(adopting: client, on: loop, path: path, from: nil)
        }
        self.core = core
        let (fd, file) = try _UnixSocketFile.bind(path, type: Int32(SOCK_STREAM.rawValue), mode: mode, operation)
        do throws(UVError) {
            try loop.performSync { () throws(UVError) in
                let pipe = try openPipe(loop)
                do throws(UVError) {
                    try UVError.check(uv_pipe_open(pipe, fd), "\(operation): uv_pipe_open")
                } catch {
                    uv_close(pipe.handle) { UnsafeMutableRawPointer($0!).deallocate() }
                    Glibc.close(fd)
                    throw error
                }
                // From here the pipe owns the descriptor, and closing it closes the descriptor.
                do throws(UVError) {
                    try core.listen(pipe.stream, backlog: backlog, "\(operation): listen")
                } catch {
                    uv_close(pipe.handle) { UnsafeMutableRawPointer($0!).deallocate() }
                    throw error
                }
                core.willClose = { file.remove() }
            }
        } catch {
            // Stopped before the body ran: nothing took the descriptor.
            if error == .loopStopped { Glibc.close(fd) }
            file.remove()
            throw error
        }
    }

    /// Connections that arrived but could not be accepted (the client left first, say), from any
    /// thread, as `TCPListener.acceptFailures`.
    public var acceptFailures: Int { core.failedAccepts.load(ordering: .relaxed) }

    /// The accepted connections, on the loop thread, while the producer runs (one run at a
    /// time; a second concurrent start fails with `EALREADY`). Completes when the listener is
    /// closed and is interrupted when the loop stops. A connection that cannot be accepted does
    /// not end the run: it is counted in `acceptFailures`.
    public var connections: SignalProducer<UnixStreamConnection, UVError> { core.connections }

    /// Closes the listener and removes its file (if the path still names it), from any thread:
    /// a `connections` run completes.
    public func close() { core.closeFromAnyThread() }
}

/// A Unix domain stream connection on an `EventLoop`: accepted by a `UnixStreamListener` or
/// made with `connect(toPath:on:)`. It reads, writes, closes and bounds what a peer may make it
/// hold exactly as a `TCPConnection` does; see there.
public final class UnixStreamConnection: StreamConnection {
    /// Bounds on what a peer can make a connection hold or wait for; see `TCPConnection.Limits`.
    public typealias Limits = TCPConnection.Limits

    /// The loop the connection lives on.
    public let loop: EventLoop
    /// The path of the socket this connection was accepted on or connected to.
    public let path: String
    let core: _StreamCore

    /// A connection owning the connected `stream`, which `previousOwner` (if any) hands over.
    /// Loop thread only.
    init(
        adopting stream: UnsafeMutablePointer<uv_stream_t>, on loop: EventLoop, path: String,
        from previousOwner: (any _LoopOwnedHandle)?
    ) {
        self.loop = loop
        self.path = path
        core = _StreamCore(loop: loop, api: "UnixStreamConnection")
        core.take(stream, from: previousOwner)
    }

    /// A producer that connects to the socket at `path` from `loop` when started, sends the
    /// connection and completes; or fails with the connect error (`ENOENT` for no file,
    /// `ECONNREFUSED` for a socket nobody listens on, `EACCES`). Disposing it before the
    /// connection is made closes the socket. Interrupted if the loop is stopped.
    ///
    /// A path that no socket address can hold fails the run with `ENAMETOOLONG`.
    public static func connect(toPath path: String, on loop: EventLoop) -> SignalProducer<UnixStreamConnection, UVError>
    {
        let api = "UnixStreamConnection.connect(toPath: \"\(path)\")"
        do throws(UVError) {
            _ = try _UnixSocketFile.address(of: path, api)
        } catch {
            return SignalProducer(error: error)
        }
        return _connect(
            api: api, on: loop, open: { () throws(UVError) in try openPipe(loop).stream },
            connect: { request, stream, callback in
                uv_pipe_connect(
                    request, UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_pipe_t.self), path, callback)
                return 0
            }, wrap: { stream, attempt in UnixStreamConnection(adopting: stream, on: loop, path: path, from: attempt) })
    }

    /// The bytes received; see `TCPConnection.bytes`.
    public var bytes: SignalProducer<ReceivedBytes, UVError> { core.bytes }

    /// Writes a copy of `bytes`, from any thread; see `TCPConnection.write(_:completion:)`.
    public func write(_ bytes: some Sequence<UInt8>, completion: ((UVError?) -> Void)? = nil) {
        core.write(_SendRequest(bytes, completion))
    }

    /// Writes `bytes` without copying them; see `TCPConnection.write(_:completion:)`.
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

/// A new pipe handle on `loop`. Loop thread only.
func openPipe(_ loop: EventLoop) throws(UVError) -> UnsafeMutablePointer<uv_pipe_t> {
    try allocateHandle(uv_pipe_t.self, "uv_pipe_init") { uv_pipe_init(loop.uvLoop, $0, 0) }
}

extension UnsafeMutablePointer where Pointee == uv_pipe_t {
    var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(self).assumingMemoryBound(to: uv_stream_t.self)
    }
}

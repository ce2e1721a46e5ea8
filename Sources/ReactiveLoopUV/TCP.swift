import CLibUV
import Dispatch
import Synchronization
import ReactiveLoop

#if canImport(Glibc)
    import Glibc
#endif

/// A listening TCP socket on an `EventLoop`: bound and listening at creation, handing out
/// accepted connections as a producer.
///
/// Connections are accepted while `connections` runs; meanwhile they wait in the listen backlog.
/// The listener stays open until `close()` or until the loop stops, whether or not a reference
/// to it is kept; closing it leaves the accepted connections open.
public final class TCPListener: _LoopOwnedHandle, @unchecked Sendable {  // Vars: confined to the loop thread.
    /// The loop the listener lives on.
    public let loop: EventLoop
    /// The address the listener is bound to (with the port the system chose, if 0 was asked).
    public let localAddress: SocketAddress

    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let reader = _SingleReader<TCPConnection>()
    // Confined to the loop thread. libuv holds a connection that nobody accepted yet.
    private var connectionWaiting = false

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
        let tcp = try loop.performSync { () throws(UVError) in try openTCP(loop, "uv_tcp_init") }
        do throws(UVError) {
            localAddress = try loop.performSync { () throws(UVError) -> SocketAddress in
                try UVError.check(address.withUnsafePointer { uv_tcp_bind(tcp, $0, 0) }, "uv_tcp_bind(\(address))")
                try UVError.check(
                    uv_listen(tcp.stream, Int32(backlog)) { server, status in
                        TCPListener.owner(of: server).connectionArrived(status)
                    }, "uv_listen(\(address))")
                return try SocketAddress.read("uv_tcp_getsockname") { uv_tcp_getsockname(tcp, $0, $1) }
            }
        } catch {
            _ = loop.onLoopThread { uv_close(tcp.handle) { UnsafeMutableRawPointer($0!).deallocate() } }
            throw error
        }
        try loop.performSync { () throws(UVError) in self.adopt(tcp) }
    }

    deinit { closeOrphanedHandle() }

    /// Connections that arrived but could not be accepted (the client reset the connection
    /// first, say), from any thread. The listener goes on accepting. When the process is out of
    /// descriptors, libuv closes waiting connections without reporting them, so those are not
    /// counted.
    public var acceptFailures: Int { failedAccepts.load(ordering: .relaxed) }
    private let failedAccepts = Synchronization.Atomic<Int>(0)

    /// The accepted connections, on the loop thread, while the producer runs (one run at a
    /// time; a second concurrent start fails with `EALREADY`). Completes when the listener is
    /// closed and is interrupted when the loop stops. A connection that cannot be accepted does
    /// not end the run: it is counted in `acceptFailures`.
    public var connections: SignalProducer<TCPConnection, UVError> {
        reader.producer(
            "TCPListener.connections", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in
                // Accept the connection libuv held while nobody listened, after the caller
                // has seen the start.
                if let self, connectionWaiting { _ = loop.execute { [self] in acceptWaiting() } }
                return nil
            }, stop: {})
    }

    /// Closes the listener, from any thread: a `connections` run completes.
    public func close() { closeFromAnyThread() }

    // MARK: Loop thread

    func handleWillClose(interrupted: Bool) { reader.finish(interrupted: interrupted) }

    private func connectionArrived(_ status: Int32) {
        if status < 0 { return acceptFailed() }
        connectionWaiting = true
        acceptWaiting()
    }

    private func acceptWaiting() {
        loop.assertInEventLoop()
        guard connectionWaiting, let handle, let observer = reader.observer else { return }
        connectionWaiting = false
        let server = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
        do throws(UVError) {
            let client = try openTCP(loop, "uv_tcp_init")
            let status = uv_accept(server, client.stream)
            guard status == 0 else {
                uv_close(client.handle) { UnsafeMutableRawPointer($0!).deallocate() }
                throw UVError(code: status, operation: "uv_accept")
            }
            observer.send(value: try TCPConnection.adopting(client, on: loop))
        } catch {
            acceptFailed()
        }
    }

    /// A connection could not be accepted (the client reset it before it was, say). That client
    /// is lost; the listener goes on.
    private func acceptFailed() {
        failedAccepts.add(1, ordering: .relaxed)
    }
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
public final class TCPConnection: _LoopOwnedHandle, @unchecked Sendable {  // Vars: confined to the loop thread.
    /// The loop the connection lives on.
    public let loop: EventLoop
    /// This end's address.
    public let localAddress: SocketAddress
    /// The peer's address.
    public let remoteAddress: SocketAddress

    /// Bounds on what a peer can make a connection hold or wait for. Every bound is off (nil) by
    /// default.
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

    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let reader = _SingleReader<ReceivedBytes>()
    // Confined to the loop thread. The buffer of the read in progress (between libuv's
    // allocation callback and its read callback), nil between reads.
    private var current: _ByteStorage?
    // Confined to the loop thread.
    private var limits = Limits()
    // Confined to the loop thread (`queuedBytes` mirrors it for other threads).
    private var queued = 0
    private let queuedBytes = Synchronization.Atomic<Int>(0)
    // Confined to the loop thread. When the queued bytes last moved (or started waiting), and
    // when anything was last read or written, on `uv_hrtime`'s clock.
    private var writeProgressAt: UInt64 = 0
    private var activityAt: UInt64 = 0
    // Confined to the loop thread. The pending timeout check, if any, and when it runs.
    private var timeoutCheck: _LoopTimedAction?
    private var timeoutCheckAt: UInt64 = 0

    private init(loop: EventLoop, local: SocketAddress, remote: SocketAddress) {
        self.loop = loop
        localAddress = local
        remoteAddress = remote
    }

    deinit { closeOrphanedHandle() }

    /// A connection owning the connected handle `tcp`, which `previousOwner` (if any) hands
    /// over; on failure the handle is closed. Loop thread only.
    static func adopting(
        _ tcp: UnsafeMutablePointer<uv_tcp_t>, on loop: EventLoop, from previousOwner: (any _LoopOwnedHandle)? = nil
    ) throws(UVError) -> TCPConnection {
        do throws(UVError) {
            let local = try SocketAddress.read("uv_tcp_getsockname") { uv_tcp_getsockname(tcp, $0, $1) }
            let remote = try SocketAddress.read("uv_tcp_getpeername") { uv_tcp_getpeername(tcp, $0, $1) }
            let connection = TCPConnection(loop: loop, local: local, remote: remote)
            if let previousOwner { previousOwner.transferHandle(to: connection) } else { connection.adopt(tcp) }
            return connection
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
        SignalProducer { observer, lifetime in
            let begin = {
                guard !lifetime.hasEnded else { return }
                do throws(UVError) {
                    let attempt = try _ConnectAttempt(loop: loop, to: address, observer: observer)
                    lifetime.observeEnded { attempt.closeFromAnyThread() }
                } catch {
                    observer.send(error: error)
                }
            }
            if !loop.onLoopThread(begin) { observer.sendInterrupted() }
        }
    }

    /// The bytes received, on the loop thread, as they arrive, from when the producer is
    /// started until its run is disposed (one run at a time; a second concurrent start fails
    /// with `EALREADY`). Completes when the peer closes its side or the connection is closed,
    /// is interrupted when the loop stops, and fails with a read error (`ECONNRESET`, say),
    /// which also closes the connection.
    public var bytes: SignalProducer<ReceivedBytes, UVError> {
        reader.producer(
            "TCPConnection.bytes", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in self?.startReading() }, stop: { [weak self] in self?.stopReading() })
    }

    /// The lines received (see `SignalProducer.lines(maxLength:)`).
    public func lines(maxLength: Int) -> SignalProducer<String, UVError> {
        bytes.lines(maxLength: maxLength)
    }

    /// The lines received as bytes (see `SignalProducer.lineBytes(maxLength:unterminatedTail:)`:
    /// `unterminatedTail` gets the bytes of a last line the peer did not end before closing).
    public func lineBytes(maxLength: Int, unterminatedTail: ((ReceivedBytes) -> Void)? = nil) -> SignalProducer<
        ReceivedBytes, UVError
    > {
        bytes.lineBytes(maxLength: maxLength, unterminatedTail: unterminatedTail)
    }

    /// Writes a copy of `bytes`, from any thread (writes from one thread go out in order).
    ///
    /// - Parameter completion: Called on the loop thread with nil once the bytes are written
    ///   to the socket, or with the error (`ECANCELED` if the connection was closed first,
    ///   `EPIPE` once it is shutting down, `ENOBUFS` if `Limits.writeHighWaterMark` refused
    ///   them). Called at once on the calling thread with `UVError.loopStopped` if the loop had
    ///   stopped.
    public func write(_ bytes: some Sequence<UInt8>, completion: ((UVError?) -> Void)? = nil) {
        submit(_SendRequest(bytes, completion))
    }

    /// Writes `bytes` without copying them (a `ReceivedBytes` is never modified, so many
    /// connections can send one buffer); see `write(_:completion:)`.
    public func write(_ bytes: ReceivedBytes, completion: ((UVError?) -> Void)? = nil) {
        submit(_SendRequest(sharing: bytes, completion))
    }

    /// The bytes written and not yet taken by the peer (or failed), from any thread.
    public var queuedWriteBytes: Int { queuedBytes.load(ordering: .relaxed) }

    /// Sets the connection's bounds, from any thread (on the loop thread, at once).
    public func setLimits(_ limits: Limits) {
        _ = loop.onLoopThread { [self] in
            self.limits = limits
            let now = uv_hrtime()
            writeProgressAt = now
            activityAt = now
            scheduleTimeoutCheck()
        }
    }

    /// Closes the connection, from any thread: a `bytes` run completes and pending writes fail
    /// with `ECANCELED`.
    public func close() { closeFromAnyThread() }

    // MARK: Loop thread

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_stream_t.self)
    }

    func handleWillClose(interrupted: Bool) {
        timeoutCheck?.dispose()
        timeoutCheck = nil
        reader.finish(interrupted: interrupted)
    }

    private func submit(_ request: _SendRequest) {
        request.submit(to: self) { [self] request in
            let count = request.count
            if let mark = limits.writeHighWaterMark, queued > 0, queued + count > mark {
                return Int32(UV_ENOBUFS.rawValue)
            }
            let status = uv_write(request.writeRequest, stream, &request.buffer, 1) { req, status in
                _SendRequest.finished(req!.pointee.data, status)
            }
            guard status >= 0 else { return status }
            if queued == 0 && limits.writeTimeout != nil { writeProgressAt = uv_hrtime() }
            queued += count
            queuedBytes.store(queued, ordering: .relaxed)
            request.queuedOn = self
            if limits.writeTimeout != nil { scheduleTimeoutCheck() }
            return status
        }
    }

    /// A write finished (sent, failed or cancelled): its bytes are no longer queued.
    func written(_ count: Int) {
        queued -= count
        queuedBytes.store(queued, ordering: .relaxed)
        // The clock is read only for a limit that needs it.
        guard limits.writeTimeout != nil || limits.idleTimeout != nil else { return }
        let now = uv_hrtime()
        writeProgressAt = now
        activityAt = now
    }

    /// Makes sure a check runs by the earliest deadline of the limits; the check closes the
    /// connection if one has passed, and schedules the next.
    private func scheduleTimeoutCheck() {
        guard handle != nil, let deadline = nextTimeout() else { return }
        if timeoutCheck != nil && timeoutCheckAt <= deadline { return }
        timeoutCheck?.dispose()
        let check = _LoopTimedAction(
            { [weak self] in
                self?.timeoutCheck = nil
                self?.checkTimeouts()
            }, interval: 0, loop: loop)
        timeoutCheck = check
        timeoutCheckAt = deadline
        loop.internalTimers().insert(check, at: deadline)
    }

    /// The earliest time at which a limit could be passed, if any limit applies now.
    private func nextTimeout() -> UInt64? {
        var earliest: UInt64?
        if let seconds = limits.writeTimeout, queued > 0 {
            earliest = writeProgressAt &+ UInt64(seconds * 1e9)
        }
        if let seconds = limits.idleTimeout {
            let idle = activityAt &+ UInt64(seconds * 1e9)
            earliest = min(earliest ?? idle, idle)
        }
        return earliest
    }

    private func checkTimeouts() {
        guard handle != nil else { return }
        let now = uv_hrtime()
        if let seconds = limits.writeTimeout, queued > 0, now >= writeProgressAt &+ UInt64(seconds * 1e9) {
            return timeOut("the peer took none of \(queued) queued bytes for \(seconds) s (writeTimeout)")
        }
        if let seconds = limits.idleTimeout, now >= activityAt &+ UInt64(seconds * 1e9) {
            return timeOut("nothing read or written for \(seconds) s (idleTimeout)")
        }
        scheduleTimeoutCheck()
    }

    private func timeOut(_ reason: String) {
        reader.fail(UVError(code: Int32(UV_ETIMEDOUT.rawValue), operation: "TCPConnection: \(reason)"))
        closeOnLoop(interrupted: false)
    }

    private func stopReading() {
        if handle != nil { uv_read_stop(stream) }
    }

    private func startReading() -> UVError? {
        let status = uv_read_start(
            stream,
            { handle, _, buf in
                let connection = TCPConnection.owner(of: handle)
                let storage = connection.loop.sharedReadBuffer.next()
                connection.current = storage
                buf!.pointee = uv_buf_init(storage.base.assumingMemoryBound(to: CChar.self), UInt32(storage.capacity))
            },
            { stream, nread, _ in
                TCPConnection.owner(of: stream).received(nread)
            })
        return status < 0 ? UVError(code: status, operation: "uv_read_start") : nil
    }

    private func received(_ count: Int) {
        loop.assertInEventLoop()
        // Between reads the connection holds no buffer: the loop's shared one is free again
        // unless an observer kept a view of it.
        let storage = current
        current = nil
        if count != 0 && limits.idleTimeout != nil { activityAt = uv_hrtime() }
        if count > 0, let storage {
            reader.observer?.send(value: ReceivedBytes(storage: storage, range: 0..<count))
        } else if count == Int(UV_EOF.rawValue) {
            reader.finish(interrupted: false)
            closeAfterPendingWrites()
        } else if count < 0 {
            reader.fail(UVError(code: Int32(count), operation: "TCPConnection.bytes (read)"))
            closeOnLoop(interrupted: false)
        }
    }

    /// Shuts the write side down once the queued writes are out, then closes. A no-op if the
    /// connection was closed already (by an observer of the read's ending, say).
    private func closeAfterPendingWrites() {
        guard handle != nil else { return }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let status = uv_shutdown(request, stream) { request, _ in
            let connection = TCPConnection.owner(of: request!.pointee.handle)
            request!.deallocate()
            connection.closeOnLoop(interrupted: false)
        }
        if status < 0 {
            request.deallocate()
            closeOnLoop(interrupted: false)
        }
    }
}

/// A connect in progress: owns the socket until it is connected, then hands it to a
/// `TCPConnection`.
final class _ConnectAttempt: _LoopOwnedHandle, @unchecked Sendable {  // Confined to the loop thread.
    let loop: EventLoop
    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let observer: Signal<TCPConnection, UVError>.Observer
    private let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)

    init(loop: EventLoop, to address: SocketAddress, observer: Signal<TCPConnection, UVError>.Observer) throws(UVError)
    {
        self.loop = loop
        self.observer = observer
        let tcp: UnsafeMutablePointer<uv_tcp_t>
        do throws(UVError) {
            tcp = try openTCP(loop, "uv_tcp_init")
        } catch {
            request.deallocate()
            throw error
        }
        adopt(tcp)
        // The request holds the attempt until its callback, which libuv makes even when the
        // socket is closed first (with `ECANCELED`): `request` must outlive it.
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = address.withUnsafePointer { address in
            uv_tcp_connect(request, tcp, address) { request, status in
                let attempt = Unmanaged<_ConnectAttempt>.fromOpaque(request!.pointee.data).takeRetainedValue()
                attempt.connected(status)
            }
        }
        if status < 0 {
            Unmanaged.passUnretained(self).release()
            closeOnLoop(interrupted: false)
            throw UVError(code: status, operation: "uv_tcp_connect(\(address))")
        }
    }

    deinit {
        closeOrphanedHandle()
        request.deallocate()
    }

    func handleWillClose(interrupted: Bool) {
        if interrupted { observer.sendInterrupted() }
    }

    private func connected(_ status: Int32) {
        // Closed first (disposed or the loop stopped): the observer has its ending already.
        guard let handle, status != Int32(UV_ECANCELED.rawValue) else { return }
        guard status == 0 else {
            observer.send(error: UVError(code: status, operation: "TCPConnection.connect (uv_tcp_connect)"))
            return closeOnLoop(interrupted: false)
        }
        do throws(UVError) {
            let tcp = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_tcp_t.self)
            let connection = try TCPConnection.adopting(tcp, on: loop, from: self)
            observer.send(value: connection)
            observer.sendCompleted()
        } catch {
            observer.send(error: error)
        }
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

import CLibUV
import Synchronization
import ReactiveLoopCore

/// A connected byte stream on an `EventLoop`: a `TCPConnection` or a `UnixStreamConnection`.
/// Code that serves lines or bytes can take either through this.
public protocol StreamConnection: AnyObject, Sendable {
    /// The loop the connection lives on.
    var loop: EventLoop { get }
    /// The bytes received, on the loop thread, as they arrive, from when the producer is
    /// started until its run is disposed (one run at a time; a second concurrent start fails
    /// with `EALREADY`). Completes when the peer closes its side or the connection is closed,
    /// is interrupted when the loop stops, and fails with a read error (`ECONNRESET`, say),
    /// which also closes the connection.
    var bytes: SignalProducer<ReceivedBytes, UVError> { get }
    /// Writes a copy of `bytes`, from any thread (writes from one thread go out in order).
    ///
    /// - Parameter completion: Called on the loop thread with nil once the bytes are written
    ///   to the socket, or with the error (`ECANCELED` if the connection was closed first,
    ///   `EPIPE` once it is shutting down, `ENOBUFS` if `Limits.writeHighWaterMark` refused
    ///   them). Called at once on the calling thread with `UVError.loopStopped` if the loop had
    ///   stopped.
    func write(_ bytes: some Sequence<UInt8>, completion: ((UVError?) -> Void)?)
    /// Writes `bytes` without copying them (a `ReceivedBytes` is never modified, so many
    /// connections can send one buffer); see `write(_:completion:)`.
    func write(_ bytes: ReceivedBytes, completion: ((UVError?) -> Void)?)
    /// The bytes written and not yet taken by the peer (or failed), from any thread.
    var queuedWriteBytes: Int { get }
    /// Sets the connection's bounds, from any thread (on the loop thread, at once).
    func setLimits(_ limits: TCPConnection.Limits)
    /// Closes the connection, from any thread: a `bytes` run completes and pending writes fail
    /// with `ECANCELED`.
    func close()
}

extension StreamConnection {
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
}

/// The reading, writing and limits of a connected libuv stream, shared by `TCPConnection` and
/// `UnixStreamConnection`, which add their addresses. It owns the handle: the loop keeps it (and
/// so the connection) alive while it is open, whether or not anyone refers to its facade.
final class _StreamCore: _LoopOwnedHandle, @unchecked Sendable {  // Vars: confined to the loop thread.
    let loop: EventLoop
    /// The public type's name, for errors.
    let api: String

    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let reader = _SingleReader<ReceivedBytes>()
    // Confined to the loop thread. The buffer of the read in progress (between libuv's
    // allocation callback and its read callback), nil between reads.
    private var current: _ByteStorage?
    // Confined to the loop thread.
    private var limits = TCPConnection.Limits()
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
    // Confined to the loop thread. Whether libuv reads the stream now; the turn of the loop
    // (its `uv_now`) of the last read, and the reads made in it.
    private var isReading = false
    private var turn: UInt64 = 0
    private var readsThisTurn = 0

    /// The most reads (of up to 64 KiB each) a connection takes in one turn of its loop. libuv
    /// reads a stream up to 32 times per wake-up while its peer keeps the socket full; when
    /// what the reads feed is slow (a parser), a few fast peers then held the loop for seconds,
    /// and every other socket, timer and signal waited. Past this, the connection stops reading
    /// until the next turn, after the loop has polled everything else.
    static let readsPerTurn = 4

    init(loop: EventLoop, api: String) {
        self.loop = loop
        self.api = api
    }

    deinit { closeOrphanedHandle() }

    /// Takes the connected `stream` over from `previousOwner` (a connect attempt), or adopts it
    /// if there is none. Loop thread only.
    func take(_ stream: UnsafeMutablePointer<uv_stream_t>, from previousOwner: (any _LoopOwnedHandle)?) {
        if let previousOwner { previousOwner.transferHandle(to: self) } else { adopt(stream) }
    }

    var bytes: SignalProducer<ReceivedBytes, UVError> {
        reader.producer(
            "\(api).bytes", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in self?.startReading() }, stop: { [weak self] in self?.stopReading() })
    }

    func write(_ request: _SendRequest) {
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

    var queuedWriteBytes: Int { queuedBytes.load(ordering: .relaxed) }

    func setLimits(_ limits: TCPConnection.Limits) {
        _ = loop.onLoopThread { [self] in
            self.limits = limits
            let now = uv_hrtime()
            writeProgressAt = now
            activityAt = now
            scheduleTimeoutCheck()
        }
    }

    // MARK: Loop thread

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_stream_t.self)
    }

    func handleWillClose(interrupted: Bool) {
        timeoutCheck?.dispose()
        timeoutCheck = nil
        reader.finish(interrupted: interrupted)
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
        let timers = loop.internalTimers()
        let check = _LoopTimedAction(
            { [weak self] in
                self?.timeoutCheck = nil
                self?.checkTimeouts()
            }, interval: 0, timers: timers)
        timeoutCheck = check
        timeoutCheckAt = deadline
        timers.insert(check, at: deadline)
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
        reader.fail(UVError(code: Int32(UV_ETIMEDOUT.rawValue), operation: "\(api): \(reason)"))
        closeOnLoop(interrupted: false)
    }

    private func stopReading() {
        isReading = false
        if handle != nil { uv_read_stop(stream) }
    }

    /// Stops reading for the rest of this turn of the loop; reading resumes at the next (unless
    /// the run has ended or the connection closed meanwhile).
    private func yieldTurn() {
        stopReading()
        _ = loop.execute { [weak self] in
            guard let self, handle != nil, !isReading, reader.observer != nil else { return }
            if let error = startReading() {
                reader.fail(error)
                closeOnLoop(interrupted: false)
            }
        }
    }

    private func startReading() -> UVError? {
        readsThisTurn = 0
        let status = uv_read_start(
            stream,
            { handle, _, buf in
                let connection = _StreamCore.owner(of: handle)
                let storage = connection.loop.sharedReadBuffer.next()
                connection.current = storage
                buf!.pointee = uv_buf_init(storage.base.assumingMemoryBound(to: CChar.self), UInt32(storage.capacity))
            },
            { stream, nread, _ in
                _StreamCore.owner(of: stream).received(nread)
            })
        if status < 0 { return UVError(code: status, operation: "uv_read_start") }
        isReading = true
        return nil
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
            let now = uv_now(loop.uvLoop)
            if now != turn {
                turn = now
                readsThisTurn = 0
            }
            readsThisTurn += 1
            if readsThisTurn >= Self.readsPerTurn && isReading && handle != nil { yieldTurn() }
        } else if count == Int(UV_EOF.rawValue) {
            reader.finish(interrupted: false)
            closeAfterPendingWrites()
        } else if count < 0 {
            reader.fail(UVError(code: Int32(count), operation: "\(api).bytes (read)"))
            closeOnLoop(interrupted: false)
        }
    }

    /// Shuts the write side down once the queued writes are out, then closes. A no-op if the
    /// connection was closed already (by an observer of the read's ending, say).
    private func closeAfterPendingWrites() {
        guard handle != nil else { return }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let status = uv_shutdown(request, stream) { request, _ in
            let connection = _StreamCore.owner(of: request!.pointee.handle)
            request!.deallocate()
            connection.closeOnLoop(interrupted: false)
        }
        if status < 0 {
            request.deallocate()
            closeOnLoop(interrupted: false)
        }
    }
}

/// The owner of a listening stream or of a connect request, which libuv calls back with a
/// status (a connection arrived; the connect finished). libuv's callbacks are C functions, which
/// cannot name a generic owner: they reach it through this.
protocol _StreamStatusCallback: AnyObject {
    func statusArrived(_ status: Int32)
}

/// A listening libuv stream (TCP or Unix), shared by `TCPListener` and `UnixStreamListener`:
/// accepts connections while its `connections` producer runs, each made by `accept`. Vars:
/// confined to the loop thread.
final class _StreamListener<Connection>: _LoopOwnedHandle, _StreamStatusCallback, @unchecked Sendable {
    let loop: EventLoop
    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let api: String
    /// Accepts the waiting connection from the listening stream into a new handle and wraps
    /// it, or closes that handle and throws. Loop thread only.
    private let accept: (UnsafeMutablePointer<uv_stream_t>) throws(UVError) -> Connection
    /// Runs as the handle starts closing, after the `connections` run has ended.
    var willClose: (() -> Void)?
    private let reader = _SingleReader<Connection>()
    // Confined to the loop thread. libuv holds a connection that nobody accepted yet.
    private var connectionWaiting = false
    let failedAccepts = Synchronization.Atomic<Int>(0)

    init(
        loop: EventLoop, api: String,
        accept: @escaping (UnsafeMutablePointer<uv_stream_t>) throws(UVError) -> Connection
    ) {
        self.loop = loop
        self.api = api
        self.accept = accept
    }

    deinit { closeOrphanedHandle() }

    /// Starts listening on `server` (bound) and adopts it. Loop thread only; if it throws, the
    /// caller still owns `server`.
    func listen(_ server: UnsafeMutablePointer<uv_stream_t>, backlog: Int, _ operation: String) throws(UVError) {
        let status = uv_listen(server, Int32(backlog)) { server, status in
            let owner = Unmanaged<AnyObject>.fromOpaque(server!.pointee.data!).takeUnretainedValue()
            (owner as! any _StreamStatusCallback).statusArrived(status)
        }
        try UVError.check(status, operation)
        adopt(server)
    }

    var connections: SignalProducer<Connection, UVError> {
        reader.producer(
            "\(api).connections", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in
                // Accept the connection libuv held while nobody listened, after the caller
                // has seen the start.
                if let self, connectionWaiting { _ = loop.execute { [self] in acceptWaiting() } }
                return nil
            }, stop: {})
    }

    // MARK: Loop thread

    func handleWillClose(interrupted: Bool) {
        reader.finish(interrupted: interrupted)
        willClose?()
    }

    /// A connection arrived (or failed to).
    func statusArrived(_ status: Int32) {
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
            observer.send(value: try accept(server))
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

/// Accepts the connection waiting on `server` into a new handle that `initialize` sets up, or
/// closes that handle and throws. Loop thread only.
func acceptStream<Handle>(
    _ server: UnsafeMutablePointer<uv_stream_t>, _ type: Handle.Type, _ operation: String,
    initialize: (UnsafeMutablePointer<Handle>) -> Int32
) throws(UVError) -> UnsafeMutablePointer<uv_stream_t> {
    let client = try allocateHandle(type, operation, initialize)
    let stream = UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_stream_t.self)
    let status = uv_accept(server, stream)
    guard status == 0 else {
        uv_close(UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_handle_t.self)) {
            UnsafeMutableRawPointer($0!).deallocate()
        }
        throw UVError(code: status, operation: "uv_accept")
    }
    return stream
}

/// A connect in progress: owns the socket until it is connected, then hands it to the
/// connection that `wrap` makes of it. Confined to the loop thread.
final class _ConnectAttempt<Connection>: _LoopOwnedHandle, _StreamStatusCallback, @unchecked Sendable {
    let loop: EventLoop
    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let observer: Signal<Connection, UVError>.Observer
    private let api: String
    private let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
    private let wrap: (UnsafeMutablePointer<uv_stream_t>, _ConnectAttempt) throws(UVError) -> Connection

    /// Adopts `stream` (initialized, not connected) and starts `connect` on it with the
    /// request and libuv's callback; `wrap` makes the connection once connected, taking the
    /// handle over from the attempt. Loop thread only.
    init(
        loop: EventLoop, api: String, stream: UnsafeMutablePointer<uv_stream_t>,
        observer: Signal<Connection, UVError>.Observer,
        connect: (UnsafeMutablePointer<uv_connect_t>, _ callback: uv_connect_cb) -> Int32,
        wrap: @escaping (UnsafeMutablePointer<uv_stream_t>, _ConnectAttempt) throws(UVError) -> Connection
    ) throws(UVError) {
        self.loop = loop
        self.api = api
        self.observer = observer
        self.wrap = wrap
        adopt(stream)
        // The request holds the attempt until its callback, which libuv makes even when the
        // socket is closed first (with `ECANCELED`): `request` must outlive it.
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = connect(request) { request, status in
            let attempt = Unmanaged<AnyObject>.fromOpaque(request!.pointee.data).takeRetainedValue()
            (attempt as! any _StreamStatusCallback).statusArrived(status)
        }
        if status < 0 {
            Unmanaged.passUnretained(self).release()
            closeOnLoop(interrupted: false)
            throw UVError(code: status, operation: api)
        }
    }

    deinit {
        closeOrphanedHandle()
        request.deallocate()
    }

    func handleWillClose(interrupted: Bool) {
        if interrupted { observer.sendInterrupted() }
    }

    /// The connect finished with `status`.
    func statusArrived(_ status: Int32) {
        // Closed first (disposed or the loop stopped): the observer has its ending already.
        guard let handle, status != Int32(UV_ECANCELED.rawValue) else { return }
        guard status == 0 else {
            observer.send(error: UVError(code: status, operation: api))
            return closeOnLoop(interrupted: false)
        }
        do throws(UVError) {
            let stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
            let connection = try wrap(stream, self)
            observer.send(value: connection)
            observer.sendCompleted()
        } catch {
            observer.send(error: error)
        }
    }
}

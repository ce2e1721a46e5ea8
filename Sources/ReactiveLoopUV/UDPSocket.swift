import CLibUV
import Dispatch
import ReactiveLoopCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A datagram received by a `UDPSocket`.
public struct Datagram: Sendable {
    /// The payload, without a copy (see `ReceivedBytes`).
    public let bytes: ReceivedBytes
    /// Who sent it.
    public let sender: SocketAddress
    /// Whether the datagram was larger than the receive slot (64 KiB) and its tail was dropped.
    public let isTruncated: Bool
}

/// A UDP socket on an `EventLoop`: bound at creation, receiving as a producer, sending from any
/// thread.
///
/// Receiving reads datagrams in batches with `recvmmsg(2)` (libuv's `UV_UDP_RECVMMSG`), up to 20
/// per system call, into one buffer that the datagrams' bytes view without a copy. A call offers
/// all 20 slots after a batch that filled every slot, else one more than the last batch filled
/// (and at least 4), so that a quiet socket's reads prepare few message headers and a busy
/// one's take 20 at a time. A batch that fills fewer slots than it was offered has emptied the
/// socket (or met an error, which the next read reports): the wake-up's reads end there,
/// without the call that would find the socket empty, and the next wake-up comes when the
/// loop's poll finds the socket readable (libuv's poll is level-triggered: a datagram that
/// arrived in between is found at the next turn of the loop). Reading starts when `datagrams`
/// is started and stops when its run is disposed; meanwhile datagrams wait in the socket's
/// receive buffer (and the kernel drops what overflows it). A run disposed, or the socket
/// closed, from inside the run's own callback loses the rest of the batch being delivered (at
/// most 19 datagrams, which libuv has already taken from the kernel), unless a new run is
/// started in that same callback: it gets them.
///
/// A socket made with a `readPause` reads busy traffic in fewer, fuller calls: see
/// `init(boundTo:on:receiveBufferSize:reuseAddress:reusePort:readPause:)`.
///
/// The socket stays open until `close()` or until the loop stops, whether or not a reference to
/// it is kept. Every callback runs on the loop thread.
public final class UDPSocket: _LoopOwnedHandle, @unchecked Sendable {  // Vars: confined to the loop thread.
    /// The loop the socket lives on.
    public let loop: EventLoop
    /// The address the socket is bound to (with the port the system chose, if 0 was asked).
    public let localAddress: SocketAddress
    /// The receive buffer size the kernel granted, as `getsockopt(SO_RCVBUF)` reports it (on
    /// Linux twice the usable size, the other half being the kernel's bookkeeping).
    public let receiveBufferSize: Int
    /// Whether reads are batched with `recvmmsg`.
    public let isBatchingReceives: Bool

    var handle: UnsafeMutablePointer<uv_handle_t>?
    private let reader = _SingleReader<Datagram>()
    // Confined to the loop thread; no access is held across a call out of the class.
    @exclusivity(unchecked) private var buffer: _ReceiveBuffer
    // Slots offered to the next `recvmmsg` (loop thread): all of them (`batch`) after a batch
    // that filled every slot, else one more than the last batch filled, and at least
    // `fewestSlots`. libuv prepares a message header for every slot it is offered, at every
    // call, and on a quiet socket a wake-up's call returns one datagram: offering all 20 cost
    // about 800 instructions a wake-up.
    @exclusivity(unchecked) private(set) var offeredSlots = UDPSocket.batch
    // Datagrams the current batch has delivered so far (loop thread).
    @exclusivity(unchecked) private var filledSlots = 0
    // Whether the last batch filled fewer slots than it was offered, so emptied the socket,
    // and libuv goes on reading in this wake-up (loop thread): its next read is declined,
    // which ends the wake-up's reads. On a quiet socket that read found nothing at the cost of
    // a system call and the message headers of its slots.
    @exclusivity(unchecked) private var emptied = false
    // Datagrams read in the current wake-up, against libuv's `readsPerWakeUp` (loop thread).
    @exclusivity(unchecked) private var readInWakeUp = 0
    // How many datagram deliveries are under way, nested (loop thread): a run started from
    // inside one goes on with the batch and the wake-up under way.
    @exclusivity(unchecked) private var delivering = 0
    /// The `recvmmsg` (or `recvmsg`) calls made so far (loop thread; tests read it).
    @exclusivity(unchecked) private(set) var reads = 0
    /// The reads declined so far after a batch that emptied the socket (loop thread; tests).
    @exclusivity(unchecked) private(set) var declinedReads = 0
    // The read pause in nanoseconds as set (0: none), from any thread.
    private let readPauseSet: Synchronization.Atomic<UInt64>
    /// When reading pauses (loop thread; tests read it).
    @exclusivity(unchecked) private(set) var pacer: _ReadPacer
    /// The timer of the pauses, made at the first (loop thread; tests read it).
    private(set) var pauseTimers: _LoopTimers?
    // The end of the current pause, while reading is paused (loop thread).
    private var pauseEnd: _LoopTimedAction?
    /// When the current pause ends (monotonic nanoseconds), while reading is paused (loop
    /// thread; tests).
    private(set) var pauseEndsAt: UInt64?
    /// Whether reading is paused (loop thread; tests).
    var isPaused: Bool { pauseEnd != nil }
    /// Times reading paused (loop thread; tests).
    private(set) var readPauses = 0

    /// Bytes per datagram slot: libuv's largest datagram.
    static let slot = 64 * 1024
    /// Datagrams per `recvmmsg` call: libuv's largest batch.
    static let batch = 20
    /// The fewest slots a `recvmmsg` call is offered: a burst after a quiet spell then takes
    /// one short call before the full batches.
    static let fewestSlots = 4
    /// The datagrams libuv reads in one wake-up at most (its `uv__udp_recvmsg`: 32 in every
    /// version to date). A batch that reaches it ends the wake-up's reads without another
    /// read, so the next read is not declined.
    static let readsPerWakeUp = 32

    /// Creates a socket bound to `address` on `loop`.
    ///
    /// Call it on the loop thread, or before the loop runs (a daemon opens its sockets before
    /// `run()`), or from any other thread while the loop runs: it then waits for the loop thread.
    ///
    /// - Parameters:
    ///   - receiveBufferSize: The `SO_RCVBUF` size to ask for, in bytes. As root it is granted
    ///     in full (`SO_RCVBUFFORCE`); otherwise the kernel caps it at `net.core.rmem_max`. See
    ///     `receiveBufferSize` for what was granted. Nil keeps the system's default.
    ///   - reuseAddress: Sets `SO_REUSEADDR`, so several sockets can bind the same address.
    ///   - reusePort: Sets `SO_REUSEPORT`, so that several sockets of the same user bound to the
    ///     same address share its datagrams: the kernel gives each sender (by its address and
    ///     port) to one of them. Each socket has its own receive buffer and may be read on its own
    ///     loop, so that datagrams are read on several cores.
    ///   - readPause: How long reading pauses when datagrams come fast; nil (the default): it
    ///     never does. Reading empties the socket's receive buffer, and a fast sender refills it
    ///     at once, so a busy socket read without a pause spends a system call (or two) and often
    ///     a wake-up on each datagram. With a pause, datagrams are counted over windows at least
    ///     `readPause` long; while the last window's came at 8 or more per `readPause`, each read
    ///     that empties the buffer stops reading for `readPause`, on a timer of the loop, and
    ///     the reads after it take what has arrived, up to 20 datagrams a call. Slower datagrams
    ///     are read as they come: a pause costs wake-ups and system calls of its own, which fewer
    ///     would not repay. A run's first window opens at its first empty buffer, so it starts
    ///     without pausing. Each datagram may wait up to `readPause` more before its `datagrams`
    ///     value, and the receive buffer must hold what arrives meanwhile (at R datagrams a
    ///     second, R × `readPause` of them), or the kernel drops the rest (`kernelDrops`). So
    ///     the pause taken adapts: it halves (down to 1/64 of `readPause`) after a pause that
    ///     left the receive buffer a quarter full or more, and doubles back (up to `readPause`)
    ///     after one that left it less than a sixteenth full.
    /// - Throws: `UVError` if the socket cannot be created or bound (`EADDRINUSE`, say), or
    ///   `UVError.loopStopped`.
    /// - Precondition: `receiveBufferSize` is positive, and `readPause` is at least 1 nanosecond
    ///   and at most 1 second.
    public init(
        boundTo address: SocketAddress, on loop: EventLoop, receiveBufferSize: Int? = nil, reuseAddress: Bool = false,
        reusePort: Bool = false, readPause: Duration? = nil
    ) throws(UVError) {
        if let receiveBufferSize {
            _require(
                receiveBufferSize > 0 && receiveBufferSize <= Int(Int32.max),
                "UDPSocket(boundTo:on:receiveBufferSize:): receiveBufferSize must be in 1...\(Int32.max), got \(receiveBufferSize)"
            )
        }
        let pause = Self.nanoseconds(ofPause: readPause, "UDPSocket(boundTo:on:readPause:)")
        readPauseSet = Synchronization.Atomic(pause)
        pacer = _ReadPacer(pause: pause)
        self.loop = loop
        let created = try loop.performSync {
            () throws(UVError) -> (UnsafeMutablePointer<uv_udp_t>, SocketAddress, Int, Bool) in
            let family = address.family == .ipv6 ? AF_INET6 : AF_INET
            let flags = UInt32(family) | UInt32(UV_UDP_RECVMMSG.rawValue)
            let udp = try allocateHandle(uv_udp_t.self, "uv_udp_init_ex") { uv_udp_init_ex(loop.uvLoop, $0, flags) }
            do throws(UVError) {
                if reusePort {
                    // Before the bind; libuv 1.44 has no flag for it.
                    var fd: Int32 = -1
                    try UVError.check(uv_fileno(udp.handle, &fd), "uv_fileno")
                    var on: Int32 = 1
                    if setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                        throw UVError(code: -errno, operation: "setsockopt(SO_REUSEPORT)")
                    }
                }
                let bindFlags = reuseAddress ? UInt32(UV_UDP_REUSEADDR.rawValue) : 0
                try UVError.check(
                    address.withUnsafePointer { uv_udp_bind(udp, $0, bindFlags) }, "uv_udp_bind(\(address))")
                if let receiveBufferSize { try UDPSocket.setReceiveBuffer(udp, receiveBufferSize) }
                var granted: Int32 = 0
                try UVError.check(uv_recv_buffer_size(udp.handle, &granted), "uv_recv_buffer_size")
                let local = try SocketAddress.read("uv_udp_getsockname") { uv_udp_getsockname(udp, $0, $1) }
                return (udp, local, Int(granted), uv_udp_using_recvmmsg(udp) != 0)
            } catch {
                uv_close(udp.handle) { UnsafeMutableRawPointer($0!).deallocate() }
                throw error
            }
        }
        localAddress = created.1
        self.receiveBufferSize = created.2
        isBatchingReceives = created.3
        buffer = _ReceiveBuffer(capacity: created.3 ? UDPSocket.slot * UDPSocket.batch : UDPSocket.slot)
        let udp = created.0
        try loop.performSync { () throws(UVError) in self.adopt(udp) }
    }

    deinit { closeOrphanedHandle() }

    private static func setReceiveBuffer(_ udp: UnsafeMutablePointer<uv_udp_t>, _ size: Int) throws(UVError) {
        var fd: Int32 = -1
        try UVError.check(uv_fileno(udp.handle, &fd), "uv_fileno")
        var value = Int32(size / 2)  // The kernel doubles what it is asked for.
        if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 { return }
        var asked = Int32(size)
        try UVError.check(uv_recv_buffer_size(udp.handle, &asked), "uv_recv_buffer_size(\(size))")
    }

    /// The datagrams received, on the loop thread, from when the producer is started until its
    /// run is disposed (one run at a time; a second concurrent start fails with `EALREADY`).
    /// Completes when the socket is closed, is interrupted when the loop stops, and fails if
    /// libuv reports a receive error.
    public var datagrams: SignalProducer<Datagram, UVError> {
        reader.producer(
            "UDPSocket.datagrams", loop: loop, isOpen: { [weak self] in self?.handle != nil },
            start: { [weak self] in
                self?.pacer.startRun()
                return self?.startReceiving()
            },
            stop: { [weak self] in
                guard let self else { return }
                endPause()
                if handle != nil { uv_udp_recv_stop(udp) }
            })
    }

    /// How long reading pauses when datagrams come fast (see
    /// `init(boundTo:on:receiveBufferSize:reuseAddress:reusePort:readPause:)`); nil: it never
    /// does. From any thread: a new value applies from the next time reading finds the socket
    /// empty (a pause under way ends as it was set).
    ///
    /// - Precondition: a new value is at least 1 nanosecond and at most 1 second.
    public var readPause: Duration? {
        get {
            let nanoseconds = readPauseSet.load(ordering: .relaxed)
            return nanoseconds == 0 ? nil : .nanoseconds(Int64(nanoseconds))
        }
        set { readPauseSet.store(Self.nanoseconds(ofPause: newValue, "UDPSocket.readPause"), ordering: .relaxed) }
    }

    /// `pause` in nanoseconds (0 for nil), checked for `api`.
    private static func nanoseconds(ofPause pause: Duration?, _ api: String) -> UInt64 {
        guard let pause else { return 0 }
        _require(
            pause >= .nanoseconds(1) && pause <= .seconds(1),
            "\(api): readPause must be at least 1 nanosecond and at most 1 second, got \(pause)")
        let (seconds, attoseconds) = pause.components
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    /// The socket's descriptor, for options libuv does not cover. Loop thread only; -1 once closed.
    public var fileDescriptor: Int32 {
        var fd: Int32 = -1
        if let handle { _ = uv_fileno(handle, &fd) }
        return fd
    }

    /// Reads, without waiting, what the kernel holds for the socket: at most `limit` datagrams,
    /// each handed to `body` (its bytes valid during the call only, and whether it was cut at
    /// 64 KiB). For a shutdown: the datagrams that arrived before the socket closes are read
    /// instead of lost. A `datagrams` run, if any, sees none of them. Loop thread only.
    ///
    /// - Returns: The number of datagrams read (0 once closed).
    /// - Precondition: `limit` is positive.
    public func drain(limit: Int = 1_000_000, _ body: (UnsafeRawBufferPointer, _ isTruncated: Bool) -> Void) -> Int {
        _require(limit > 0, "UDPSocket.drain(limit:_:): limit must be > 0, got \(limit)")
        loop.assertInEventLoop()
        return drainDatagrams(of: fileDescriptor, limit: limit, body)
    }

    /// The datagrams the kernel dropped for this socket since it was opened, because its receive
    /// buffer was full (Linux's `SO_MEMINFO`, `SK_MEMINFO_DROPS`): what a reader too slow for its
    /// senders lost. Nil once closed, or where the kernel does not say. Loop thread only.
    public var kernelDrops: UInt64? {
        loop.assertInEventLoop()
        return socketKernelDrops(of: fileDescriptor)
    }

    /// Sends `bytes` to `destination`, from any thread (sends from one thread go out in order).
    ///
    /// - Parameter completion: Called on the loop thread with nil once sent, or the error
    ///   (`UVError.loopStopped` if the loop was stopped, `ECANCELED` if the socket was closed
    ///   first). Called at once on the calling thread if the loop had stopped.
    public func send(
        _ bytes: some Sequence<UInt8>, to destination: SocketAddress, completion: ((UVError?) -> Void)? = nil
    ) {
        _SendRequest(bytes, completion).submit(to: self) { [self] request in
            destination.withUnsafePointer { address in
                uv_udp_send(request.udpRequest, udp, &request.buffer, 1, address) { req, status in
                    _SendRequest.finished(req!.pointee.data, status)
                }
            }
        }
    }

    /// Closes the socket, from any thread: a `datagrams` run completes, pending sends fail
    /// with `ECANCELED`.
    public func close() { closeFromAnyThread() }

    // MARK: Loop thread

    private var udp: UnsafeMutablePointer<uv_udp_t> {
        UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_udp_t.self)
    }

    func handleWillClose(interrupted: Bool) {
        endPause()
        pauseTimers?.closeWhenIdle()
        pauseTimers = nil
        reader.finish(interrupted: interrupted)
    }

    private func startReceiving() -> UVError? {
        // A run stopped mid-batch never saw the batch's end, unless this one starts inside a
        // datagram's delivery: libuv then delivers the rest of that batch to it, and goes on
        // with the same wake-up.
        if delivering == 0 { (filledSlots, emptied, readInWakeUp) = (0, false, 0) }
        let status = uv_udp_recv_start(
            udp,
            { handle, _, buf in
                let bytes = UDPSocket.withOwner(of: handle) { socket -> UnsafeMutableRawBufferPointer in
                    // Declined with an empty buffer: libuv reports `UV_ENOBUFS` and ends the
                    // wake-up's reads (reading stays started).
                    if socket.emptied {
                        socket.declinedReads &+= 1
                        return UnsafeMutableRawBufferPointer(start: nil, count: 0)
                    }
                    socket.reads &+= 1
                    let bytes = socket.buffer.nextBytes()
                    guard socket.isBatchingReceives else { return bytes }
                    return UnsafeMutableRawBufferPointer(
                        rebasing: bytes[..<Swift.min(bytes.count, socket.offeredSlots * UDPSocket.slot)])
                }
                buf!.pointee = uv_buf_init(bytes.baseAddress?.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
            },
            { handle, nread, buf, address, flags in
                UDPSocket.withOwner(of: handle) { $0.received(nread, buf!.pointee, address, flags) }
            })
        return status < 0 ? UVError(code: status, operation: "uv_udp_recv_start") : nil
    }

    private func received(_ count: Int, _ buf: uv_buf_t, _ address: UnsafePointer<sockaddr>?, _ flags: UInt32) {
        loop.assertInEventLoop()
        if count < 0 {
            readInWakeUp = 0
            if count == Int(UV_ENOBUFS.rawValue) && emptied {
                // The read declined after a batch that emptied the socket.
                emptied = false
                return foundNothingLeft()
            }
            if handle != nil { uv_udp_recv_stop(udp) }
            return reader.fail(UVError(code: Int32(count), operation: "UDPSocket.datagrams (recv)"))
        }
        if flags & UInt32(UV_UDP_MMSG_CHUNK.rawValue) != 0 {
            filledSlots += 1
        } else if flags & UInt32(UV_UDP_MMSG_FREE.rawValue) != 0 {
            // The end of a batch: size the next call's offer, and decline it if the batch
            // emptied the socket and libuv would read on.
            readInWakeUp += filledSlots
            let readsOn = readInWakeUp < Self.readsPerWakeUp
            let short = filledSlots < offeredSlots
            emptied = short && readsOn
            if !readsOn { readInWakeUp = 0 }
            offeredSlots = short ? Swift.max(filledSlots + 1, Self.fewestSlots) : Self.batch
            filledSlots = 0
            // A short batch that ends the wake-up on libuv's budget emptied the socket too.
            if short && !readsOn { foundNothingLeft() }
            return
        } else if count == 0 && address == nil {
            readInWakeUp = 0
            return foundNothingLeft()
        }
        // A datagram (libuv gives each its sender's address).
        guard let address, let sender = SocketAddress(address), let storage = buffer.current else { return }
        let offset = UnsafeMutableRawPointer(buf.base!) - storage.base
        let bytes = ReceivedBytes(storage: storage, range: offset..<(offset + count))
        let truncated = flags & UInt32(UV_UDP_PARTIAL.rawValue) != 0
        pacer.read()
        delivering &+= 1
        reader.observer?.send(value: Datagram(bytes: bytes, sender: sender, isTruncated: truncated))
        delivering &-= 1
    }

    /// Nothing is left to read: a read found the socket empty, or a short batch emptied it.
    private func foundNothingLeft() {
        pacer.set(pause: readPauseSet.load(ordering: .relaxed))
        if pacer.pause != 0 { foundEmpty() }
    }

    /// The receive buffer was found empty: pauses reading if the pacer says so.
    private func foundEmpty() {
        let now = _WallClockMapping.monotonicNow
        guard let pause = pacer.foundEmpty(at: now), handle != nil, reader.observer != nil else { return }
        uv_udp_recv_stop(udp)
        readPauses += 1
        let timers = pauseTimers ?? _LoopTimers(loop: loop)
        pauseTimers = timers
        // Holds the socket until it runs or is disposed (`endPause`, when the run stops or the
        // socket closes).
        let end = _LoopTimedAction({ [self] in resumeReading() }, interval: 0, timers: timers)
        (pauseEnd, pauseEndsAt) = (end, now &+ pause)
        timers.insert(end, at: now &+ pause)
    }

    /// The end of a pause: tells the pacer how full it left the receive buffer, and reads again.
    private func resumeReading() {
        (pauseEnd, pauseEndsAt) = (nil, nil)
        guard handle != nil, reader.observer != nil else { return }
        if let (queued, limit) = socketMemory(of: fileDescriptor) { pacer.pauseEnded(queued: queued, limit: limit) }
        // What came during the pause is read in full batches.
        offeredSlots = Self.batch
        if let error = startReceiving() { reader.fail(error) }
    }

    /// Cancels the current pause, if any: the run stopped, or the socket is closing.
    private func endPause() {
        pauseEnd?.dispose()
        (pauseEnd, pauseEndsAt) = (nil, nil)
    }
}

extension UnsafeMutablePointer {
    /// The handle as libuv's base handle type.
    var handle: UnsafeMutablePointer<uv_handle_t> {
        UnsafeMutableRawPointer(self).assumingMemoryBound(to: uv_handle_t.self)
    }
}

/// One send or write: a copy of the bytes that the request owns (libuv reads them until its
/// callback), the request and the completion.
final class _SendRequest: @unchecked Sendable {  // Handed to the loop thread once.
    private let bytes: UnsafeMutableRawBufferPointer
    /// The buffer `bytes` views when the request sends bytes it does not own (no copy).
    private let shared: _ByteStorage?
    var buffer: uv_buf_t
    private let completion: ((UVError?) -> Void)?
    private let request: UnsafeMutableRawPointer
    /// The connection whose queued bytes count this request, once libuv has taken it: told when
    /// it finishes, before the completion (no closure, so no allocation per write). Loop thread.
    weak var queuedOn: _StreamCore?

    init(_ source: some Sequence<UInt8>, _ completion: ((UVError?) -> Void)?) {
        let array = Array(source)
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(array.count, 1), alignment: 1)
        array.withUnsafeBytes { copy.copyMemory(from: $0) }
        bytes = copy
        shared = nil
        buffer = uv_buf_init(copy.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(array.count))
        self.completion = completion
        request = _SendRequest.allocateRequest()
        request.assumingMemoryBound(to: uv_req_t.self).pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// A request that sends `source` without copying it: it keeps `source`'s buffer alive, and a
    /// `ReceivedBytes` buffer is never written once made.
    init(sharing source: ReceivedBytes, _ completion: ((UVError?) -> Void)?) {
        shared = source.storage
        bytes = UnsafeMutableRawBufferPointer(start: source.storage.base + source.startIndex, count: source.count)
        buffer = uv_buf_init(
            (source.storage.base + source.startIndex).assumingMemoryBound(to: CChar.self), UInt32(source.count))
        self.completion = completion
        request = _SendRequest.allocateRequest()
        request.assumingMemoryBound(to: uv_req_t.self).pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    private static func allocateRequest() -> UnsafeMutableRawPointer {
        let size = max(MemoryLayout<uv_udp_send_t>.size, MemoryLayout<uv_write_t>.size)
        return .allocate(byteCount: size, alignment: 16)
    }

    deinit {
        request.deallocate()
        if shared == nil { bytes.deallocate() }
    }

    /// The number of bytes sent.
    var count: Int { Int(buffer.len) }

    var udpRequest: UnsafeMutablePointer<uv_udp_send_t> { request.assumingMemoryBound(to: uv_udp_send_t.self) }
    var writeRequest: UnsafeMutablePointer<uv_write_t> { request.assumingMemoryBound(to: uv_write_t.self) }

    /// Submits the request on the loop thread through `start` (a libuv call whose callback
    /// calls `finished(_:_:)`) while `owner` is open: `ECANCELED` once it is closed, the error if
    /// `start` fails, `UVError.loopStopped` at once if the loop was stopped.
    func submit(to owner: some _LoopOwnedHandle, _ start: @escaping (_SendRequest) -> Int32) {
        let accepted = owner.loop.onLoopThread { [self] in
            guard owner.handle != nil else { return finish(Int32(UV_ECANCELED.rawValue)) }
            let status = start(self)
            // libuv holds the request until its callback: keep the object alive until then.
            if status < 0 { finish(status) } else { _ = Unmanaged.passRetained(self) }
        }
        if !accepted { completion?(.loopStopped) }
    }

    /// The libuv callback's end of `submit`: releases the request and reports `status`.
    static func finished(_ data: UnsafeMutableRawPointer?, _ status: Int32) {
        let request = Unmanaged<_SendRequest>.fromOpaque(data!).takeRetainedValue()
        request.queuedOn?.written(request.count)
        request.finish(status)
    }

    private func finish(_ status: Int32) {
        completion?(status < 0 ? UVError(code: status, operation: "send") : nil)
    }
}

/// Reads, without waiting, at most `limit` datagrams from `fd` (-1: none), each handed to `body`
/// with whether it was longer than `size` bytes and cut there; returns how many.
func drainDatagrams(
    of fd: Int32, limit: Int, slot size: Int = 64 * 1024, _ body: (UnsafeRawBufferPointer, _ isTruncated: Bool) -> Void
) -> Int {
    guard fd >= 0 else { return 0 }
    let slot = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 8)
    defer { slot.deallocate() }
    var read = 0
    while read < limit {
        // MSG_TRUNC: the datagram's full length, to tell a cut one.
        let received = recv(fd, slot.baseAddress, slot.count, Int32(MSG_DONTWAIT | MSG_TRUNC))
        guard received >= 0 else { break }
        body(UnsafeRawBufferPointer(rebasing: slot[0..<min(received, slot.count)]), received > slot.count)
        read += 1
    }
    return read
}

/// Linux's `SO_MEMINFO` for socket `fd` (-1: none): its counters, the `SK_MEMINFO_VARS` the
/// kernel filled (`count`), or nil where it does not say.
private func socketMemoryInfo(of fd: Int32) -> (counters: [UInt32], count: Int)? {
    guard fd >= 0 else { return nil }
    var info = [UInt32](repeating: 0, count: 9)  // SK_MEMINFO_VARS
    var length = socklen_t(info.count * 4)
    let soMeminfo: Int32 = 55  // SO_MEMINFO, which Glibc's module does not export.
    guard getsockopt(fd, SOL_SOCKET, soMeminfo, &info, &length) == 0 else { return nil }
    return (info, Int(length) / 4)
}

/// The bytes a socket's receive queue holds and the most it may (`SK_MEMINFO_RMEM_ALLOC` and
/// `SK_MEMINFO_RCVBUF`), or nil where the kernel does not say.
func socketMemory(of fd: Int32) -> (queued: UInt32, limit: UInt32)? {
    guard let (counters, count) = socketMemoryInfo(of: fd), count >= 2 else { return nil }
    return (counters[0], counters[1])
}

/// The datagrams the kernel dropped for socket `fd` (-1: none) because its receive buffer was
/// full (`SK_MEMINFO_DROPS`, the last counter), or nil where the kernel does not say.
func socketKernelDrops(of fd: Int32) -> UInt64? {
    guard let (counters, count) = socketMemoryInfo(of: fd), count >= 9 else { return nil }
    return UInt64(counters[8])
}

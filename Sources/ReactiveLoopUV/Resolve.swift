import CLibUV
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

extension SocketAddress {
    /// Resolves `host` (a name, such as `carbon.example.com` or a Kubernetes service, or a
    /// numeric address) to its addresses on `port`, with the system's resolver (`getaddrinfo`,
    /// through `uv_getaddrinfo`: on libuv's thread pool, so the loop never waits for it).
    ///
    /// Each start resolves anew (names move: start it again to follow them). A run sends one
    /// value, the addresses in the resolver's order (IPv4 and IPv6, each once), on the loop
    /// thread, then completes; it fails with the resolver's error (`UV_EAI_NONAME` for a name
    /// that does not exist, say), naming the host. Disposing the run cancels the resolution if it
    /// has not started; a stopped loop interrupts it.
    ///
    /// - Precondition: `port` is in `0...65535`.
    public static func resolve(host: String, port: Int, on loop: EventLoop) -> SignalProducer<
        [SocketAddress], UVError
    > {
        _require(
            (0...65535).contains(port), "SocketAddress.resolve(host:port:on:): port must be in 0...65535, got \(port)")
        return SignalProducer { observer, lifetime in
            let begin = {
                guard !lifetime.hasEnded else { return }
                let request = _Resolution(loop: loop, host: host, port: port, observer: observer)
                lifetime.observeEnded { _ = loop.onLoopThread { request.cancelOnLoop() } }
                request.start()
            }
            if !loop.onLoopThread(begin) { observer.sendInterrupted() }
        }
    }
}

/// A libuv request in flight that the loop cancels when it shuts down.
protocol _LoopRequest: AnyObject {
    /// Cancels the request and ends its stream (interrupted) if it has not ended. Loop thread.
    func cancelOnLoop()
}

/// One `uv_getaddrinfo` request. Confined to the loop thread; held by the request until libuv
/// calls back (which it does even when cancelled).
final class _Resolution: _LoopRequest, @unchecked Sendable {
    private let loop: EventLoop
    private let host: String
    private let port: Int
    private let observer: Signal<[SocketAddress], UVError>.Observer
    private let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
    /// Whether the stream has ended (answered, failed or cancelled).
    private var ended = false
    /// Whether libuv holds the request.
    private var inFlight = false

    init(loop: EventLoop, host: String, port: Int, observer: Signal<[SocketAddress], UVError>.Observer) {
        self.loop = loop
        self.host = host
        self.port = port
        self.observer = observer
    }

    deinit { request.deallocate() }

    private var operation: String { "SocketAddress.resolve(host: \"\(host)\", port: \(port)) (uv_getaddrinfo)" }

    func start() {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)  // One entry per address, not one per socket type.
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_getaddrinfo(
            loop.uvLoop, request,
            { request, status, result in
                let resolution = Unmanaged<_Resolution>.fromOpaque(request!.pointee.data).takeRetainedValue()
                resolution.answered(status, result)
            }, host, String(port), &hints)
        guard status == 0 else {
            Unmanaged.passUnretained(self).release()
            ended = true
            return observer.send(error: UVError(code: status, operation: operation))
        }
        inFlight = true
        loop.register(self)
    }

    func cancelOnLoop() {
        guard !ended else { return }
        ended = true
        // EBUSY once the thread pool runs it: the answer then comes and is dropped.
        if inFlight { _ = request.withMemoryRebound(to: uv_req_t.self, capacity: 1) { uv_cancel($0) } }
        observer.sendInterrupted()
    }

    private func answered(_ status: Int32, _ result: UnsafeMutablePointer<addrinfo>?) {
        inFlight = false
        loop.unregister(self)
        defer { uv_freeaddrinfo(result) }
        guard !ended else { return }
        ended = true
        guard status == 0 else { return observer.send(error: UVError(code: status, operation: operation)) }
        var addresses: [SocketAddress] = []
        var entry = result
        while let current = entry {
            if let raw = current.pointee.ai_addr, let address = SocketAddress(raw), !addresses.contains(address) {
                addresses.append(address)
            }
            entry = current.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            return observer.send(error: UVError(code: Int32(UV_EAI_NODATA.rawValue), operation: operation))
        }
        observer.send(value: addresses)
        observer.sendCompleted()
    }
}

extension TCPConnection {
    /// Resolves `host` (see `SocketAddress.resolve(host:port:on:)`) and connects to the first of
    /// its addresses that accepts, in the resolver's order. Each start resolves anew, so a
    /// reconnecting client follows a name that moves. Fails with the resolver's error, or the
    /// last address's connect error if none accepts.
    ///
    /// - Precondition: `port` is in `1...65535`.
    public static func connect(toHost host: String, port: Int, on loop: EventLoop) -> SignalProducer<
        TCPConnection, UVError
    > {
        _require(
            (1...65535).contains(port), "TCPConnection.connect(toHost:port:on:): port must be in 1...65535, got \(port)"
        )
        return SocketAddress.resolve(host: host, port: port, on: loop).flatMap(.latest) { addresses in
            firstAccepting(addresses[...], on: loop)
        }
    }

    private static func firstAccepting(_ addresses: ArraySlice<SocketAddress>, on loop: EventLoop) -> SignalProducer<
        TCPConnection, UVError
    > {
        let rest = addresses.dropFirst()
        return connect(to: addresses.first!, on: loop).flatMapError { error in
            rest.isEmpty ? SignalProducer(error: error) : firstAccepting(rest, on: loop)
        }
    }
}

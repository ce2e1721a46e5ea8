import Logging
import ReactiveLoopCore
import ReactiveLoopUV
import Synchronization

/// Serves the last flush in Prometheus' text format at `GET /metrics`, one request per
/// connection (`Connection: close`), and the health routes Prometheus' own server has:
/// `/-/healthy` (200 while loopd runs) and `/-/ready` (200 once its sockets are open and its
/// flush timer runs, 503 before and once it is stopping). Every route answers `HEAD` too, with
/// the headers of `GET` and no body; other methods get 405 with `Allow: GET, HEAD`. `POST` (or
/// `PUT`) `/-/reload` does what SIGHUP does, and answers 200 with what it applied, or 500 with
/// why the config file was refused.
///
/// Bounds, whatever clients do: at most `maxConnections` at once (a client beyond it is
/// closed at once, and counted); a request must arrive within `requestTimeout` seconds, in at
/// most `maxHeaderLines` lines of at most 8 KiB; a response the client does not read within
/// `writeTimeout` seconds is abandoned. Every response shares one copy of the exposition, so a
/// client that never reads holds no copy of its own.
final class PrometheusEndpoint: @unchecked Sendable {  // The listener lives on the loop; body is a Mutex.
    /// The most connections served at once.
    static let maxConnections = 64
    /// Seconds a client has to send its request (and to stay idle while reading the response).
    static let requestTimeout = 10.0
    /// Seconds a client may read none of its response.
    static let writeTimeout = 10.0
    /// The most lines (request line and headers) a request may have.
    static let maxHeaderLines = 100

    /// The address served, with the port the system chose if 0 was asked.
    let address: SocketAddress
    private let listener: TCPListener
    private let scheduler: LoopScheduler
    private let logger: Logger
    private let body = Mutex<ReceivedBytes>(ReceivedBytes(Array("# no flush yet\n".utf8)))
    // Confined to the loop thread.
    private var open = 0
    /// Clients closed because `maxConnections` were being served (read from any thread).
    let refusedConnections = Atomic<UInt64>(0)
    /// Whether `/-/ready` answers 200: set once loopd's sockets are open and its flush timer
    /// runs, cleared when it starts stopping. Any thread.
    let ready = Atomic<Bool>(false)
    /// Called on the loop thread for `POST` (or `PUT`) `/-/reload`: whether the reload was
    /// applied, and the message to answer with. Set before `start()`.
    var onReload: (() -> (applied: Bool, message: String))?

    /// Listens on `address`; serving starts with `start()`.
    init(at address: SocketAddress, on loop: EventLoop, scheduler: LoopScheduler, logger: Logger) throws(UVError) {
        listener = try TCPListener(boundTo: address, on: loop)
        self.scheduler = scheduler
        self.address = listener.localAddress
        self.logger = logger
    }

    /// Replaces what is served, from any thread.
    func update(_ exposition: [UInt8]) {
        let shared = ReceivedBytes(exposition)
        body.withLock { $0 = shared }
    }

    /// Serves requests until `close()`. Loop thread.
    func start() {
        listener.connections.start { [self] event in
            switch event {
            case let .value(connection):
                guard open < Self.maxConnections else {
                    refusedConnections.add(1, ordering: .relaxed)
                    connection.close()
                    return
                }
                open += 1
                serve(connection)
            case let .failed(error): logger.error("Prometheus endpoint: accept failed: \(error)")
            default: break
            }
        }
    }

    /// Stops accepting requests.
    func close() { listener.close() }

    private func serve(_ connection: TCPConnection) {
        connection.setLimits(.init(writeTimeout: Self.writeTimeout, idleTimeout: Self.requestTimeout))
        // The request must be whole within `requestTimeout`, however slowly its bytes come.
        let deadline = scheduler.schedule(after: scheduler.currentDate.addingTimeInterval(Self.requestTimeout)) {
            connection.close()
        }
        var requestLine: ReceivedBytes?
        var lines = 0
        var counted = true
        // Set once the request is read: the response's own completion closes the connection.
        var answering = false
        // Closes the connection and frees its place, once.
        let finish = { [self] in
            connection.close()
            guard counted else { return }
            counted = false
            open -= 1
        }
        let run = SerialDisposable()
        run.inner = connection.lineBytes(maxLength: 8192).start { [self] event in
            guard case let .value(line) = event else {
                // The connection ended (closed, reset, timed out, or a line too long), or the
                // read was stopped to answer: that `interrupted` comes after the answer's writes
                // were queued, and closing then would cut a body larger than the socket's
                // buffer.
                if !answering { finish() }
                return
            }
            // The request ends at an empty line after the request line (which is not counted).
            if line.isEmpty && requestLine != nil {
                deadline?.dispose()
                answering = true
                run.dispose()
                return respond(to: String(decoding: requestLine!, as: UTF8.self), on: connection, then: finish)
            }
            lines += 1
            guard lines <= Self.maxHeaderLines else {
                run.dispose()
                return finish()
            }
            if requestLine == nil && !line.isEmpty { requestLine = ReceivedBytes(line) }
        }
    }

    private func respond(to request: String, on connection: TCPConnection, then finish: @escaping () -> Void) {
        let parts = request.split(separator: " ")
        let method = parts.first.map(String.init) ?? ""
        let target = parts.count > 1 ? Self.path(of: parts[1]) : nil
        let response = Self.response(
            method: method, target: target, exposition: { body.withLock { $0 } }, ready: ready.load(ordering: .relaxed),
            reload: onReload)
        if method == "HEAD" {
            connection.write(response.head) { _ in finish() }
        } else {
            connection.write(response.head)
            connection.write(response.body) { _ in finish() }
        }
    }

    /// The path a request target names: without its query, and in absolute form
    /// (`http://host:9102/metrics`, which HTTP/1.1 servers must take) without scheme and host.
    static func path(of target: Substring) -> String {
        var target = target
        if let scheme = target.firstRange(of: "://"), target[..<scheme.lowerBound].allSatisfy(\.isLetter) {
            target = target[scheme.upperBound...]
            target = target.firstIndex(of: "/").map { target[$0...] } ?? "/"
        }
        return String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The status line and headers, and the body, of the answer to `method` on `target`.
    static func response(
        method: String, target: String?, exposition: () -> ReceivedBytes, ready: Bool,
        reload: (() -> (applied: Bool, message: String))? = nil
    ) -> (head: [UInt8], body: ReceivedBytes) {
        let text = { (message: String) in ReceivedBytes(Array(message.utf8)) }
        var contentType = "text/plain; charset=utf-8"
        var extraHeaders = ""
        let status: String
        let body: ReceivedBytes
        if target == "/-/reload" {
            // As Prometheus' own: POST or PUT, never GET, so that a crawler or a prefetch
            // cannot trigger it.
            if method == "POST" || method == "PUT" {
                let outcome = reload?() ?? (applied: false, message: "this loopd cannot reload\n")
                (status, body) = (outcome.applied ? "200 OK" : "500 Internal Server Error", text(outcome.message))
            } else {
                (status, body) = ("405 Method Not Allowed", text("/-/reload takes POST or PUT\n"))
                extraHeaders = "Allow: POST, PUT\r\n"
            }
        } else if method != "GET" && method != "HEAD" {
            (status, body) = ("405 Method Not Allowed", text("only GET and HEAD are served\n"))
            extraHeaders = "Allow: GET, HEAD\r\n"
        } else {
            switch target {
            case "/metrics":
                (status, body) = ("200 OK", exposition())
                contentType = "text/plain; version=0.0.4; charset=utf-8"
            case "/-/healthy":
                (status, body) = ("200 OK", text("loopd is healthy.\n"))
            case "/-/ready":
                (status, body) =
                    ready
                    ? ("200 OK", text("loopd is ready.\n"))
                    : ("503 Service Unavailable", text("loopd is not ready.\n"))
            default:
                (status, body) = (
                    "404 Not Found", text("loopd serves /metrics, /-/healthy, /-/ready and POST /-/reload\n")
                )
            }
        }
        let head = Array(
            "HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n\(extraHeaders)Connection: close\r\n\r\n"
                .utf8)
        return (head, body)
    }
}

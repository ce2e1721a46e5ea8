import Logging
import ReactiveLoop
import ReactiveLoopUV
import Synchronization

/// Serves the last flush in Prometheus' text format at `GET /metrics`, one request per
/// connection (`Connection: close`).
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
                // The connection ended (closed, reset, timed out, or a line too long).
                return finish()
            }
            lines += 1
            guard lines <= Self.maxHeaderLines else {
                run.dispose()
                return finish()
            }
            guard requestLine != nil else {
                requestLine = Array(line).isEmpty ? nil : ReceivedBytes(line)
                return
            }
            guard line.isEmpty else { return }  // A header; the request ends at an empty line.
            deadline?.dispose()
            run.dispose()
            respond(to: String(decoding: requestLine!, as: UTF8.self), on: connection, then: finish)
        }
    }

    private func respond(to request: String, on connection: TCPConnection, then finish: @escaping () -> Void) {
        let parts = request.split(separator: " ")
        let target = parts.count > 1 ? parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) : nil
        let status: String
        let content: ReceivedBytes
        if parts.first != "GET" {
            (status, content) = ("405 Method Not Allowed", ReceivedBytes(Array("only GET is served\n".utf8)))
        } else if target != "/metrics" {
            (status, content) = ("404 Not Found", ReceivedBytes(Array("loopd serves /metrics\n".utf8)))
        } else {
            (status, content) = ("200 OK", body.withLock { $0 })
        }
        let head = Array(
            "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: \(content.count)\r\nConnection: close\r\n\r\n"
                .utf8)
        connection.write(head)
        connection.write(content) { _ in finish() }
    }
}

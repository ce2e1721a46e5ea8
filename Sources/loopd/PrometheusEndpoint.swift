import Logging
import ReactiveLoop
import ReactiveLoopUV
import Synchronization

/// Serves the last flush in Prometheus' text format at `GET /metrics`, one request per
/// connection (`Connection: close`).
final class PrometheusEndpoint: @unchecked Sendable {  // The listener lives on the loop; body is a Mutex.
    /// The address served, with the port the system chose if 0 was asked.
    let address: SocketAddress
    private let listener: TCPListener
    private let logger: Logger
    private let body = Mutex<[UInt8]>(Array("# no flush yet\n".utf8))

    /// Listens on `address`; serving starts with `start()`.
    init(at address: SocketAddress, on loop: EventLoop, logger: Logger) throws(UVError) {
        listener = try TCPListener(boundTo: address, on: loop)
        self.address = listener.localAddress
        self.logger = logger
    }

    /// Replaces what is served, from any thread.
    func update(_ exposition: [UInt8]) { body.withLock { $0 = exposition } }

    /// Serves requests until `close()`. Loop thread.
    func start() {
        listener.connections.start { [self] event in
            switch event {
            case let .value(connection): serve(connection)
            case let .failed(error): logger.error("Prometheus endpoint: accept failed: \(error)")
            default: break
            }
        }
    }

    /// Stops accepting requests.
    func close() { listener.close() }

    private func serve(_ connection: TCPConnection) {
        var requestLine: ReceivedBytes?
        let run = SerialDisposable()
        run.inner = connection.lineBytes(maxLength: 8192).start { [self] event in
            guard case let .value(line) = event else {
                if case .failed = event { connection.close() }
                return
            }
            guard requestLine != nil else {
                requestLine = line
                return
            }
            guard line.isEmpty else { return }  // A header; the request ends at an empty line.
            run.dispose()
            respond(to: String(decoding: requestLine!, as: UTF8.self), on: connection)
        }
    }

    private func respond(to request: String, on connection: TCPConnection) {
        let parts = request.split(separator: " ")
        let target = parts.count > 1 ? parts[1].split(separator: "?", maxSplits: 1).first.map(String.init) : nil
        let status: String
        var content: [UInt8]
        if parts.first != "GET" {
            (status, content) = ("405 Method Not Allowed", Array("only GET is served\n".utf8))
        } else if target != "/metrics" {
            (status, content) = ("404 Not Found", Array("loopd serves /metrics\n".utf8))
        } else {
            (status, content) = ("200 OK", body.withLock { $0 })
        }
        var response = Array(
            "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: \(content.count)\r\nConnection: close\r\n\r\n"
                .utf8)
        response += content
        content = []
        connection.write(response) { _ in connection.close() }
    }
}

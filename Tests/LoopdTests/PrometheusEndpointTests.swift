import Foundation
import Logging
import ReactiveLoop
import ReactiveLoopUV
import Testing

@testable import loopd

/// What the Prometheus endpoint answers, route by route, and the addresses it accepts.
@Suite("Prometheus endpoint")
struct PrometheusEndpointTests {
    /// The answer as text: the head, and the body.
    static func answer(_ method: String, _ target: String?, ready: Bool = true) -> (head: String, body: String) {
        let exposition = ReceivedBytes(Array("# TYPE up gauge\nup 1\n".utf8))
        let response = PrometheusEndpoint.response(
            method: method, target: target, exposition: { exposition }, ready: ready)
        return (String(decoding: response.head, as: UTF8.self), String(decoding: response.body, as: UTF8.self))
    }

    @Test func reloadTakesPostOrPutAndAnswersWithWhatHappened() {
        let exposition = ReceivedBytes(Array("up 1\n".utf8))
        var calls = 0
        func answer(_ method: String, applied: Bool) -> (head: String, body: String) {
            let response = PrometheusEndpoint.response(
                method: method, target: "/-/reload", exposition: { exposition }, ready: true,
                reload: {
                    calls += 1
                    return (applied, applied ? "applied 2 mapping rules\n" : "line 3: port: expected a whole number\n")
                })
            return (String(decoding: response.head, as: UTF8.self), String(decoding: response.body, as: UTF8.self))
        }
        let post = answer("POST", applied: true)
        #expect(post.head.hasPrefix("HTTP/1.1 200 OK\r\n") && post.body == "applied 2 mapping rules\n")
        let refused = answer("PUT", applied: false)
        #expect(refused.head.hasPrefix("HTTP/1.1 500 Internal Server Error\r\n"))
        #expect(refused.body == "line 3: port: expected a whole number\n")
        #expect(calls == 2)
        for method in ["GET", "HEAD", "DELETE"] {
            let other = answer(method, applied: true)
            #expect(other.head.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
            #expect(other.head.contains("Allow: POST, PUT\r\n"))
        }
        #expect(calls == 2, "only POST and PUT reload: a GET from a crawler does not")
        let unset = PrometheusEndpoint.response(
            method: "POST", target: "/-/reload", exposition: { exposition }, ready: true)
        #expect(String(decoding: unset.head, as: UTF8.self).hasPrefix("HTTP/1.1 500"))
    }

    @Test func metricsAnswersGetAndHeadWithTheSameHead() {
        let get = Self.answer("GET", "/metrics")
        #expect(get.head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(get.head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(get.head.contains("Content-Length: \(get.body.utf8.count)\r\n"))
        #expect(get.body == "# TYPE up gauge\nup 1\n")
        #expect(Self.answer("HEAD", "/metrics").head == get.head)
    }

    @Test func healthyAnswers200AndReadyFollowsTheDaemon() {
        #expect(Self.answer("GET", "/-/healthy").head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(Self.answer("HEAD", "/-/healthy").head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(Self.answer("GET", "/-/ready", ready: true).head.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let notReady = Self.answer("GET", "/-/ready", ready: false)
        #expect(notReady.head.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(notReady.body == "loopd is not ready.\n")
    }

    @Test func otherMethodsGet405WithAllowAndOtherPaths404() {
        let post = Self.answer("POST", "/metrics")
        #expect(post.head.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        #expect(post.head.contains("Allow: GET, HEAD\r\n"))
        let missing = Self.answer("GET", "/")
        #expect(missing.head.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(missing.body == "loopd serves /metrics, /-/healthy, /-/ready and POST /-/reload\n")
        #expect(Self.answer("GET", nil).head.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
    }

    @Test func targetsInOriginAndAbsoluteFormNameTheirPath() {
        #expect(PrometheusEndpoint.path(of: "/metrics") == "/metrics")
        #expect(PrometheusEndpoint.path(of: "/metrics?x=1") == "/metrics")
        #expect(PrometheusEndpoint.path(of: "http://127.0.0.1:9102/metrics") == "/metrics")
        #expect(PrometheusEndpoint.path(of: "http://loopd:9102/-/ready?a") == "/-/ready")
        #expect(PrometheusEndpoint.path(of: "http://loopd") == "/")
        #expect(PrometheusEndpoint.path(of: "*") == "*")
    }

    /// Runs `body` with the port of an endpoint serving `exposition` on a loop of its own.
    func withEndpoint(serving exposition: [UInt8], _ body: (Int) throws -> Void) throws {
        let loop = try EventLoop.startOnNewThread()
        defer {
            loop.stop()
            loop.waitUntilStopped()
        }
        let endpoint = try PrometheusEndpoint(
            at: SocketAddress(host: "127.0.0.1", port: 0), on: loop, scheduler: LoopScheduler(loop: loop),
            logger: Logger(label: "test"))
        endpoint.update(exposition)
        _ = loop.execute { endpoint.start() }
        try body(endpoint.address.port)
        endpoint.close()
    }

    @Test func aRequestMayHaveAHundredLinesBeforeItsEmptyLine() throws {
        try withEndpoint(serving: Array("up 1\n".utf8)) { port in
            for (headers, answered) in [(99, true), (100, false)] {
                let client = try TCPClient(port: port)
                client.send(
                    "GET /metrics HTTP/1.1\r\n" + String(repeating: "X-Header: x\r\n", count: headers) + "\r\n")
                let answer = String(decoding: client.readToEnd().bytes, as: UTF8.self)
                #expect(answer.hasPrefix("HTTP/1.1 200 OK") == answered, "\(headers + 1) lines: \(answer.prefix(40))")
            }
        }
    }

    @Test func aBodyLargerThanTheSocketsBufferArrivesWhole() throws {
        // 16 MiB: four times the most a socket's send buffer holds here (tcp_wmem's maximum).
        var body = [UInt8](repeating: UInt8(ascii: "x"), count: 16 << 20)
        body[body.count - 1] = UInt8(ascii: "\n")
        try withEndpoint(serving: body) { port in try receiveWhole(body, from: port) }
    }

    /// Two clients in turn: each receives `body` whole.
    func receiveWhole(_ body: [UInt8], from port: Int) throws {
        for client in 0..<2 {
            let connection = try TCPClient(port: port)
            connection.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            let (received, closed) = connection.readToEnd(seconds: 30)
            let head = try #require(received.firstRange(of: Array("\r\n\r\n".utf8)), "client \(client)")
            #expect(closed)
            #expect(received.count - head.upperBound == body.count, "client \(client): the whole body")
            #expect(
                String(decoding: received[..<head.lowerBound], as: UTF8.self).contains("Content-Length: \(body.count)"))
        }
    }

    @Test func aListenerAddressWithoutHostListensOnEveryIPv4Interface() throws {
        let address = try Daemon.address(":9102", flag: "--prometheus", example: "127.0.0.1:9102", listening: true)
        #expect(address.description == "0.0.0.0:9102")
        // An address to connect to needs its host.
        #expect(throws: Daemon.StartupError.self) {
            try Daemon.address(":2003", flag: "--graphite", example: "127.0.0.1:2003", listening: false)
        }
    }
}

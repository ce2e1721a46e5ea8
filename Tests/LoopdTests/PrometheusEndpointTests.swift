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
        #expect(missing.body == "loopd serves /metrics, /-/healthy and /-/ready\n")
        #expect(Self.answer("GET", nil).head.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
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

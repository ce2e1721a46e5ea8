// As code ported from ReactiveSwift imports it: ReactiveLoop, the core with the extensions of
// Foundation's types.
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("Foundation extensions")
struct FoundationExtensionsTests {
    @Test func theReactiveLoopModuleNamesTheCoresTypesAsReactiveSwiftsDid() {
        // Module-qualified names, as code that imports another library with the same names
        // writes them (`ReactiveSwift.Signal` becomes `ReactiveLoop.Signal`).
        let (signal, input) = ReactiveLoop.Signal<Int, Never>.pipe()
        let counter = ReactiveLoop.Atomic(0)
        signal.observeValues { value in counter.modify { $0 += value } }
        input.send(value: 2)
        let property: ReactiveLoop.MutableProperty<Int> = .init(counter.value)
        #expect(property.value == 2)
    }

    @Test func notificationsArriveUntilTheSignalEnds() {
        let center = NotificationCenter()
        let name = Notification.Name("ReactiveLoopTests.ping")
        let sender = NSObject()
        var received: [String] = []
        let observation = center.reactive.notifications(forName: name, object: sender).observeValues {
            received.append($0.name.rawValue)
        }
        center.post(name: name, object: sender)
        center.post(name: name, object: NSObject())  // Another object: not observed.
        #expect(received == [name.rawValue])
        observation?.dispose()
        center.post(name: name, object: sender)
        #expect(received == [name.rawValue])
    }

    /// Against a real HTTP server on loopback (Python's `http.server`, serving a temporary
    /// folder), stopped at the end of the test.
    @Test(.timeLimit(.minutes(1)))
    func dataLoadsARequestAndFailsOnError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reactiveloop-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("payload".utf8).write(to: folder.appendingPathComponent("file.txt"))

        let server = try ChildProcess(
            executable: "/usr/bin/env",
            arguments: ["python3", "-u", "-m", "http.server", "--bind", "127.0.0.1", "--directory", folder.path, "0"],
            standardOutput: .captured)
        // Killed with SIGKILL when `server` is released, at the end of the test.
        defer { withExtendedLifetime(server) {} }
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let banner = try #require(server.waitForOutput(containing: ") ..."), "the server did not start")
        let port = try #require(
            banner.split(separator: " ").firstIndex(of: "port").map {
                banner.split(separator: " ")[$0 + 1]
            })
        let base = try #require(URL(string: "http://127.0.0.1:\(port)/"))

        let loaded = URLSession.shared.reactive.data(with: URLRequest(url: base.appendingPathComponent("file.txt")))
            .first()
        let (data, response) = try #require(try loaded?.get())
        #expect(String(decoding: data, as: UTF8.self) == "payload")
        #expect((response as? HTTPURLResponse)?.statusCode == 200)

        // A transport error (nothing listens on port 1) fails the run.
        let refused = URLSession.shared.reactive.data(with: URLRequest(url: URL(string: "http://127.0.0.1:1/")!))
            .first()
        #expect(throws: (any Error).self) { try refused?.get() }
    }
}

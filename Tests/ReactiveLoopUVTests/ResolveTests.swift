import CLibUV
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
@testable import ReactiveLoopUV
import Testing

/// Holds libuv's thread pool busy (see `aLoopThatStopsInterruptsAResolutionInFlight`).
let threadPoolGate = DispatchSemaphore(value: 0)
/// More work items than the thread pool has threads.
let threadPoolBlockers = 64

/// Serialized: one test holds libuv's thread pool, which every resolution needs.
@Suite("Name resolution", .serialized)
struct ResolveTests {
    func events<Value>(_ producer: SignalProducer<Value, UVError>) -> [Signal<Value, UVError>.Event] {
        runEvents(producer, seconds: 30)
    }

    static func name(_ event: Signal<[SocketAddress], UVError>.Event) -> String {
        if case .interrupted = event { return "interrupted" }
        return "\(event)"
    }

    @Test func aNameResolvesOnTheLoopWithoutBlockingIt() throws {
        try withLoop { loop in
            let result = events(SocketAddress.resolve(host: "localhost", port: 2003, on: loop))
            guard case let .value(addresses) = result.first else {
                Issue.record("no addresses: \(result)")
                return
            }
            let loopback = try SocketAddress(host: "127.0.0.1", port: 2003)
            #expect(addresses.contains(loopback))
            #expect(Set(addresses).count == addresses.count, "each address once")
            #expect(result.count == 2 && result.last?.isCompleted == true)
            // A numeric address needs no resolver, and resolves to itself.
            let numeric = events(SocketAddress.resolve(host: "::1", port: 9, on: loop))
            let v6 = try SocketAddress(host: "::1", port: 9)
            #expect(numeric.first?.value == [v6])
        }
    }

    @Test func aNameThatDoesNotExistFailsNamingIt() throws {
        try withLoop { loop in
            let result = events(SocketAddress.resolve(host: "no-such-host.invalid", port: 2003, on: loop))
            guard case let .failed(error) = result.first else {
                Issue.record("expected a failure, got \(result)")
                return
            }
            #expect(error.name.hasPrefix("EAI_"), "the resolver's error: \(error)")
            #expect("\(error)".contains("no-such-host.invalid"))
        }
    }

    @Test func disposingTheRunCancelsItAndNothingComesAfter() throws {
        try withLoop { loop in
            let seen = Box<[String]>([])
            let started = DispatchSemaphore(value: 0)
            _ = loop.execute {
                // Started and disposed in one loop task: the answer, which comes on the loop
                // thread, can only come after.
                let run = SocketAddress.resolve(host: "localhost", port: 1, on: loop).start { event in
                    seen.modify { $0.append(Self.name(event)) }
                }
                run.dispose()
                started.signal()
            }
            started.wait()
            Thread.sleep(forTimeInterval: 0.2)
            #expect(seen.value.count <= 1 && seen.value.allSatisfy { $0 == "interrupted" }, "\(seen.value)")
        }
    }

    @Test func aLoopThatStopsInterruptsAResolutionInFlight() throws {
        let loop = try EventLoop.startOnNewThread()
        let seen = Box<[String]>([])
        let started = DispatchSemaphore(value: 0)
        _ = loop.execute {
            // libuv's thread pool (4 threads unless UV_THREADPOOL_SIZE says otherwise) is kept
            // busy, so the resolution waits in its queue until the loop has stopped.
            for _ in 0..<threadPoolBlockers {
                let work = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
                uv_queue_work(loop.uvLoop, work, { _ in threadPoolGate.wait() }, { work, _ in work!.deallocate() })
            }
            SocketAddress.resolve(host: "localhost", port: 1, on: loop).start { event in
                seen.modify { $0.append(Self.name(event)) }
            }
            loop.stop()
            started.signal()
        }
        started.wait()
        Thread.sleep(forTimeInterval: 0.2)
        for _ in 0..<threadPoolBlockers { threadPoolGate.signal() }
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0)
        #expect(seen.value == ["interrupted"])
    }

    @Test func connectingToAHostNameTriesItsAddressesInTurn() throws {
        try withLoop { loop in
            let listener = try TCPListener(boundTo: SocketAddress(host: "127.0.0.1", port: 0), on: loop)
            let accepted = Box(0)
            listener.connections.start { event in if event.value != nil { accepted.modify { $0 += 1 } } }
            let result = events(TCPConnection.connect(toHost: "localhost", port: listener.localAddress.port, on: loop))
            guard case let .value(connection) = result.first else {
                Issue.record("no connection: \(result)")
                return
            }
            #expect(connection.remoteAddress == listener.localAddress)
            #expect(eventually { accepted.value == 1 })
            connection.close()
            listener.close()
            // No name: the resolver's error.
            let failed = events(TCPConnection.connect(toHost: "no-such-host.invalid", port: 1, on: loop))
            #expect(failed.first?.error?.name.hasPrefix("EAI_") == true, "\(failed)")
        }
    }
}

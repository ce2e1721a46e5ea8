// A child process for the runtime tests: what needs a process whose main thread runs an
// EventLoop. `UVTestHost <mode>` prints "<mode> ok" and exits 0, or names the failure and exits 1.
import Dispatch
import Foundation
import ReactiveLoop
import ReactiveLoopUV

/// State touched only on the main thread; handed to other threads' closures to append there.
final class MainThreadLog: @unchecked Sendable {
    var entries: [String] = []
    func append(_ entry: String) {
        guard Thread.isMainThread else { fail("\(entry) ran off the main thread") }
        entries.append(entry)
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("UVTestHost: \(message)\n".utf8))
    exit(1)
}

/// The main thread runs an EventLoop; MainScheduler and DispatchQueue.main must run their work
/// there, in order.
func mainQueue() throws {
    let loop = try EventLoop()
    let main = MainScheduler()
    let log = MainThreadLog()
    DispatchQueue.main.async { log.append("queued before run") }

    // 4 threads schedule 1,000 actions each.
    let threads = 4
    let perThread = 1000
    let group = DispatchGroup()
    for thread in 0..<threads {
        DispatchQueue.global().async(group: group) {
            for index in 0..<perThread { main.schedule { log.append("t\(thread) \(index)") } }
        }
    }

    // On the loop thread (the main thread), while an action of another thread is queued, an
    // action scheduled here must not overtake it.
    let queuedElsewhere = DispatchSemaphore(value: 0)
    // The check waits for this callback too: under load the threads can finish before it runs.
    group.enter()
    loop.execute {
        defer { group.leave() }
        DispatchQueue.global().async {
            main.schedule { log.append("X") }
            queuedElsewhere.signal()
        }
        queuedElsewhere.wait()
        main.schedule { log.append("Y") }
    }

    group.notify(queue: .main) {
        main.schedule {
            check(log, threads: threads, perThread: perThread)
            loop.stop()
        }
    }
    loop.run()
    guard loop.closeStatus == 0 else { fail("uv_loop_close returned \(loop.closeStatus)") }
}

func check(_ log: MainThreadLog, threads: Int, perThread: Int) {
    let entries = log.entries
    guard entries.first == "queued before run" else { fail("first entry: \(entries.first ?? "none")") }
    guard entries.count == 1 + threads * perThread + 2 else { fail("\(entries.count) entries") }
    guard let x = entries.firstIndex(of: "X"), let y = entries.firstIndex(of: "Y"), x < y else {
        fail("Y overtook X")
    }
    for thread in 0..<threads {
        let mine = entries.filter { $0.hasPrefix("t\(thread) ") }
        guard mine == (0..<perThread).map({ "t\(thread) \($0)" }) else { fail("thread \(thread) out of order") }
    }
}

/// The daemon example of docs/EventLoop.md, as written there but for the port (the first
/// argument after the mode; 0 picks a free one, printed as "listening <port>").
func daemonExample() throws {
    let port = Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 0

    let loop = try EventLoop()
    // UDP: count the lines of every datagram.
    let udp = try UDPSocket(boundTo: SocketAddress(host: "127.0.0.1", port: port), on: loop, receiveBufferSize: 8 << 20)
    let address = udp.localAddress
    let lines = LineCount()
    udp.datagrams.startWithResult { result in
        if case let .success(datagram) = result {
            lines.count += datagram.bytes.split(separator: UInt8(ascii: "\n")).count
        }
    }
    // TCP on the same port: a line per record, 1,024 bytes at most; a longer one drops its client.
    let tcp = try TCPListener(boundTo: address, on: loop)
    tcp.connections.startWithResult { result in
        guard case let .success(connection) = result else { return }
        connection.lines(maxLength: 1024).startWithResult { line in
            switch line {
            case .success: lines.count += 1
            case .failure: connection.close()
            }
        }
    }
    // SIGTERM or SIGINT: stop; run() returns once every handle is closed.
    loop.signals(SIGTERM, SIGINT).take(first: 1).startWithValues { _ in loop.stop() }
    print("listening \(address.port)")
    fflush(nil)  // The test reads the port before the example exits.
    loop.run()
    print("\(lines.count) lines")
}

/// A count touched only on the loop thread.
final class LineCount: @unchecked Sendable {
    var count = 0
}

let mode = CommandLine.arguments.dropFirst().first ?? ""
do {
    switch mode {
    case "main-queue": try mainQueue()
    case "daemon-example": try daemonExample()
    default: fail("usage: UVTestHost main-queue | daemon-example [port]")
    }
} catch {
    fail("\(error)")
}
print("\(mode) ok")

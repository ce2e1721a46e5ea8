import CLibUV
import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
@testable import ReactiveLoopUV
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Unix stream sockets on the loop")
struct UnixStreamTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("rl-uss-\(UUID().uuidString.prefix(8))").path
    }

    /// The first connection `listener` accepts, while `connect` runs (on this thread).
    func accepted(on listener: UnixStreamListener, after connect: () -> Void) -> UnixStreamConnection? {
        let connection = Box<UnixStreamConnection?>(nil)
        let run = listener.connections.start { event in
            if connection.value == nil, case let .value(accepted) = event { connection.value = accepted }
        }
        defer { run.dispose() }
        connect()
        _ = eventually { connection.value != nil }
        return connection.value
    }

    @Test func linesGoBothWaysAndTheFileHasItsModeUntilClosed() throws {
        try withLoop { loop in
            let path = temporaryPath()
            let listener = try UnixStreamListener(boundTo: path, on: loop, mode: 0o600)
            var status = stat()
            #expect(lstat(path, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK && status.st_mode & 0o777 == 0o600)
            // The server echoes each line, upper-cased.
            let serverEnding = Box<String?>(nil)
            let listening = Box<String?>(nil)
            listener.connections.start { event in
                switch event {
                case let .value(connection):
                    #expect(connection.path == path)
                    connection.lines(maxLength: 100).start { event in
                        switch event {
                        case let .value(line): connection.write(Array((line.uppercased() + "\n").utf8))
                        default: serverEnding.value = "\(event)"
                        }
                    }
                default: listening.value = "\(event)"
                }
            }
            let events = runEvents(
                UnixStreamConnection.connect(toPath: path, on: loop).flatMap(.latest) { client in
                    client.write(Array("one\ntwo\n".utf8))
                    return client.lines(maxLength: 100).take(first: 2)
                })
            #expect(events.compactMap(\.value) == ["ONE", "TWO"])
            #expect(events.last?.isCompleted == true)
            // The client's run ended by disposal, which left its connection open; a raw client
            // that half-closes is answered, then closed.
            let fd = connectUnixStream(to: path)
            #expect(fd >= 0)
            #expect(write(fd, "three\n", 6) == 6)
            shutdown(fd, Int32(SHUT_WR))
            var buffer = [UInt8](repeating: 0, count: 64)
            var answer = ""
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count <= 0 { break }
                answer += String(decoding: buffer[..<count], as: UTF8.self)
            }
            close(fd)
            #expect(answer == "THREE\n", "the answer goes out before the close")
            #expect(eventually { serverEnding.value?.lowercased() == "completed" })
            listener.close()
            #expect(eventually { listening.value?.lowercased() == "completed" })
            #expect(eventually { access(path, F_OK) != 0 }, "closing removes the file")
        }
    }

    @Test func aStaleFileIsReplacedButASocketInUseOrAnotherFileIsNot() throws {
        try withLoop { loop in
            let path = temporaryPath()
            defer { unlink(path) }
            // A stream socket that listened, then its process went: refused, so stale.
            leaveStaleUnixSocket(at: path, type: SOCK_STREAM)
            let first = try UnixStreamListener(boundTo: path, on: loop)
            func refusal(_ body: () throws -> Void) -> String? {
                do {
                    try body()
                    return nil
                } catch {
                    let error = error as! UVError
                    #expect("\(error)".contains(path) || error.name == "ENAMETOOLONG")
                    return error.name
                }
            }
            #expect(refusal { _ = try UnixStreamListener(boundTo: path, on: loop) } == "EADDRINUSE")
            // A listener in use is in use for a datagram socket too, and the other way round.
            #expect(refusal { _ = try UnixDatagramSocket(boundTo: path, on: loop) } == "EADDRINUSE")
            #expect(connectUnixStream(to: path) >= 0, "the first listener still has its file")
            first.close()
            #expect(eventually { access(path, F_OK) != 0 })
            let datagrams = try UnixDatagramSocket(boundTo: path, on: loop)
            #expect(refusal { _ = try UnixStreamListener(boundTo: path, on: loop) } == "EADDRINUSE")
            datagrams.close()
            #expect(eventually { access(path, F_OK) != 0 })
            // A datagram socket's stale file is stale for a stream listener as well.
            leaveStaleUnixSocket(at: path)
            try UnixStreamListener(boundTo: path, on: loop).close()
            #expect(eventually { access(path, F_OK) != 0 })
            _ = FileManager.default.createFile(atPath: path, contents: Data("keep".utf8))
            #expect(refusal { _ = try UnixStreamListener(boundTo: path, on: loop) } == "EEXIST")
            #expect(FileManager.default.contents(atPath: path) == Data("keep".utf8))
            let long = "/tmp/" + String(repeating: "p", count: 200)
            #expect(refusal { _ = try UnixStreamListener(boundTo: long, on: loop) } == "ENAMETOOLONG")
            #expect(refusal { _ = try UnixStreamListener(boundTo: "", on: loop) } == "ENAMETOOLONG")
            let missing = runEvents(UnixStreamConnection.connect(toPath: path + ".none", on: loop))
            #expect(missing.count == 1 && "\(missing[0])".contains("ENOENT"))
            let tooLong = runEvents(UnixStreamConnection.connect(toPath: long, on: loop))
            #expect(tooLong.count == 1 && "\(tooLong[0])".contains("ENAMETOOLONG"))
        }
    }

    @Test func aPeerThatNeverReadsMeetsTheLimitsAndAResetEndsTheRun() throws {
        try withLoop { loop in
            let path = temporaryPath()
            let listener = try UnixStreamListener(boundTo: path, on: loop)
            defer { listener.close() }
            // A client that never reads: the writes queue up to the mark, then are refused.
            let fd = connectUnixStream(to: path)
            defer { close(fd) }
            let server = try #require(accepted(on: listener) {})
            server.setLimits(.init(writeHighWaterMark: 1 << 20, writeTimeout: 0.3))
            let refused = Box(0)
            let ending = Box<String?>(nil)
            server.bytes.start { event in if event.isTerminating { ending.value = "\(event)" } }
            let chunk = [UInt8](repeating: 7, count: 64 * 1024)
            for _ in 0..<64 {
                server.write(chunk) { error in if error?.name == "ENOBUFS" { refused.modify { $0 += 1 } } }
            }
            #expect(eventually { refused.value > 0 })
            #expect(server.queuedWriteBytes <= (1 << 20) + chunk.count)
            // The peer takes nothing for writeTimeout: closed, the run fails with ETIMEDOUT.
            #expect(eventually { ending.value?.contains("ETIMEDOUT") == true })
            #expect(eventually { server.queuedWriteBytes == 0 })
            // A peer that resets: the run ends, the loop goes on.
            let resetting = connectUnixStream(to: path)
            let second = try #require(accepted(on: listener) {})
            let secondEnding = Box<String?>(nil)
            second.bytes.start { event in if event.isTerminating { secondEnding.value = "\(event)" } }
            _ = write(resetting, "x", 1)
            close(resetting)
            #expect(eventually { secondEnding.value != nil })
            #expect(!loop.isStopped)
            let third = connectUnixStream(to: path)
            defer { close(third) }
            #expect(accepted(on: listener) {} != nil, "the listener goes on")
        }
    }

    @Test func peersThatKeepTheSocketFullTakeTurnsWithTheRestOfTheLoop() throws {
        try withLoop { loop in
            let path = temporaryPath()
            let listener = try UnixStreamListener(boundTo: path, on: loop)
            defer { listener.close() }
            // Each read costs 1 ms, as a parser's would. A turn of the loop is known by its time
            // (libuv's `uv_now`, fixed for the callbacks of one poll): each read takes a
            // millisecond, so two turns with reads never share it. Within a turn, each connection
            // reads at most its budget.
            let reads = Box<[Int: (turn: UInt64, count: Int)]>([:])
            let mostInATurn = Box(0)
            let chunks = Box(0)
            var index = 0
            listener.connections.start { event in
                guard case let .value(connection) = event else { return }
                let id = index
                index += 1
                connection.bytes.start { event in
                    guard event.value != nil else { return }
                    let turn = uv_now(loop.uvLoop)
                    let start = DispatchTime.now().uptimeNanoseconds
                    while DispatchTime.now().uptimeNanoseconds - start < 1_000_000 {}
                    chunks.modify { $0 += 1 }
                    reads.modify { reads in
                        let previous = reads[id] ?? (turn, 0)
                        reads[id] = (turn, previous.turn == turn ? previous.count + 1 : 1)
                    }
                    mostInATurn.modify { $0 = max($0, reads.value[id]!.count) }
                }
            }
            // Three peers that write as fast as the socket takes it.
            let stop = Box(false)
            let writers = DispatchGroup()
            for _ in 0..<3 {
                let fd = connectUnixStream(to: path)
                #expect(fd >= 0)
                DispatchQueue.global().async(group: writers) {
                    let block = [UInt8](repeating: 65, count: 65536)
                    while !stop.value && send(fd, block, block.count, Int32(MSG_NOSIGNAL)) > 0 {}
                    close(fd)
                }
            }
            #expect(eventually { chunks.value >= 200 })
            stop.value = true
            listener.close()
            _ = writers.wait(timeout: .now() + 10)
            #expect(
                mostInATurn.value <= _StreamCore.readsPerTurn && _StreamCore.readsPerTurn < 32,
                "a connection read \(mostInATurn.value) times in one turn of the loop")
        }
    }

    @Test func closingFromInsideEveryCallbackIsSafe() throws {
        try withLoop { loop in
            let path = temporaryPath()
            let listener = try UnixStreamListener(boundTo: path, on: loop)
            // The listener closes itself from its first connection's arrival; that connection
            // closes itself from its first bytes.
            let got = Box<[String]>([])
            listener.connections.start { event in
                got.modify { $0.append("listener \(event.isTerminating ? "\(event)" : "value")") }
                guard case let .value(connection) = event else { return }
                listener.close()
                listener.close()
                connection.bytes.start { event in
                    got.modify { $0.append("bytes \(event.isTerminating ? "\(event)" : "value")") }
                    connection.close()
                    connection.write(Array("late".utf8))
                }
            }
            let fd = connectUnixStream(to: path)
            defer { close(fd) }
            _ = write(fd, "hello", 5)
            #expect(eventually { got.value.count == 4 })
            #expect(got.value == ["listener value", "listener COMPLETED", "bytes value", "bytes COMPLETED"])
            #expect(eventually { access(path, F_OK) != 0 })
            // Disposing a connect before it is made: nothing arrives, nothing leaks.
            let other = temporaryPath()
            let second = try UnixStreamListener(boundTo: other, on: loop)
            let values = Box(0)
            UnixStreamConnection.connect(toPath: other, on: loop).start { event in
                if event.value != nil { values.modify { $0 += 1 } }
            }.dispose()
            second.close()
            Thread.sleep(forTimeInterval: 0.05)
            #expect(values.value <= 1)
        }
    }

    @Test func theLoopStoppingInterruptsListenerAndConnectionsAndRemovesTheFile() throws {
        let loop = try EventLoop.startOnNewThread()
        let path = temporaryPath()
        let listener = try UnixStreamListener(boundTo: path, on: loop)
        let endings = Box<[String]>([])
        listener.connections.start { event in
            if case let .value(connection) = event {
                connection.bytes.start { event in
                    if event.isTerminating { endings.modify { $0.append("bytes \(event)") } }
                }
            } else {
                endings.modify { $0.append("connections \(event)") }
            }
        }
        let fd = connectUnixStream(to: path)
        defer { close(fd) }
        _ = write(fd, "x", 1)
        Thread.sleep(forTimeInterval: 0.05)
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0)
        #expect(endings.value.count == 2)
        #expect(endings.value.allSatisfy { $0.lowercased().contains("interrupted") })
        #expect(access(path, F_OK) != 0, "the file goes with the listener")
        do throws(UVError) {
            _ = try UnixStreamListener(boundTo: temporaryPath(), on: loop)
            Issue.record("a stopped loop took a listener")
        } catch {
            #expect(error == .loopStopped)
        }
    }
}

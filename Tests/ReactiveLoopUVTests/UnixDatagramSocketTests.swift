import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import ReactiveLoopUV
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Sends `datagrams` to the Unix datagram socket at `path`, from a raw socket; returns how many
/// the kernel took.
@discardableResult
func sendUnixDatagrams(_ datagrams: [[UInt8]], to path: String, sendBuffer: Int32? = nil) -> Int {
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    if var size = sendBuffer { setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    var sent = 0
    for datagram in datagrams {
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if status == datagram.count { sent += 1 }
    }
    return sent
}

@Suite("Unix datagram sockets on the loop")
struct UnixDatagramSocketTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("rl-uds-\(UUID().uuidString.prefix(8))").path
    }

    @Test func datagramsArriveInOrderAndTheFileHasItsModeUntilClosed() throws {
        try withLoop { loop in
            let path = temporaryPath()
            let socket = try UnixDatagramSocket(boundTo: path, on: loop, mode: 0o620)
            var status = stat()
            #expect(lstat(path, &status) == 0 && status.st_mode & 0o777 == 0o620)
            let received = Box<[String]>([])
            let ending = Box<String?>(nil)
            socket.datagrams.start { event in
                switch event {
                case let .value(datagram):
                    received.modify {
                        $0.append(String(decoding: datagram.bytes, as: UTF8.self) + "\(datagram.isTruncated)")
                    }
                case .completed: ending.value = "completed"
                default: ending.value = "\(event)"
                }
            }
            // More than a wake-up reads, and one longer than the longest kept whole.
            let count = UnixDatagramSocket.maxBatch * 3
            #expect(sendUnixDatagrams((0..<count).map { Array("d\($0)".utf8) }, to: path) == count)
            #expect(sendUnixDatagrams([[UInt8](repeating: 120, count: 70_000)], to: path, sendBuffer: 1 << 20) == 1)
            #expect(
                sendUnixDatagrams(
                    [[UInt8](repeating: 121, count: UnixDatagramSocket.maxDatagram + 1)], to: path, sendBuffer: 1 << 20)
                    == 1)
            #expect(eventually { received.value.count == count + 2 })
            #expect(Array(received.value.prefix(count)) == (0..<count).map { "d\($0)false" })
            #expect(
                received.value[count].count == 70_000 + 5 && received.value[count].hasSuffix("false"), "70 KB whole")
            #expect(received.value.last?.hasSuffix("true") == true, "cut at maxDatagram and marked")
            socket.close()
            #expect(eventually { ending.value == "completed" })
            #expect(eventually { access(path, F_OK) != 0 }, "closing removes the file")
        }
    }

    @Test func aStaleFileIsReplacedButALiveSocketOrAnotherFileIsNot() throws {
        try withLoop { loop in
            let path = temporaryPath()
            defer { unlink(path) }
            // Left by a process that is gone: bound, never listened on by anyone alive.
            leaveStaleUnixSocket(at: path)
            let first = try UnixDatagramSocket(boundTo: path, on: loop)
            // In use: refused, and the one in use keeps its file.
            #expect(throws: UVError.self) { _ = try UnixDatagramSocket(boundTo: path, on: loop) }
            do throws(UVError) {
                _ = try UnixDatagramSocket(boundTo: path, on: loop)
            } catch {
                #expect(error.name == "EADDRINUSE" && "\(error)".contains(path))
            }
            #expect(sendUnixDatagrams([Array("x".utf8)], to: path) == 1)
            first.close()
            #expect(eventually { access(path, F_OK) != 0 })
            // A stream socket someone listens on is in use too, whatever its kind.
            let listener = bindUnixSocket(at: path, type: SOCK_STREAM)
            do throws(UVError) {
                _ = try UnixDatagramSocket(boundTo: path, on: loop)
                Issue.record("a listening stream socket was taken over")
            } catch {
                #expect(error.name == "EADDRINUSE")
            }
            close(listener)
            unlink(path)
            // Not a socket: left alone.
            _ = FileManager.default.createFile(atPath: path, contents: Data("keep".utf8))
            do throws(UVError) {
                _ = try UnixDatagramSocket(boundTo: path, on: loop)
                Issue.record("a regular file was replaced")
            } catch {
                #expect(error.name == "EEXIST")
            }
            #expect(FileManager.default.contents(atPath: path) == Data("keep".utf8))
            let long = "/tmp/" + String(repeating: "p", count: 200)
            do throws(UVError) {
                _ = try UnixDatagramSocket(boundTo: long, on: loop)
                Issue.record("a path longer than a socket address was taken")
            } catch {
                #expect(error.name == "ENAMETOOLONG")
            }
        }
    }

    @Test func closingRemovesOnlyItsOwnFileAndShutdownReadingRefusesSenders() throws {
        try withLoop { loop in
            let path = temporaryPath()
            defer { unlink(path) }
            let socket = try UnixDatagramSocket(boundTo: path, on: loop)
            #expect(sendUnixDatagrams([Array("queued".utf8)], to: path) == 1)
            let drained = Box<[String]>([])
            let done = DispatchSemaphore(value: 0)
            _ = loop.execute {
                socket.shutdownReading()
                done.signal()
            }
            done.wait()
            #expect(sendUnixDatagrams([Array("late".utf8)], to: path) == 0, "refused: it would never be read")
            _ = loop.execute {
                _ = socket.drain { bytes, _ in drained.modify { $0.append(String(decoding: bytes, as: UTF8.self)) } }
                done.signal()
            }
            done.wait()
            #expect(drained.value == ["queued"], "what was queued before is still read")
            // Someone replaces the file: closing leaves theirs alone.
            unlink(path)
            _ = FileManager.default.createFile(atPath: path, contents: Data("theirs".utf8))
            socket.close()
            Thread.sleep(forTimeInterval: 0.1)
            #expect(FileManager.default.contents(atPath: path) == Data("theirs".utf8))
        }
    }

    @Test func drainReadsWhatIsLeftAndTheLoopStoppingInterrupts() throws {
        let loop = try EventLoop.startOnNewThread()
        let path = temporaryPath()
        let socket = try UnixDatagramSocket(boundTo: path, on: loop)
        #expect(sendUnixDatagrams([Array("a".utf8), Array("b".utf8)], to: path) == 2)
        let drained = Box<[String]>([])
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute {
            _ = socket.drain { bytes, _ in drained.modify { $0.append(String(decoding: bytes, as: UTF8.self)) } }
            done.signal()
        }
        done.wait()
        #expect(drained.value == ["a", "b"])
        let ending = Box<String?>(nil)
        socket.datagrams.start { event in
            if case .interrupted = event { ending.value = "interrupted" }
        }
        loop.stop()
        loop.waitUntilStopped()
        #expect(loop.closeStatus == 0)
        #expect(ending.value == "interrupted")
        #expect(access(path, F_OK) != 0, "the file goes with the socket")
    }
}

import Foundation
import LoopdCore
import Testing

@testable import loopd

#if canImport(Glibc)
    import Glibc
#endif

@Suite("JSON-lines file output")
struct FileOutputTests {
    /// A `write(2)` that writes for real, at most `chunk` bytes a call, until `budget` bytes are
    /// spent; then it fails with `error` (a full disk, by default) until `budget` is raised.
    final class FailingWrite: @unchecked Sendable {  // Used by one test's thread only.
        var budget: Int
        var error: Int32
        let chunk: Int
        init(budget: Int, error: Int32 = ENOSPC, chunk: Int = 7) {
            (self.budget, self.error, self.chunk) = (budget, error, chunk)
        }
        func call(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
            guard budget > 0 else {
                errno = error
                return -1
            }
            let written = Glibc.write(fd, bytes, min(count, chunk, budget))
            if written > 0 { budget -= written }
            return written
        }
    }

    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("loopd-output-\(UUID().uuidString)").path
    }

    func line(_ number: Int) -> [UInt8] { Array("{\"flush\":\(number),\"padding\":\"0123456789\"}\n".utf8) }

    /// The daemon hands the writer the buffer a flush's line was formatted into, not a copy.
    @Test func aLineIsWrittenFromTheBufferItWasFormattedInto() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, (0..<50).map { "name.\($0):\($0)|c|#tag:\($0)" }.joined(separator: "\n"))
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 5, intervalSeconds: 1, internalMetrics: [])
        let summaries = flush.summaries()
        let written = JSONLinesFormat.write(flush, summaries)
        let expected = JSONLinesFormat.format(flush, summaries)
        #expect(written.count == expected.count)
        #expect(written.withUnsafeBytes { Array($0) } == expected)
        let output = try FileOutput(path: path, write: FailingWrite(budget: .max).call)
        #expect(output.write(written) == nil)
        #expect(output.write(written) == nil)
        let content = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(content == expected + expected)
    }

    @Test func aWriteThatFailsMidLineIsTakenBackAndCounted() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let write = FailingWrite(budget: line(1).count + 10)
        let output = try FileOutput(path: path, write: write.call)
        #expect(output.write(line(1)) == nil)
        let failure = try #require(output.write(line(2)), "the disk is full 10 bytes into the second line")
        #expect(failure.contains("No space left on device"))
        #expect(output.droppedFlushes.load(ordering: .relaxed) == 1)
        write.budget = .max  // Room again.
        #expect(output.write(line(3)) == nil)
        let content = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(String(decoding: content, as: UTF8.self) == String(decoding: line(1) + line(3), as: UTF8.self))
        #expect(output.droppedFlushes.load(ordering: .relaxed) == 1)
    }

    @Test func aLineCutShortInAPipeIsFinishedBeforeTheNext() throws {
        let path = temporaryPath()
        #expect(mkfifo(path, 0o600) == 0)
        defer { unlink(path) }
        let reader = open(path, O_RDONLY | O_NONBLOCK)
        defer { close(reader) }
        let write = FailingWrite(budget: line(1).count + 10, error: EAGAIN)
        let output = try FileOutput(path: path, write: write.call)
        #expect(output.write(line(1)) == nil)
        #expect(output.write(line(2)) != nil)
        write.budget = .max
        #expect(output.write(line(3)) == nil)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(reader, &buffer, buffer.count)
        #expect(
            String(decoding: buffer[0..<max(count, 0)], as: UTF8.self)
                == String(decoding: line(1) + line(2) + line(3), as: UTF8.self))
        #expect(output.droppedFlushes.load(ordering: .relaxed) == 0, "no line was lost")
    }

    @Test func aDeviceThatIsAlwaysFullCountsEveryFlush() throws {
        let output = try FileOutput(path: "/dev/full")
        #expect(output.write(line(1))?.contains("No space left on device") == true)
        #expect(output.write(line(2)) != nil)
        #expect(output.droppedFlushes.load(ordering: .relaxed) == 2)
    }
}

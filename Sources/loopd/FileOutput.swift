import Dispatch
import Logging
import LoopdCore
import ReactiveLoopCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The JSON-lines output: a file opened for appending (reopened on SIGHUP, for log rotation),
/// or standard output.
///
/// Each flush's line reaches the file whole or not at all, so that a full disk costs flushes,
/// never the file's validity. A write that fails part-way through a line is undone:
/// - in a regular file, by truncating the file back to where the line started (at once, or if
///   that fails too, before the next line, which is dropped while it keeps failing);
/// - in a pipe, a terminal or a socket, which cannot be truncated, by writing the rest of the
///   line before the next one (the reader sees it late, but whole).
/// Every line lost is counted in `droppedFlushes`.
///
/// Confined to the flush queue once the daemon runs, but for `droppedFlushes`, which any thread
/// may read.
final class FileOutput: @unchecked Sendable {  // Confined to the flush queue (see above).
    /// The `write(2)` the output calls: tests inject failures through it.
    typealias WriteCall = (_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int

    let path: String
    /// Flushes whose line was not written, or was cut short and taken back.
    let droppedFlushes = Atomic<UInt64>(0)
    private var fd: Int32
    private var isRegularFile = false
    private let writeCall: WriteCall

    /// What a failed write left behind, to repair before the next line.
    private enum Cut {
        /// A regular file holds part of a line from this offset on: truncate it there.
        case truncate(to: off_t)
        /// A pipe or the like took part of a line: write the rest.
        case finish([UInt8])
    }

    private var cut: Cut?

    /// Opens `path` for appending, creating it if need be; `-` is standard output.
    init(path: String, write: @escaping WriteCall = { Glibc.write($0, $1, $2) }) throws(Daemon.StartupError) {
        self.path = path
        writeCall = write
        if path == "-" {
            fd = 1
        } else {
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            if fd < 0 {
                throw Daemon.StartupError(
                    description: "--output \(path): cannot open for writing: \(String(cString: strerror(errno)))")
            }
        }
        isRegularFile = Self.isRegularFile(fd)
    }

    deinit { if fd > 2 { close(fd) } }

    /// Writes `line` (a flush's JSON line, newline included) whole, or not at all; returns a
    /// message on failure.
    func write(_ line: [UInt8]) -> String? { line.withUnsafeBytes { write(bytes: $0) } }

    /// `write(_:)`, from the buffer the line was written into.
    func write(_ line: WrittenBytes) -> String? { line.withUnsafeBytes { write(bytes: $0) } }

    private func write(bytes line: UnsafeRawBufferPointer) -> String? {
        if let cut {
            if let error = repair(cut) {
                droppedFlushes.add(1, ordering: .relaxed)
                return error
            }
            self.cut = nil
        }
        // Where the line starts: with O_APPEND the end, which lseek reports for a regular file;
        // without it (standard output redirected to a file), this also moves the offset there.
        let start = isRegularFile ? lseek(fd, 0, SEEK_END) : -1
        let (written, failure) = writeAll(line)
        guard let failure else { return nil }
        if written > 0 && start < 0 {
            cut = .finish(Array(line[written...]))
            return "--output \(path): write failed: \(failure); the rest of the line will be written before the next"
        }
        droppedFlushes.add(1, ordering: .relaxed)
        if written > 0 {
            cut = .truncate(to: start)
            if repair(.truncate(to: start)) == nil { cut = nil }
        }
        return "--output \(path): write failed, a flush is lost: \(failure)"
    }

    /// Undoes or completes what a failed write left; returns a message if it cannot yet.
    private func repair(_ cut: Cut) -> String? {
        switch cut {
        case let .truncate(start):
            guard ftruncate(fd, start) == 0 else {
                return
                    "--output \(path): cannot remove a flush cut short by a failed write: \(Self.lastError()); this flush is lost too"
            }
            _ = lseek(fd, start, SEEK_SET)
            return nil
        case let .finish(rest):
            let (written, failure) = rest.withUnsafeBytes { writeAll($0) }
            guard let failure else { return nil }
            self.cut = .finish(Array(rest[written...]))
            return
                "--output \(path): write failed again while finishing a line cut short: \(failure); this flush is lost"
        }
    }

    /// Writes all of `bytes`, or as many as it can: returns how many it wrote and, if it stopped
    /// short, the error.
    private func writeAll(_ bytes: UnsafeRawBufferPointer) -> (written: Int, failure: String?) {
        var offset = 0
        while offset < bytes.count {
            let written = writeCall(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return (offset, Self.lastError())
            }
            offset += written
        }
        return (offset, nil)
    }

    /// Reopens the file (after it was renamed by a log rotation); returns a message on
    /// failure, and keeps writing to the old file then.
    func reopen() -> String? {
        guard path != "-" else { return nil }
        let reopened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard reopened >= 0 else {
            return "--output \(path): cannot reopen: \(String(cString: strerror(errno))); still writing to the old file"
        }
        // A cut in the old file is undone there if it can be; the new file starts clean.
        if case let .truncate(start)? = cut {
            _ = ftruncate(fd, start)
            cut = nil
        }
        close(fd)
        fd = reopened
        isRegularFile = Self.isRegularFile(fd)
        return nil
    }

    private static func isRegularFile(_ fd: Int32) -> Bool {
        var status = stat()
        return fstat(fd, &status) == 0 && status.st_mode & S_IFMT == S_IFREG
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}

/// The JSON-lines output on a thread of its own, so that a stalled file or pipe (a reader of
/// standard output that stopped reading) delays no other output, no ingestion and no shutdown.
///
/// Bound: one line being written and one waiting. A newer flush replaces the waiting line, and
/// the replaced one counts as dropped (`FileOutput.droppedFlushes`, reported as
/// `loopd.output_dropped_flushes`).
final class OutputWriter: @unchecked Sendable {  // `state` is protected by `lock`.
    let output: FileOutput
    private let queue = DispatchQueue(label: "loopd.output")
    private let logger: Logger
    /// Whether a line is being written, and the line waiting behind it with what to call once it
    /// is written or dropped.
    // A pthread lock, not `Mutex`: ThreadSanitizer reports false races on a contended `Mutex`.
    private let lock = _Lock.make()
    // Protected by lock.
    private var state: (busy: Bool, waiting: (line: WrittenBytes, done: @Sendable () -> Void)?) = (false, nil)

    init(_ output: FileOutput, logger: Logger) {
        self.output = output
        self.logger = logger
    }

    /// Writes `line` after the line in progress, if any; `done` runs (on the writer's thread)
    /// once it is written, failed or dropped. From any thread.
    func submit(_ line: WrittenBytes, done: @escaping @Sendable () -> Void) {
        let (start, replaced): (Bool, (@Sendable () -> Void)?) = lock.withLock {
            guard state.busy else {
                state.busy = true
                return (true, nil)
            }
            let replaced = state.waiting?.done
            state.waiting = (line, done)
            return (false, replaced)
        }
        if let replaced {
            let dropped = output.droppedFlushes.add(1, ordering: .relaxed).newValue
            if dropped == 1 || dropped.isMultiple(of: 100) {
                logger.warning(
                    "--output \(output.path): still writing an earlier flush; a waiting flush is dropped (\(dropped) flushes lost so far)"
                )
            }
            replaced()
        }
        if start { queue.async { [self] in write(line, done) } }
    }

    /// Reopens the file after the line in progress (SIGHUP).
    func reopen() {
        queue.async { [self] in
            if let error = output.reopen() { logger.error("\(error)") }
        }
    }

    private func write(_ line: WrittenBytes, _ done: @escaping @Sendable () -> Void) {
        var next: (line: WrittenBytes, done: @Sendable () -> Void)? = (line, done)
        while let current = next {
            if let error = output.write(current.line) { logger.error("\(error)") }
            current.done()
            next = lock.withLock {
                defer { state.waiting = nil }
                if state.waiting == nil { state.busy = false }
                return state.waiting
            }
        }
    }
}

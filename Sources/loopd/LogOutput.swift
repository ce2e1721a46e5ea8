import Dispatch
import Logging
import ReactiveLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// loopd's logs on standard error, written by a thread of their own, so that a standard error
/// nobody reads (a full pipe) never blocks the loop, a flush or the shutdown.
///
/// Bound: `maxQueuedBytes` of log lines waiting. A line that would pass it is dropped, and the
/// number dropped is said in the next line that gets through.
final class LogOutput: @unchecked Sendable {  // `state` is protected by `lock`.
    /// The most bytes of log lines waiting to be written.
    static let maxQueuedBytes = 1 << 20
    static let shared = LogOutput()

    private struct State {
        var lines: [[UInt8]] = []
        var bytes = 0
        var dropped = 0
        var writing = false
    }

    // A pthread lock, not `Mutex`: ThreadSanitizer reports false races on a contended `Mutex`.
    private let lock = _Lock.make()
    // Protected by lock.
    private var state = State()
    private let queue = DispatchQueue(label: "loopd.log")

    /// Queues `line` (newline included) for standard error; drops it if the queue is full.
    func write(_ line: [UInt8]) {
        let start: Bool = lock.withLock {
            guard state.bytes + line.count <= Self.maxQueuedBytes else {
                state.dropped += 1
                return false
            }
            if state.dropped > 0 {
                let note = Array("loopd: \(state.dropped) log lines dropped (standard error was not read)\n".utf8)
                state.lines.append(note)
                state.bytes += note.count
                state.dropped = 0
            }
            state.lines.append(line)
            state.bytes += line.count
            defer { state.writing = true }
            return !state.writing
        }
        if start { queue.async { [self] in drain() } }
    }

    /// Waits up to `seconds` for the queued lines to be written (at exit).
    func flush(within seconds: Double) {
        let done = DispatchSemaphore(value: 0)
        queue.async { done.signal() }
        _ = done.wait(timeout: .now() + seconds)
    }

    private func drain() {
        while true {
            let lines: [[UInt8]] = lock.withLock {
                defer {
                    state.lines = []
                    state.bytes = 0
                }
                if state.lines.isEmpty { state.writing = false }
                return state.lines
            }
            if lines.isEmpty { return }
            for line in lines {
                var offset = 0
                while offset < line.count {
                    let written = line.withUnsafeBytes { Glibc.write(2, $0.baseAddress! + offset, $0.count - offset) }
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
    }
}

/// A `LogHandler` writing through `LogOutput`, in the format of swift-log's stream handler.
struct QueuedLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let fields =
            all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " ")
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp =
            "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
        LogOutput.shared.write(Array("\(stamp) \(event.level) \(label):\(fields) \(event.message)\n".utf8))
    }
}

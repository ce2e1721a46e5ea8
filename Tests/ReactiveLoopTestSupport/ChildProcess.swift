// A child process for tests, started with posix_spawn and reaped with waitpid.
//
// Foundation's `Process` watches its children and their pipes with Dispatch sources; the test
// process once crashed inside libdispatch's event loop while it ran loopd children that way.
// This type uses no Dispatch: a captured stream is read by a thread of its own, and the exit
// status is taken with waitpid when asked for.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started for a test: its streams, its exit, and nothing else the test does
/// not ask for.
///
/// The child starts with no signal blocked (unless `blockedSignals` says otherwise) and with
/// only descriptors 0, 1 and 2 open, whatever thread starts it and whatever the test process
/// has open. A child still running when its `ChildProcess` is released is killed with SIGKILL
/// and reaped.
public final class ChildProcess: @unchecked Sendable {  // `state` is guarded by `lock`.
    /// Where one of the child's output streams goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// This descriptor, which the caller keeps and closes.
        case descriptor(Int32)
        /// A pipe that a thread of this object reads to its end; see `standardOutputText` and
        /// `standardErrorText`.
        case captured
        /// For standard error: wherever standard output goes (into the same captured text).
        case standardOutput
    }

    /// The child's process identifier.
    public let processIdentifier: pid_t

    /// What the reading threads and the test share. The threads hold this, not the
    /// `ChildProcess`, so that releasing the latter kills the child even while they read.
    private final class Shared: @unchecked Sendable {  // `state` is guarded by `lock`.
        let lock = NSCondition()
        var state = State()
    }
    private struct State {
        var waitStatus: Int32?  // Set once the child is reaped.
        var output: [UInt8] = []
        var error: [UInt8] = []
        var openReaders = 0
    }
    private let shared = Shared()
    private var lock: NSCondition { shared.lock }
    private var state: State {
        get { shared.state }
        _modify { yield &shared.state }
    }

    /// Starts `executable` (a path) with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: The child's whole environment; nil passes this process' own.
    ///   - blockedSignals: Signals the child starts with blocked (none by default).
    /// - Throws: `ChildProcessError` naming the call that failed and its errno.
    public init(
        executable: String, arguments: [String] = [], environment: [String: String]? = nil,
        standardOutput: Stream = .null, standardError: Stream = .null, blockedSignals: [Int32] = []
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Pipes of captured streams: the child gets the write end, this object reads the other.
        var readEnds: [(fd: Int32, isError: Bool)] = []
        var writeEnds: [Int32] = []
        defer { for fd in writeEnds { close(fd) } }
        func pipeEnd(isError: Bool) throws -> Int32 {
            var ends: [Int32] = [0, 0]
            guard Self.pipe2(&ends, O_CLOEXEC) == 0 else { throw ChildProcessError.failed("pipe2", errno) }
            readEnds.append((ends[0], isError))
            writeEnds.append(ends[1])
            return ends[1]
        }
        func redirect(_ stream: Stream, to target: Int32, isError: Bool) throws {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            case let .descriptor(fd):
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .captured:
                posix_spawn_file_actions_adddup2(&actions, try pipeEnd(isError: isError), target)
            case .standardOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, target)
            }
        }
        do {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            try redirect(standardOutput, to: 1, isError: false)
            try redirect(standardError, to: 2, isError: true)
            guard Self.addCloseFrom(&actions, 3) == 0 else {
                throw ChildProcessError.failed("posix_spawn_file_actions_addclosefrom_np", errno)
            }

            var mask = sigset_t()
            sigemptyset(&mask)
            for signal in blockedSignals { sigaddset(&mask, signal) }
            posix_spawnattr_setsigmask(&attributes, &mask)
            var defaults = sigset_t()
            sigfillset(&defaults)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        } catch {
            for end in readEnds { close(end.fd) }
            throw error
        }

        let argv = ([executable] + arguments).map { strdup($0) }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } }
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp ?? [] { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = (argv + [nil]).withUnsafeBufferPointer { arguments in
            if let envp {
                (envp + [nil]).withUnsafeBufferPointer { variables in
                    posix_spawn(&pid, executable, &actions, &attributes, arguments.baseAddress!, variables.baseAddress!)
                }
            } else {
                posix_spawn(&pid, executable, &actions, &attributes, arguments.baseAddress!, environ)
            }
        }
        guard spawned == 0 else {
            for end in readEnds { close(end.fd) }
            throw ChildProcessError.failed("posix_spawn \(executable)", spawned)
        }
        processIdentifier = pid
        state.openReaders = readEnds.count
        for end in readEnds {
            let thread = Thread { [shared] in Self.read(end.fd, isError: end.isError, into: shared) }
            thread.start()
        }
    }

    // glibc has both (2.34 and later), but declares them only for `_GNU_SOURCE`, which the
    // Glibc module is not imported with. The pipe is made close-on-exec at once, so that no
    // other test's child inherits it; the child closes every descriptor above 2.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let pipe2 = unsafeBitCast(dlsym(nil, "pipe2")!, to: Pipe2.self)
    private static let addCloseFrom = unsafeBitCast(
        dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")!, to: AddCloseFrom.self)

    deinit {
        if isRunning {
            kill(processIdentifier, SIGKILL)
            waitUntilExit()
        }
    }

    /// Reads `fd` into the captured text until its end, then closes it.
    private static func read(_ fd: Int32, isError: Bool, into shared: Shared) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            shared.lock.withLock {
                if isError {
                    shared.state.error += buffer[0..<count]
                } else {
                    shared.state.output += buffer[0..<count]
                }
                shared.lock.broadcast()
            }
        }
        close(fd)
        shared.lock.withLock {
            shared.state.openReaders -= 1
            shared.lock.broadcast()
        }
    }

    /// What the child wrote to a captured standard output so far (with standard error, if it
    /// goes to `.standardOutput`).
    public var standardOutputText: String { lock.withLock { String(decoding: state.output, as: UTF8.self) } }

    /// What the child wrote to a captured standard error so far.
    public var standardErrorText: String { lock.withLock { String(decoding: state.error, as: UTF8.self) } }

    /// Waits until every captured stream reached its end (the child and whatever inherited
    /// the streams closed them), for at most `seconds`; returns whether they did.
    @discardableResult
    public func waitForCapturedEnd(seconds: Double = 20) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return lock.withLock {
            while state.openReaders > 0 {
                if !lock.wait(until: deadline) { return state.openReaders == 0 }
            }
            return true
        }
    }

    /// Waits until the captured standard output holds `text`, for at most `seconds`; returns
    /// all it holds then, or nil if the text did not come (the stream ended or time ran out).
    public func waitForOutput(containing text: String, seconds: Double = 20) -> String? {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return lock.withLock {
            while true {
                let output = String(decoding: state.output, as: UTF8.self)
                if output.contains(text) { return output }
                if state.openReaders == 0 || !lock.wait(until: deadline) { return nil }
            }
        }
    }

    /// Whether the child has not exited yet (reaps it if it has).
    public var isRunning: Bool {
        lock.withLock {
            if state.waitStatus == nil {
                var status: Int32 = 0
                if waitpid(processIdentifier, &status, WNOHANG) == processIdentifier { state.waitStatus = status }
            }
            return state.waitStatus == nil
        }
    }

    /// Blocks until the child exits. (It polls: a blocking waitpid under the lock would stop
    /// the reading threads, and a child blocked on a full pipe would never exit.)
    public func waitUntilExit() {
        while isRunning { usleep(1000) }
    }

    /// Waits for the child's exit for at most `seconds`; returns whether it exited.
    @discardableResult
    public func waitForExit(seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while isRunning {
            if Date() > deadline { return false }
            usleep(2000)
        }
        return true
    }

    /// The child's exit code, or the number of the signal that ended it; -1 while it runs.
    public var terminationStatus: Int32 {
        guard !isRunning, let status = lock.withLock({ state.waitStatus }) else { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// The signal that ended the child, if one did; nil while it runs or if it exited.
    public var terminationSignal: Int32? {
        guard !isRunning, let status = lock.withLock({ state.waitStatus }) else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? nil : signal
    }
}

/// A system call that starting a `ChildProcess` made failed.
public enum ChildProcessError: Error, CustomStringConvertible {
    /// The call, and its errno (or the error number it returned).
    case failed(String, Int32)

    public var description: String {
        switch self {
        case let .failed(call, code): "\(call) failed: \(String(cString: strerror(code))) (\(code))"
        }
    }
}

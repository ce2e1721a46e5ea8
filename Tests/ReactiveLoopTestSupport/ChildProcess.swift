// A child process for tests, started with posix_spawn and reaped with waitpid, with no
// Dispatch in between.
//
// The test process once crashed inside libdispatch's event loop while it ran loopd children
// through Foundation's `Process`, reading their standard error with
// `FileHandle.readabilityHandler` (a Dispatch read source, which the harness left registered
// when it killed the child and closed the pipe). This type reads a captured stream with a
// thread of its own, and reaps the child with a thread of its own as soon as it exits.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started for a test: its streams, its exit, and nothing else the test does
/// not ask for.
///
/// The child starts in a process group of its own, with every signal's default action, no
/// signal blocked (unless `blockedSignals` says otherwise), standard input from `/dev/null`,
/// and only descriptors 0, 1 and 2 open, whatever thread starts it and whatever the test
/// process has open. It is reaped as soon as it exits. A child still running when its
/// `ChildProcess` is released is killed with its group (SIGKILL) and reaped.
///
/// Needs glibc 2.34 or later (`posix_spawn_file_actions_addclosefrom_np`).
public final class ChildProcess: @unchecked Sendable {  // Immutable; `Shared` guards the rest.
    /// Where one of the child's output streams goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// This descriptor of the test process, which the caller keeps and closes.
        case descriptor(Int32)
        /// A pipe that a thread of this object reads to its end; see `standardOutputText` and
        /// `standardErrorText`.
        case captured
        /// For standard error only: wherever standard output goes (into the same captured text).
        case standardOutput
    }

    /// The child's process identifier (also its process group's).
    public let processIdentifier: pid_t

    /// What the reading and reaping threads and the test share. The threads hold this, not
    /// the `ChildProcess`, so that releasing the latter kills the child even while they run.
    private final class Shared: @unchecked Sendable {  // Every field is guarded by `lock`.
        let lock = NSCondition()
        /// The raw status from waitpid once the child was reaped (`Int32.min` if it could not
        /// be: something else reaped it).
        var waitStatus: Int32?
        var output: [UInt8] = []
        var error: [UInt8] = []
        var outputOpen = false
        var errorOpen = false
    }
    private let shared = Shared()

    /// Starts `executable` (a path) with `arguments`.
    ///
    /// - Parameters:
    ///   - environment: The child's whole environment; nil passes this process' own.
    ///   - blockedSignals: Signals the child starts with blocked (none by default).
    /// - Throws: `ChildProcessError` naming the call that failed and its error.
    public init(
        executable: String, arguments: [String] = [], environment: [String: String]? = nil,
        standardOutput: Stream = .null, standardError: Stream = .null, blockedSignals: [Int32] = []
    ) throws {
        precondition(
            { if case .standardOutput = standardOutput { false } else { true } }(),
            "ChildProcess: standardOutput cannot be .standardOutput")
        guard let pipe2 = Self.pipe2, let addCloseFrom = Self.addCloseFrom else {
            throw ChildProcessError.failed("dlsym of pipe2 and posix_spawn_file_actions_addclosefrom_np", ENOSYS)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Pipes of captured streams: the child gets the write end, a thread reads the other.
        var readEnds: [(fd: Int32, isError: Bool)] = []
        var writeEnds: [Int32] = []
        defer { for fd in writeEnds { close(fd) } }
        func check(_ result: Int32, _ call: String) throws {
            guard result == 0 else { throw ChildProcessError.failed(call, result) }
        }
        func redirect(_ stream: Stream, to target: Int32, isError: Bool) throws {
            switch stream {
            case .null:
                try check(
                    posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0),
                    "posix_spawn_file_actions_addopen")
            case let .descriptor(fd):
                // Checked here: the child would otherwise write wherever the test's own goes.
                guard fcntl(fd, F_GETFD) >= 0 else { throw ChildProcessError.failed("descriptor \(fd)", EBADF) }
                try check(posix_spawn_file_actions_adddup2(&actions, fd, target), "posix_spawn_file_actions_adddup2")
            case .captured:
                var ends: [Int32] = [0, 0]
                guard pipe2(&ends, O_CLOEXEC) == 0 else { throw ChildProcessError.failed("pipe2", errno) }
                readEnds.append((ends[0], isError))
                writeEnds.append(ends[1])
                try check(
                    posix_spawn_file_actions_adddup2(&actions, ends[1], target), "posix_spawn_file_actions_adddup2")
            case .standardOutput:
                // After standard output's own action: the child's 1 is already in place.
                try check(posix_spawn_file_actions_adddup2(&actions, 1, target), "posix_spawn_file_actions_adddup2")
            }
        }
        do {
            try check(
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0),
                "posix_spawn_file_actions_addopen")
            try redirect(standardOutput, to: 1, isError: false)
            try redirect(standardError, to: 2, isError: true)
            try check(addCloseFrom(&actions, 3), "posix_spawn_file_actions_addclosefrom_np")

            var mask = sigset_t()
            sigemptyset(&mask)
            for signal in blockedSignals { sigaddset(&mask, signal) }
            try check(posix_spawnattr_setsigmask(&attributes, &mask), "posix_spawnattr_setsigmask")
            var defaults = sigset_t()
            sigfillset(&defaults)
            try check(posix_spawnattr_setsigdefault(&attributes, &defaults), "posix_spawnattr_setsigdefault")
            try check(posix_spawnattr_setpgroup(&attributes, 0), "posix_spawnattr_setpgroup")
            let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP
            try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "posix_spawnattr_setflags")
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
        let shared = self.shared
        for end in readEnds {
            if end.isError { shared.errorOpen = true } else { shared.outputOpen = true }
            Thread { Self.read(end.fd, isError: end.isError, into: shared) }.start()
        }
        Thread { [pid] in Self.reap(pid, into: shared) }.start()
    }

    // glibc has both (2.34 and later), but declares them only for `_GNU_SOURCE`, which the
    // Glibc module is not imported with. A pipe is made close-on-exec at once, so that no
    // other test's child inherits it; the child closes every descriptor above 2.
    private typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let pipe2 = dlsym(nil, "pipe2").map { unsafeBitCast($0, to: Pipe2.self) }
    private static let addCloseFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }

    deinit {
        if isRunning {
            kill(-processIdentifier, SIGKILL)
            waitUntilExit()
        }
    }

    /// Waits for the child's exit (blocking a thread of its own), then records it.
    private static func reap(_ pid: pid_t, into shared: Shared) {
        var status: Int32 = 0
        var reaped: pid_t
        repeat { reaped = waitpid(pid, &status, 0) } while reaped < 0 && errno == EINTR
        shared.lock.withLock {
            shared.waitStatus = reaped == pid ? status : Int32.min
            shared.lock.broadcast()
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
                    shared.error += buffer[0..<count]
                } else {
                    shared.output += buffer[0..<count]
                }
                shared.lock.broadcast()
            }
        }
        close(fd)
        shared.lock.withLock {
            if isError { shared.errorOpen = false } else { shared.outputOpen = false }
            shared.lock.broadcast()
        }
    }

    /// What the child wrote to a captured standard output so far (with standard error, if it
    /// goes to `.standardOutput`).
    public var standardOutputText: String { shared.lock.withLock { String(decoding: shared.output, as: UTF8.self) } }

    /// What the child wrote to a captured standard error so far.
    public var standardErrorText: String { shared.lock.withLock { String(decoding: shared.error, as: UTF8.self) } }

    /// Waits until every captured stream reached its end (the child, and whatever inherited
    /// the streams, closed them), for at most `seconds`; returns whether they did.
    @discardableResult
    public func waitForCapturedEnd(seconds: Double = 20) -> Bool {
        wait(seconds: seconds) { !$0.outputOpen && !$0.errorOpen }
    }

    /// Waits until the captured standard output holds `text`, for at most `seconds`; returns
    /// all it holds then, or nil if the text did not come (the stream ended or time ran out).
    public func waitForOutput(containing text: String, seconds: Double = 20) -> String? {
        var found: String?
        _ = wait(seconds: seconds) { shared in
            let output = String(decoding: shared.output, as: UTF8.self)
            if output.contains(text) { found = output }
            return found != nil || !shared.outputOpen
        }
        return found
    }

    /// Waits until `done` (asked under the lock) is true, for at most `seconds` (nil: for as
    /// long as it takes); returns its last answer.
    private func wait(seconds: Double?, until done: (Shared) -> Bool) -> Bool {
        let deadline = seconds.map { Date(timeIntervalSinceNow: $0) }
        return shared.lock.withLock {
            while !done(shared) {
                if let deadline {
                    if !shared.lock.wait(until: deadline) { return done(shared) }
                } else {
                    shared.lock.wait()
                }
            }
            return true
        }
    }

    /// Whether the child has not exited yet.
    public var isRunning: Bool { shared.lock.withLock { shared.waitStatus == nil } }

    /// Blocks until the child exits.
    public func waitUntilExit() {
        _ = wait(seconds: nil) { $0.waitStatus != nil }
    }

    /// Waits for the child's exit for at most `seconds`; returns whether it exited.
    @discardableResult
    public func waitForExit(seconds: Double) -> Bool {
        wait(seconds: seconds) { $0.waitStatus != nil }
    }

    /// The child's exit code, or the number of the signal that ended it; -1 while it runs (or
    /// if its status is unknown).
    public var terminationStatus: Int32 {
        guard let status = shared.lock.withLock({ shared.waitStatus }), status != Int32.min else { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// The signal that ended the child, if one did; nil while it runs or if it exited.
    public var terminationSignal: Int32? {
        guard let status = shared.lock.withLock({ shared.waitStatus }), status != Int32.min else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? nil : signal
    }
}

/// A system call that starting a `ChildProcess` made failed.
public enum ChildProcessError: Error, CustomStringConvertible {
    /// The call, and its error number.
    case failed(String, Int32)

    public var description: String {
        switch self {
        case let .failed(call, code): "\(call) failed: \(String(cString: strerror(code))) (\(code))"
        }
    }
}

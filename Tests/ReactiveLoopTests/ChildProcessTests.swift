import Foundation
import ReactiveLoopTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test harness' child processes start clean, whatever the test process holds.
@Suite("Test support: child processes")
struct ChildProcessTests {
    /// Runs a shell command; returns its exit status and its output (standard error included).
    func shell(_ command: String, blockedSignals: [Int32] = []) throws -> (status: Int32, output: String) {
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", command], standardOutput: .captured,
            standardError: .standardOutput, blockedSignals: blockedSignals)
        #expect(child.waitForExit(seconds: 20))
        #expect(child.waitForCapturedEnd())
        return (child.terminationStatus, child.standardOutputText)
    }

    @Test func aChildInheritsNoDescriptorAboveTwo() throws {
        // A socket this process holds open, not close-on-exec.
        let held = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(held) }
        try #require(held > 2)
        // The shell's own descriptors, as it lists them (the listing's own is the 3 of `ls`).
        let listed = try shell("ls /proc/self/fd")
        #expect(listed.status == 0)
        let descriptors = listed.output.split(separator: "\n").compactMap { Int32($0) }
        #expect(!descriptors.contains(held), "\(descriptors)")
        #expect(descriptors.filter { $0 > 3 }.isEmpty, "\(descriptors)")
    }

    @Test func aChildStartsWithOnlyTheSignalsItIsToldToBlock() throws {
        // Read by grep itself (a shell may change its mask before it runs a command).
        func blocked(_ signals: [Int32]) throws -> UInt64? {
            let grep = try ChildProcess(
                executable: "/bin/grep", arguments: ["SigBlk", "/proc/self/status"], standardOutput: .captured,
                blockedSignals: signals)
            #expect(grep.waitForExit(seconds: 20) && grep.waitForCapturedEnd())
            let line = grep.standardOutputText  // "SigBlk:\t0000000000004000\n"
            return line.split(separator: "\t").last.flatMap { UInt64($0.dropLast(), radix: 16) }
        }
        // Blocked here, as a Dispatch worker thread blocks it: the child does not inherit it.
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGUSR2)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &mask, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        #expect(try blocked([]) == 0)
        #expect(try blocked([SIGTERM]) == 1 << (UInt64(SIGTERM) - 1))
    }

    @Test func theExitCodeOrTheSignalIsReported() throws {
        #expect(try shell("exit 3").status == 3)
        let killed = try ChildProcess(executable: "/bin/sleep", arguments: ["30"])
        #expect(killed.isRunning)
        kill(killed.processIdentifier, SIGKILL)
        #expect(killed.waitForExit(seconds: 20))
        #expect(killed.terminationStatus == SIGKILL)
        #expect(killed.terminationSignal == SIGKILL)
        #expect(try shell("echo out; echo err >&2").output == "out\nerr\n")
    }

    @Test func aChildStillRunningWhenReleasedIsKilled() throws {
        var child: ChildProcess? = try ChildProcess(executable: "/bin/sleep", arguments: ["30"])
        let pid = try #require(child?.processIdentifier)
        child = nil
        // Killed and reaped: the process identifier names no process now (or, at worst, a new one).
        let command = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)
        #expect(kill(pid, 0) != 0 || command?.contains("sleep") != true)
    }

    @Test func aMissingExecutableIsAnError() {
        #expect(throws: ChildProcessError.self) { try ChildProcess(executable: "/nonexistent/program") }
    }
}

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
        let child = try ChildProcess(executable: "/bin/sleep", arguments: ["30"], standardOutput: .captured)
        // Listed by this process, so that no listing's own descriptor is among them. Until
        // they are just 0, 1 and 2: while it starts, sleep may hold a file of its own open (its
        // locale's); an inherited descriptor would stay.
        var descriptors: [Int32] = []
        let clean = eventually(seconds: 10, pollingEvery: 0.01) {
            descriptors =
                (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.processIdentifier)/fd"))?
                .compactMap { Int32($0) }.sorted() ?? []
            return descriptors == [0, 1, 2]
        }
        #expect(clean, "\(descriptors)")
    }

    @Test func standardOutputAndStandardErrorAreCapturedApart() throws {
        let child = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "echo out; echo err >&2"], standardOutput: .captured,
            standardError: .captured)
        #expect(child.waitForExit(seconds: 20) && child.waitForCapturedEnd())
        #expect(child.standardOutputText == "out\n")
        #expect(child.standardErrorText == "err\n")
    }

    @Test func theEnvironmentIsTheOneGiven() throws {
        let child = try ChildProcess(
            executable: "/usr/bin/env", environment: ["ONLY": "this"], standardOutput: .captured)
        #expect(child.waitForExit(seconds: 20) && child.waitForCapturedEnd())
        #expect(child.standardOutputText == "ONLY=this\n")
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

    @Test func aChildStillRunningWhenReleasedIsKilledAndReaped() throws {
        var child: ChildProcess? = try ChildProcess(executable: "/bin/sleep", arguments: ["30"])
        let pid = try #require(child?.processIdentifier)
        child = nil
        // Reaped: it is no child of this process any more (a zombie still would be).
        #expect(waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD)
    }

    @Test func aChildThatExitsIsReapedWithoutBeingAsked() throws {
        let child = try ChildProcess(executable: "/bin/true")
        let pid = child.processIdentifier
        // Nothing asks the child anything: its own thread reaps it.
        let reaped = eventually(seconds: 20, pollingEvery: 0.01) {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
            return !stat.contains(") Z ")
        }
        #expect(reaped)
        #expect(child.waitForExit(seconds: 20))
        #expect(child.terminationStatus == 0)
    }

    @Test func aGrandchildIsKilledWithTheChild() throws {
        var child: ChildProcess? = try ChildProcess(
            executable: "/bin/sh", arguments: ["-c", "sleep 30 & echo $!; wait"], standardOutput: .captured)
        let line = try #require(child?.waitForOutput(containing: "\n"))
        let grandchild = try #require(pid_t(line.trimmingCharacters(in: .whitespacesAndNewlines)))
        child = nil
        let gone = eventually(seconds: 20, pollingEvery: 0.01) {
            guard let stat = try? String(contentsOfFile: "/proc/\(grandchild)/stat", encoding: .utf8) else {
                return true
            }
            return stat.contains(") Z ")
        }
        #expect(gone)
    }

    @Test func aDescriptorThatIsNotOpenIsAnError() {
        #expect(throws: ChildProcessError.self) {
            try ChildProcess(executable: "/bin/true", standardOutput: .descriptor(9999))
        }
    }

    @Test func aMissingExecutableIsAnError() {
        #expect(throws: ChildProcessError.self) { try ChildProcess(executable: "/nonexistent/program") }
    }
}

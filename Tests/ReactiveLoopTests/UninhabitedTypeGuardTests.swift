import Foundation
import ReactiveLoopTestSupport
import Testing

/// The compile-time guards are checked by compiling snippets against the module this test
/// bundle was built with, and reading the compiler's diagnostics.
@Suite("Compile-time guards")
struct UninhabitedTypeGuardTests {
    /// Type-checks `source` (which imports ReactiveLoop) and returns what the compiler printed.
    func diagnostics(_ source: String) throws -> String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let modules = bundle.deletingLastPathComponent().appendingPathComponent("Modules").path
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("guard-\(UUID()).swift")
        try Data(("import ReactiveLoop\nstruct E: Error {}\n" + source).utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let compiler = try ChildProcess(
            executable: "/usr/bin/env", arguments: ["swiftc", "-typecheck", "-I", modules, file.path],
            standardOutput: .captured, standardError: .standardOutput)
        compiler.waitUntilExit()
        compiler.waitForCapturedEnd()
        return compiler.standardOutputText
    }

    @Test func valuesOnlyObservationOfAStreamThatCanFailDoesNotCompile() throws {
        let producer = try diagnostics("SignalProducer<Int, E>(value: 1).startWithValues { _ in }")
        #expect(producer.contains("'startWithValues' is unavailable: Transform the error to `Never` beforehand"))
        let signal = try diagnostics("Signal<Int, E>.never.observeValues { _ in }")
        #expect(signal.contains("'observeValues' is unavailable: Transform the error to `Never` beforehand"))
    }

    @Test func observingWhatCannotHappenWarns() throws {
        let failed = try diagnostics("Signal<Int, Never>.never.observeFailed { _ in }")
        #expect(failed.contains("'observeFailed' is deprecated: Observer is never invoked - error type `Never`"))
        let values = try diagnostics("SignalProducer<Never, Never>.empty.startWithValues { _ in }")
        #expect(values.contains("'startWithValues' is deprecated: Observer is never invoked - value type `Never`"))
    }

    @Test func theOrdinaryFormsCompileCleanly() throws {
        let clean = try diagnostics(
            """
            SignalProducer<Int, Never>(value: 1).startWithValues { _ in }
            Signal<Int, E>.never.observeFailed { _ in }
            SignalProducer<Int, E>(value: 1).startWithResult { _ in }
            """)
        #expect(!clean.contains("error"), "\(clean)")
        #expect(!clean.contains("warning"), "\(clean)")
    }
}

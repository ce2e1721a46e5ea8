import Testing
@testable import ReactiveLoopCore

@Suite("timeout")
struct TimeoutTests {
    @Test func timeoutFailsUnlessTerminatedFirst() {
        let scheduler = TestScheduler()
        let timeline = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, TestError>.never.timeout(after: 2, raising: TestError(code: 9), on: scheduler)
            .start(timeline.observer)
        let completed = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, TestError>(value: 1).timeout(after: 2, raising: TestError(), on: scheduler)
            .start(completed.observer)
        let promoted = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, Never>.never.timeout(after: 1, raising: TestError(code: 3), on: scheduler).start(
            promoted.observer)
        let (signal, _input) = Signal<Int, Never>.pipe()
        let viaSignal = Timeline<Int, TestError>(scheduler)
        signal.timeout(after: 3, raising: TestError(code: 4), on: scheduler).observe(viaSignal.observer)
        scheduler.run()
        #expect(timeline.entries == ["2.0:FAILED TestError(code: 9)"])
        #expect(completed.entries == ["0.0:VALUE 1", "0.0:COMPLETED"])
        #expect(promoted.entries == ["1.0:FAILED TestError(code: 3)"])
        #expect(viaSignal.entries == ["3.0:FAILED TestError(code: 4)"])
        _ = _input
    }
}

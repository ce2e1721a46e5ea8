import Testing
@testable import ReactiveLoopCore

@Suite("debounce")
struct DebounceTests {
    @Test func debounceSendsAfterAQuietInterval() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.debounce(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (1.2, .value(3)), (3, .value(4))], into: input, on: scheduler)
        scheduler.advance(by: 10)
        #expect(timeline.entries == ["2.2:VALUE 3", "4.0:VALUE 4"])
    }

    @Test func debounceAtCompletionDiscardsOrSendsThePendingValue() {
        for discard in [true, false] {
            let scheduler = TestScheduler()
            let (signal, input) = Signal<Int, Never>.pipe()
            let timeline = Timeline<Int, Never>(scheduler)
            signal.debounce(1, on: scheduler, discardWhenCompleted: discard).observe(timeline.observer)
            play([(0, .value(1)), (0.5, .completed)], into: input, on: scheduler)
            scheduler.run()
            #expect(timeline.entries == (discard ? ["0.5:COMPLETED"] : ["1.0:VALUE 1", "1.0:COMPLETED"]))
        }
    }

    @Test func debounceDeliversAFailureAtOnce() {
        let scheduler = TestScheduler()
        let timeline = Timeline<Int, TestError>(scheduler)
        let (signal, input) = Signal<Int, TestError>.pipe()
        signal.debounce(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .failed(TestError(code: 1)))], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["0.5:FAILED TestError(code: 1)"])
    }
}

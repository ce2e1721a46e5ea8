import Testing
@testable import ReactiveLoopCore

@Suite("delay")
struct DelayTests {
    @Test func delayShiftsValuesAndCompletionAndKeepsOrder() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.delay(2, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (0.5, .value(3)), (1, .completed)], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["2.0:VALUE 1", "2.5:VALUE 2", "2.5:VALUE 3", "3.0:COMPLETED"])
    }

    @Test func delayDeliversAFailureAtOnceAndDropsWhatWaits() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, TestError>.pipe()
        let timeline = Timeline<Int, TestError>(scheduler)
        signal.delay(2, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (1, .failed(TestError()))], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["1.0:FAILED TestError(code: 0)"])
    }

    @Test func timeOperatorsStartedTwiceRunIndependently() {
        let scheduler = TestScheduler()
        let producer = SignalProducer<Int, Never>([1, 2]).delay(1, on: scheduler)
        let first = Timeline<Int, Never>(scheduler)
        producer.start(first.observer)
        scheduler.advance(by: 0.5)
        let second = Timeline<Int, Never>(scheduler)
        producer.start(second.observer)
        scheduler.run()
        #expect(first.entries == ["1.0:VALUE 1", "1.0:VALUE 2", "1.0:COMPLETED"])
        #expect(second.entries == ["1.5:VALUE 1", "1.5:VALUE 2", "1.5:COMPLETED"])
    }

    @Test func disposingADelayedRunDropsWhatWaits() {
        let scheduler = TestScheduler()
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer<Int, Never>([1]).concat(.never).delay(1, on: scheduler).start(recorder.observer)
        disposable.dispose()
        scheduler.run()
        #expect(recorder.events == [.interrupted])
    }
}

import Testing
@testable import ReactiveLoopCore

@Suite("collect(every:)")
struct CollectEveryTests {
    @Test func collectEveryGroupsByInterval() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<[Int], Never>(scheduler)
        signal.collect(every: .seconds(1), on: scheduler).observe(timeline.observer)
        let skipping = Timeline<[Int], Never>(scheduler)
        signal.collect(every: .seconds(1), on: scheduler, skipEmpty: true, discardWhenCompleted: false)
            .observe(skipping.observer)
        play([(0.2, .value(1)), (0.4, .value(2)), (2.5, .value(3)), (2.7, .completed)], into: input, on: scheduler)
        scheduler.advance(by: 4)
        #expect(timeline.entries == ["1.0:VALUE [1, 2]", "2.0:VALUE []", "2.7:COMPLETED"])
        // As in ReactiveSwift: kept values go out at the next tick, with the completion.
        #expect(skipping.entries == ["1.0:VALUE [1, 2]", "3.0:VALUE [3]", "3.0:COMPLETED"])
    }
}

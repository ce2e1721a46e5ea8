import Testing
@testable import ReactiveLoopCore

@Suite("throttle")
struct ThrottleTests {
    @Test func throttleSendsAtMostOneValuePerIntervalTheLatest() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.throttle(1, on: scheduler).observe(timeline.observer)
        play(
            [(0, .value(1)), (0.2, .value(2)), (0.4, .value(3)), (1.5, .value(4)), (3.5, .value(5)), (3.6, .value(6))],
            into: input, on: scheduler)
        scheduler.advance(by: 10)
        #expect(timeline.entries == ["0.0:VALUE 1", "1.0:VALUE 3", "2.0:VALUE 4", "3.5:VALUE 5", "4.5:VALUE 6"])
    }

    @Test func throttleDropsAHeldValueAtCompletion() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.throttle(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (0.6, .completed)], into: input, on: scheduler)
        scheduler.advance(by: 5)
        #expect(timeline.entries == ["0.0:VALUE 1", "0.6:COMPLETED"])
    }

    @Test func throttleWhileHoldsValuesWhileThePropertyIsTrue() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let gate = MutableProperty(false)
        let recorder = Recorder<Int, Never>()
        signal.throttle(while: gate, on: scheduler).observe(recorder.observer)
        input.send(value: 1)
        gate.value = true
        input.send(value: 2)
        input.send(value: 3)
        scheduler.advance()
        #expect(recorder.values == [1])
        gate.value = false
        scheduler.advance()
        #expect(recorder.values == [1, 3])
        let producer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([7]).throttle(while: Property(value: false), on: scheduler).start(producer.observer)
        scheduler.advance()
        #expect(producer.values == [7])
    }

    /// Regression: the producer form kept its property alive as long as the producer.
    @Test func throttleWhileProducerDoesNotRetainItsProperty() {
        weak var weakGate: MutableProperty<Bool>?
        let producer: SignalProducer<Int, Never>
        do {
            let gate = MutableProperty(false)
            weakGate = gate
            producer = SignalProducer<Int, Never>([1]).throttle(while: gate, on: TestScheduler())
        }
        #expect(weakGate == nil)
        _ = producer
    }
}

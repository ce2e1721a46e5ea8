import Testing
@testable import ReactiveLoop

@Suite("Map, filter and friends")
struct MapTests {
    struct Point { var x: Int }

    @Test func signalMapFormsTransformValuesAndPassTerminals() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let mapped = Recorder<Int, TestError>()
        let constant = Recorder<String, TestError>()
        let keyPath = Recorder<Int, TestError>()
        signal.map { $0 * 2 }.observe(mapped.observer)
        signal.map(value: "x").observe(constant.observer)
        signal.map { Point(x: $0) }.map(\.x).observe(keyPath.observer)
        input.send(value: 1)
        input.send(value: 2)
        input.send(error: TestError(code: 1))
        #expect(mapped.events == [.value(2), .value(4), .failed(TestError(code: 1))])
        #expect(constant.events == [.value("x"), .value("x"), .failed(TestError(code: 1))])
        #expect(keyPath.events == [.value(1), .value(2), .failed(TestError(code: 1))])
    }

    @Test func filterCompactMapSkipNilAndMapError() {
        let (signal, input) = Signal<Int?, TestError>.pipe()
        let filtered = Recorder<Int?, TestError>()
        let compact = Recorder<String, TestError>()
        let unwrapped = Recorder<Int, TestError>()
        let errors = Recorder<Int?, TestError>()
        signal.filter { ($0 ?? 0) > 1 }.observe(filtered.observer)
        signal.compactMap { $0.map(String.init) }.observe(compact.observer)
        signal.skipNil().observe(unwrapped.observer)
        signal.mapError { TestError(code: $0.code * 10) }.observe(errors.observer)
        input.send(value: 1)
        input.send(value: nil)
        input.send(value: 3)
        input.send(error: TestError(code: 2))
        #expect(filtered.events == [.value(3), .failed(TestError(code: 2))])
        #expect(compact.events == [.value("1"), .value("3"), .failed(TestError(code: 2))])
        #expect(unwrapped.events == [.value(1), .value(3), .failed(TestError(code: 2))])
        #expect(errors.events.last == .failed(TestError(code: 20)))
    }

    @Test func aViewOfATerminatedSignalInterruptsNewObservers() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let mapped = signal.map { $0 + 1 }.filter { _ in true }
        input.sendCompleted()
        let recorder = Recorder<Int, Never>()
        #expect(mapped.observe(recorder.observer) == nil)
        #expect(recorder.events == [.interrupted])
    }

    @Test func completedAndInterruptedPassThroughEveryStatelessOperator() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.map { $0 }.filter { _ in false }.compactMap { $0 }.mapError { $0 }.observe(recorder.observer)
        input.send(value: 1)
        input.sendCompleted()
        #expect(recorder.events == [.completed])
        let (other, otherInput) = Signal<Int, TestError>.pipe()
        let interrupted = Recorder<Int, TestError>()
        other.map { $0 }.compactMap { $0 }.observe(interrupted.observer)
        otherInput.sendInterrupted()
        #expect(interrupted.events == [.interrupted])
    }

    @Test func disposingAViewObservationStopsIt() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        let disposable = signal.map { $0 * 3 }.observe(recorder.observer)
        input.send(value: 1)
        disposable?.dispose()
        input.send(value: 2)
        #expect(recorder.values == [3])
    }

    @Test func producerMapFormsAreAppliedOnEveryRun() {
        let producer = SignalProducer<Int?, TestError>(values: 1, nil, 3)
        let mapped = Recorder<Int, TestError>()
        producer.map { ($0 ?? 0) * 2 }.start(mapped.observer)
        #expect(mapped.events == [.value(2), .value(0), .value(6), .completed])

        let chain = Recorder<String, TestError>()
        producer.skipNil().filter { $0 > 1 }.map(value: "v").start(chain.observer)
        #expect(chain.events == [.value("v"), .completed])

        let compact = Recorder<Int, TestError>()
        producer.compactMap { $0 }.map { Point(x: $0) }.map(\.x).start(compact.observer)
        producer.compactMap { $0 }.start(compact.observer)
        #expect(compact.values == [1, 3, 1, 3])

        let errors = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(error: TestError(code: 1)).mapError { TestError(code: $0.code + 1) }
            .start(errors.observer)
        #expect(errors.events == [.failed(TestError(code: 2))])
    }
}

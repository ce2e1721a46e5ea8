import Testing
@testable import ReactiveLoopCore

@Suite("materialize and dematerialize")
struct MaterializeTests {
    @Test func materializeSendsEventsAsValues() {
        let recorder = Recorder<Signal<Int, TestError>.Event, Never>()
        SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 2)).materialize()
            .start(recorder.observer)
        #expect(recorder.events == [.value(.value(1)), .value(.failed(TestError(code: 2))), .completed])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let interrupted = Recorder<Signal<Int, TestError>.Event, Never>()
        signal.materialize().observe(interrupted.observer)
        input.sendInterrupted()
        #expect(interrupted.events == [.value(.interrupted), .interrupted])
    }

    @Test func dematerializeRoundTrips() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(values: 1, 2).concat(error: TestError()).materialize().dematerialize()
            .start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(2), .failed(TestError())])
        let (signal, input) = Signal<Signal<Int, TestError>.Event, Never>.pipe()
        let viaSignal = Recorder<Int, TestError>()
        signal.dematerialize().observe(viaSignal.observer)
        input.send(value: .value(3))
        input.send(value: .completed)
        #expect(viaSignal.events == [.value(3), .completed])
    }

    /// Regression: the adapters forwarded everything, so `materialize()` then `dematerialize()`
    /// completed twice (the materialized `completed`, then the upstream's own), and a value
    /// after a terminal one went through. A view or a producer's adapters have no core to
    /// drop them.
    @Test func dematerializeEndsAtTheFirstTerminalEvent() {
        let (events, eventsInput) = Signal<Signal<Int, TestError>.Event, Never>.pipe()
        var received: [Signal<Int, TestError>.Event] = []
        events.dematerialize().observe(Signal.Observer { received.append($0) })
        eventsInput.send(value: .value(1))
        eventsInput.send(value: .completed)
        eventsInput.send(value: .value(2))
        eventsInput.sendCompleted()
        #expect(received == [.value(1), .completed])

        let (values, valuesInput) = Signal<Int, TestError>.pipe()
        var roundTrip: [Signal<Int, TestError>.Event] = []
        values.materialize().dematerialize().observe(Signal.Observer { roundTrip.append($0) })
        valuesInput.send(value: 3)
        valuesInput.sendCompleted()
        #expect(roundTrip == [.value(3), .completed])

        var completions = 0
        SignalProducer<Int, TestError>(value: 4).materialize().dematerialize().on(completed: { completions += 1 })
            .start()
        #expect(completions == 1)

        let (results, resultsInput) = Signal<Result<Int, TestError>, Never>.pipe()
        var fromResults: [Signal<Int, TestError>.Event] = []
        results.dematerializeResults().observe(Signal.Observer { fromResults.append($0) })
        resultsInput.send(value: .failure(TestError(code: 6)))
        resultsInput.send(value: .success(7))
        resultsInput.sendCompleted()
        #expect(fromResults == [.failed(TestError(code: 6))])

        var interruptions = 0
        SignalProducer<Result<Int, TestError>, Never>(value: .failure(TestError(code: 8))).dematerializeResults()
            .on(interrupted: { interruptions += 1 }).start()
        #expect(interruptions == 0)
    }

    @Test func resultFormsRoundTrip() {
        let results = Recorder<Result<Int, TestError>, Never>()
        SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 4)).materializeResults()
            .start(results.observer)
        #expect(results.events == [.value(.success(1)), .value(.failure(TestError(code: 4))), .completed])
        let back = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 4)).materializeResults()
            .dematerializeResults().start(back.observer)
        #expect(back.events == [.value(1), .failed(TestError(code: 4))])
        let (signal, input) = Signal<Result<Int, TestError>, Never>.pipe()
        let viaSignal = Recorder<Int, TestError>()
        signal.dematerializeResults().observe(viaSignal.observer)
        let materialized = Recorder<Result<Result<Int, TestError>, Never>, Never>()
        signal.materializeResults().observe(materialized.observer)
        input.send(value: .success(5))
        input.sendCompleted()
        #expect(viaSignal.events == [.value(5), .completed])
        #expect(materialized.values.count == 1)
    }
}

@Suite("attempt and attemptMap")
struct AttemptTests {
    @Test func attemptFailsOnFailureAndPassesValuesOtherwise() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>([1, 2, 3]).attempt { $0 == 2 ? .failure(TestError(code: 2)) : .success(()) }
            .start(recorder.observer)
        #expect(recorder.events == [.value(1), .failed(TestError(code: 2))])
        let mapped = Recorder<String, TestError>()
        SignalProducer<Int, TestError>([1, 2]).attemptMap { .success("\($0)") }.start(mapped.observer)
        #expect(mapped.events == [.value("1"), .value("2"), .completed])
    }

    @Test func throwingFormsPromoteNeverToAnyError() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, any Swift.Error>()
        signal.attempt { if $0 < 0 { throw TestError(code: $0) } }.observe(recorder.observer)
        let mapped = Recorder<Int, any Swift.Error>()
        signal.attemptMap { value -> Int in
            if value < 0 { throw TestError(code: value) }
            return value * 2
        }.observe(mapped.observer)
        input.send(value: 1)
        input.send(value: -1)
        input.send(value: 2)
        #expect(recorder.values == [1])
        #expect((recorder.events.last?.error as? TestError) == TestError(code: -1))
        #expect(mapped.values == [2])
        let producer = Recorder<Int, any Swift.Error>()
        SignalProducer<Int, Never>([1, -2]).attemptMap { value -> Int in
            if value < 0 { throw TestError() }
            return value
        }.start(producer.observer)
        SignalProducer<Int, Never>([3]).attempt { _ in }.start(producer.observer)
        SignalProducer<Int, any Swift.Error>([4]).attempt { _ in }.attemptMap { $0 + 1 }.start(producer.observer)
        #expect(producer.values == [1, 3, 5])
        let (anySignal, anyInput) = Signal<Int, any Swift.Error>.pipe()
        let anyRecorder = Recorder<Int, any Swift.Error>()
        anySignal.attempt { _ in }.attemptMap { $0 * 3 }.observe(anyRecorder.observer)
        anyInput.send(value: 2)
        #expect(anyRecorder.values == [6])
    }

    @Test func signalResultForms() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.attempt { _ in .failure(TestError(code: 8)) }.observe(recorder.observer)
        let mapped = Recorder<Int, TestError>()
        signal.attemptMap { .success($0 + 1) }.observe(mapped.observer)
        input.send(value: 1)
        #expect(recorder.events == [.failed(TestError(code: 8))])
        #expect(mapped.values == [2])
    }
}

@Suite("promoteError and promoteValue")
struct PromoteTests {
    @Test func promotionsChangeOnlyTypes() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let promoted = Recorder<Int, TestError>()
        signal.promoteError(TestError.self).observe(promoted.observer)
        let same: Signal<Int, Never> = signal.promoteError()
        #expect(same === signal)
        input.send(value: 1)
        input.sendCompleted()
        #expect(promoted.events == [.value(1), .completed])

        let producer = Recorder<Int, TestError>()
        SignalProducer<Int, Never>(value: 2).promoteError(TestError.self).start(producer.observer)
        #expect(producer.events == [.value(2), .completed])

        let (never, neverInput) = Signal<Never, TestError>.pipe()
        let valued = Recorder<String, TestError>()
        never.promoteValue(String.self).observe(valued.observer)
        neverInput.send(error: TestError())
        #expect(valued.events == [.failed(TestError())])
        let producerValued = Recorder<Int, Never>()
        SignalProducer<Never, Never>.empty.promoteValue(Int.self).start(producerValued.observer)
        #expect(producerValued.events == [.completed])
        let unchanged: SignalProducer<Never, Never> = SignalProducer<Never, Never>.empty.promoteValue()
        let unchangedRecorder = Recorder<Never, Never>()
        unchanged.start(unchangedRecorder.observer)
        #expect(unchangedRecorder.events.count == 1)
    }
}

import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("take")
struct TakeTests {
    @Test func takeFirstForwardsCountValuesThenCompletes() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        signal.take(first: 2).observe(recorder.observer)
        for value in 1...4 { input.send(value: value) }
        #expect(recorder.events == [.value(1), .value(2), .completed])

        let zero = Recorder<Int, Never>()
        signal.take(first: 0).observe(zero.observer)
        #expect(zero.events == [.interrupted])
    }

    @Test func takeFirstPassesAnEarlierTerminal() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.take(first: 3).observe(recorder.observer)
        input.send(value: 1)
        input.send(error: TestError(code: 1))
        #expect(recorder.events == [.value(1), .failed(TestError(code: 1))])
    }

    /// The adapter alone, with a terminal event sent into it from inside a value's delivery
    /// (the module's sinks queue such a send, so no run reaches this today): the terminal event
    /// ends the output, and no `completed` follows it.
    @Test func takeFirstAdapterSendsOneTerminalEventWhenOneArrivesDuringAValue() {
        var received: [Signal<Int, Never>.Event] = []
        var input: Signal<Int, Never>.Observer?
        let downstream = Signal<Int, Never>.Observer { event in
            received.append(event)
            if case .value(1) = event { input?.sendInterrupted() }
        }
        input = _Take.first(2)(downstream, Lifetime.empty)
        input?.send(value: 1)
        input?.send(value: 2)
        #expect(received == [.value(1), .interrupted])
    }

    @Test func takeFirstOnAProducerEndsTheRunAndStopsTheSource() {
        let sent = Box(0)
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...1_000_000)
            .on(value: { _ in sent.modify { $0 += 1 } })
            .take(first: 3)
            .start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(2), .value(3), .completed])
        #expect(sent.value == 3)
        let zero = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...3).take(first: 0).start(zero.observer)
        #expect(zero.events == [.interrupted])
    }

    @Test func aProducerStartedTwiceCountsEachRunSeparately() {
        let producer = SignalProducer<Int, Never>(1...5).take(first: 2)
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        producer.start(first.observer)
        producer.start(second.observer)
        #expect(first.values == [1, 2])
        #expect(second.values == [1, 2])
    }

    @Test func takeLastSendsTheLastValuesOnCompletion() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...7).take(last: 3).start(recorder.observer)
        #expect(recorder.events == [.value(5), .value(6), .value(7), .completed])

        let fewer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1]).take(last: 3).start(fewer.observer)
        #expect(fewer.events == [.value(1), .completed])

        let none = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...3).take(last: 0).start(none.observer)
        #expect(none.events == [.completed])
    }

    @Test func takeLastDropsItsBufferOnFailureOrInterruption() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.take(last: 2).observe(recorder.observer)
        input.send(value: 1)
        input.send(error: TestError(code: 3))
        #expect(recorder.events == [.failed(TestError(code: 3))])

        let interrupted = Recorder<Int, Never>()
        let disposable = SignalProducer<Int, Never>([1, 2]).concat(.never).take(last: 2).start(interrupted.observer)
        disposable.dispose()
        #expect(interrupted.events == [.interrupted])
    }

    @Test func takeUntilCompletesOnTriggerValueOrCompletion() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let (trigger, fire) = Signal<(), Never>.pipe()
        let recorder = Recorder<Int, Never>()
        signal.take(until: trigger).observe(recorder.observer)
        input.send(value: 1)
        fire.send(value: ())
        input.send(value: 2)
        #expect(recorder.events == [.value(1), .completed])

        let (other, otherInput) = Signal<Int, Never>.pipe()
        let (otherTrigger, otherFire) = Signal<(), Never>.pipe()
        let completedByTrigger = Recorder<Int, Never>()
        other.take(until: otherTrigger).observe(completedByTrigger.observer)
        otherFire.sendCompleted()
        otherInput.send(value: 1)
        #expect(completedByTrigger.events == [.completed])
    }

    @Test func takeUntilIgnoresATriggerThatIsInterrupted() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let (trigger, fire) = Signal<(), Never>.pipe()
        let recorder = Recorder<Int, Never>()
        signal.take(until: trigger).observe(recorder.observer)
        fire.sendInterrupted()
        input.send(value: 1)
        #expect(recorder.values == [1])
    }

    @Test func takeUntilOnProducers() {
        let (trigger, fire) = Signal<(), Never>.pipe()
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        SignalProducer(signal).take(until: trigger).start(recorder.observer)
        input.send(value: 1)
        fire.send(value: ())
        input.send(value: 2)
        #expect(recorder.events == [.value(1), .completed])

        let immediate = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...3).take(until: SignalProducer<(), Never>(value: ())).start(immediate.observer)
        #expect(immediate.events == [.completed])
    }

    @Test func takeDuringCompletesWhenTheLifetimeEnds() {
        let (signal, input) = Signal<Int, Never>.pipe()
        var token: Lifetime.Token? = Lifetime.Token()
        let lifetime = Lifetime(token!)
        let recorder = Recorder<Int, Never>()
        signal.take(during: lifetime).observe(recorder.observer)
        input.send(value: 1)
        token = nil
        input.send(value: 2)
        #expect(recorder.events == [.value(1), .completed])

        let ended = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...3).take(during: .empty).start(ended.observer)
        #expect(ended.events == [.completed])
        let signalEnded = Recorder<Int, Never>()
        signal.take(during: .empty).observe(signalEnded.observer)
        #expect(signalEnded.events == [.interrupted])
    }
}

@Suite("skip")
struct SkipTests {
    @Test func skipFirstDropsCountValues() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>(1...5).skip(first: 2).start(recorder.observer)
        #expect(recorder.events == [.value(3), .value(4), .value(5), .completed])
        let (signal, input) = Signal<Int, Never>.pipe()
        let none = Recorder<Int, Never>()
        signal.skip(first: 0).skip(first: 1).observe(none.observer)
        input.send(value: 1)
        input.send(value: 2)
        #expect(none.values == [2])
    }

    @Test func skipRepeatsDropsConsecutiveEquals() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 1, 2, 2, 2, 1, 3, 3]).skipRepeats().start(recorder.observer)
        #expect(recorder.values == [1, 2, 1, 3])
        let (signal, input) = Signal<String, Never>.pipe()
        let custom = Recorder<String, Never>()
        signal.skipRepeats { $0.lowercased() == $1.lowercased() }.observe(custom.observer)
        for word in ["a", "A", "b", "B", "a"] { input.send(value: word) }
        #expect(custom.values == ["a", "b", "a"])
        let producerCustom = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 3, 5, 6]).skipRepeats { $0 % 2 == $1 % 2 }.start(producerCustom.observer)
        #expect(producerCustom.values == [1, 6])
    }

    @Test func skipRepeatsOnSignalSharesOneStateForAllObservers() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let deduplicated = signal.skipRepeats()
        let early = Recorder<Int, Never>()
        deduplicated.observe(early.observer)
        input.send(value: 1)
        let late = Recorder<Int, Never>()
        deduplicated.observe(late.observer)
        input.send(value: 1)
        input.send(value: 2)
        #expect(early.values == [1, 2])
        #expect(late.values == [2])
    }

    /// Regression: `take(first: 0)` on a producer completed (and ReactiveSwift interrupts,
    /// without starting the producer).
    @Test func producerTakeFirstZeroInterruptsWithoutStarting() {
        let started = Box(false)
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never> { _, _ in started.value = true }.take(first: 0).start(recorder.observer)
        #expect(recorder.events == [.interrupted])
        #expect(!started.value)
    }
}

import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Records every event it receives.
final class Recorder<Value, Error: Swift.Error>: @unchecked Sendable {
    private let lock = _Lock.make()
    private var _events: [Signal<Value, Error>.Event] = []
    var events: [Signal<Value, Error>.Event] { lock.withLock { _events } }
    var values: [Value] { events.compactMap(\.value) }
    var terminal: Signal<Value, Error>.Event? { events.last.flatMap { $0.isTerminating ? $0 : nil } }
    var observer: Signal<Value, Error>.Observer {
        Signal.Observer { [self] event in lock.withLock { _events.append(event) } }
    }
}

@Suite("SignalProducer")
struct SignalProducerTests {
    /// A producer is its run closure and one word saying what else is known of it (a concat
    /// chain, a property's source): three words, copied by every operator.
    @Test func aProducerIsThreeWords() {
        #expect(MemoryLayout<SignalProducer<Int, Never>>.size == 3 * MemoryLayout<Int>.size)
        #expect(MemoryLayout<SignalProducer<String, TestError>>.size == 3 * MemoryLayout<Int>.size)
    }

    @Test func everyStartRunsTheStartHandlerAnew() {
        let starts = Box(0)
        let producer = SignalProducer<Int, Never> { observer, _ in
            starts.modify { $0 += 1 }
            observer.send(value: starts.value)
            observer.sendCompleted()
        }
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        producer.start(first.observer)
        producer.start(second.observer)
        #expect(starts.value == 2)
        #expect(first.events == [.value(1), .completed])
        #expect(second.events == [.value(2), .completed])
    }

    @Test func initializersSendTheirValues() {
        let value = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(value: 3).start(value.observer)
        #expect(value.events == [.value(3), .completed])

        let error = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(error: TestError(code: 2)).start(error.observer)
        #expect(error.events == [.failed(TestError(code: 2))])

        let success = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(result: .success(4)).start(success.observer)
        #expect(success.events == [.value(4), .completed])

        let failure = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(result: .failure(TestError(code: 5))).start(failure.observer)
        #expect(failure.events == [.failed(TestError(code: 5))])

        let sequence = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 3]).start(sequence.observer)
        #expect(sequence.events == [.value(1), .value(2), .value(3), .completed])

        let variadic = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(values: 7, 8, 9).start(variadic.observer)
        #expect(variadic.events == [.value(7), .value(8), .value(9), .completed])

        let lazy = Recorder<Int, Never>()
        let calls = Box(0)
        let producer = SignalProducer<Int, Never> { () -> Int in
            calls.modify { $0 += 1 }
            return 10
        }
        #expect(calls.value == 0)
        producer.start(lazy.observer)
        #expect(lazy.events == [.value(10), .completed])

        let resultAction = Recorder<Int, TestError>()
        SignalProducer<Int, TestError> { () -> Result<Int, TestError> in .failure(TestError(code: 1)) }
            .start(resultAction.observer)
        #expect(resultAction.events == [.failed(TestError(code: 1))])

        let throwing = Recorder<Int, any Swift.Error>()
        SignalProducer<Int, any Swift.Error> { () throws -> Int in throw TestError(code: 9) }.start(throwing.observer)
        #expect((throwing.events.first?.error as? TestError) == TestError(code: 9))

        let empty = Recorder<Int, Never>()
        SignalProducer<Int, Never>.empty.start(empty.observer)
        #expect(empty.events == [.completed])
    }

    @Test func neverSendsNothingUntilDisposedThenInterrupts() {
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer<Int, Never>.never.start(recorder.observer)
        #expect(recorder.events.isEmpty)
        disposable.dispose()
        #expect(recorder.events == [.interrupted])
    }

    @Test func disposingARunInterruptsItAndEndsItsLifetime() {
        let ended = Box(false)
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, lifetime in
            input.value = observer
            lifetime.observeEnded { ended.value = true }
        }
        let recorder = Recorder<Int, Never>()
        let disposable = producer.start(recorder.observer)
        input.value?.send(value: 1)
        disposable.dispose()
        input.value?.send(value: 2)
        #expect(recorder.events == [.value(1), .interrupted])
        #expect(ended.value)
    }

    @Test func droppingTheDisposableDoesNotStopTheRun() {
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let recorder = Recorder<Int, Never>()
        do {
            SignalProducer<Int, Never> { observer, _ in input.value = observer }.start(recorder.observer)
        }
        input.value?.send(value: 1)
        #expect(recorder.values == [1])
    }

    @Test func disposingInsideAValueStopsASequenceProducer() {
        let recorder = Recorder<Int, Never>()
        let sent = Box(0)
        SignalProducer<Int, Never>(1...1_000)
            .on(value: { _ in sent.modify { $0 += 1 } })
            .startWithSignal { signal, disposable in
                signal.observe(recorder.observer)
                signal.observeValues { value in if value == 3 { disposable.dispose() } }
            }
        // The run is synchronous: it ended before `startWithSignal` returned, at the third value.
        #expect(recorder.events == [.value(1), .value(2), .value(3), .interrupted])
        #expect(sent.value == 3)
    }

    @Test func startVariantsSeeTheirEvents() {
        var results: [Result<Int, TestError>] = []
        SignalProducer<Int, TestError>(values: 1, 2).startWithResult { results.append($0) }
        SignalProducer<Int, TestError>(error: TestError(code: 3)).startWithResult { results.append($0) }
        #expect(results == [.success(1), .success(2), .failure(TestError(code: 3))])

        var completed = 0
        SignalProducer<Int, TestError>(value: 1).startWithCompleted { completed += 1 }
        #expect(completed == 1)

        var failed: [TestError] = []
        SignalProducer<Int, TestError>(error: TestError(code: 4)).startWithFailed { failed.append($0) }
        #expect(failed == [TestError(code: 4)])

        var interrupted = 0
        SignalProducer<Int, Never>.never.startWithInterrupted { interrupted += 1 }.dispose()
        #expect(interrupted == 1)

        var values: [Int] = []
        SignalProducer<Int, Never>([5, 6]).startWithValues { values.append($0) }
        #expect(values == [5, 6])

        var actions: [Signal<Int, Never>.Event] = []
        SignalProducer<Int, Never>(value: 8).start { actions.append($0) }
        #expect(actions == [.value(8), .completed])
    }

    /// Each convenience start sees only its kind of event, and nothing after the run's
    /// terminal event, even from a producer that keeps sending.
    @Test func startVariantsSeeOnlyTheirEventsAndNothingAfterTheTerminalOne() {
        let completing = SignalProducer<Int, TestError>._synchronous { observer, _ in
            observer.send(value: 1)
            observer.sendCompleted()
            observer.send(value: 2)
            observer.send(error: TestError(code: 9))
            observer.sendInterrupted()
        }
        let failing = SignalProducer<Int, TestError>._synchronous { observer, _ in
            observer.send(value: 1)
            observer.send(error: TestError(code: 5))
            observer.send(value: 2)
            observer.sendCompleted()
        }
        let failure = TestError(code: 5)
        for (producer, fails) in [(completing, false), (failing, true)] {
            var results: [Result<Int, TestError>] = []
            producer.startWithResult { results.append($0) }
            var completed = 0
            producer.startWithCompleted { completed += 1 }
            var failed: [TestError] = []
            producer.startWithFailed { failed.append($0) }
            var interrupted = 0
            producer.startWithInterrupted { interrupted += 1 }
            var events: [Signal<Int, TestError>.Event] = []
            producer.start { events.append($0) }
            var observed: [Signal<Int, TestError>.Event] = []
            producer.start(
                Signal.Observer(value: { observed.append(.value($0)) }, failed: { observed.append(.failed($0)) }))
            #expect(results == (fails ? [.success(1), .failure(failure)] : [.success(1)]))
            #expect(completed == (fails ? 0 : 1))
            #expect(failed == (fails ? [failure] : []))
            #expect(interrupted == 0)
            #expect(events == [.value(1), fails ? .failed(failure) : .completed])
            #expect(observed == (fails ? [.value(1), .failed(failure)] : [.value(1)]))
        }
        var values: [Int] = []
        SignalProducer<Int, Never>._synchronous { observer, _ in
            observer.send(value: 1)
            observer.sendCompleted()
            observer.send(value: 2)
        }.startWithValues { values.append($0) }
        #expect(values == [1])
    }

    /// A start disposed from inside its own value callback sees nothing more but, for the
    /// start that receives every event, `interrupted`.
    @Test func startsDisposedFromTheirValueCallbackSeeNothingMore() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let producer = SignalProducer(signal)
        var results: [Result<Int, TestError>] = []
        var resultsRun: (any Disposable)?
        resultsRun = producer.startWithResult { result in
            results.append(result)
            if results.count == 2 { resultsRun?.dispose() }
        }
        var events: [Signal<Int, TestError>.Event] = []
        var eventsRun: (any Disposable)?
        eventsRun = producer.start { event in
            events.append(event)
            if events.count == 2 { eventsRun?.dispose() }
        }
        var values: [Int] = []
        var valuesRun: (any Disposable)?
        valuesRun = producer.flatMapError { _ in .empty }.startWithValues { value in
            values.append(value)
            if values.count == 2 { valuesRun?.dispose() }
        }
        for value in 1...4 { input.send(value: value) }
        input.send(error: TestError(code: 1))
        #expect(results == [.success(1), .success(2)])
        #expect(events == [.value(1), .value(2), .interrupted])
        #expect(values == [1, 2])
    }

    /// A run started with a signal's input holds that input until the run ends: the signal is
    /// interrupted when the run is disposed, not when the caller lets go of the input.
    @Test func aRunHoldsTheSignalInputItWasStartedWith() {
        let recorder = Recorder<Int, Never>()
        var disposable: (any Disposable)?
        do {
            let (signal, input) = Signal<Int, Never>.pipe()
            signal.observe(recorder.observer)
            disposable = SignalProducer<Int, Never>.never.start(input)
        }
        #expect(recorder.events.isEmpty)
        disposable?.dispose()
        #expect(recorder.events == [.interrupted])
    }

    @Test func startWithSignalLetsObserversAttachBeforeTheRunStarts() {
        let recorder = Recorder<Int, Never>()
        let result = SignalProducer<Int, Never>([1, 2]).startWithSignal { signal, _ -> String in
            signal.observe(recorder.observer)
            return "set up"
        }
        #expect(result == "set up")
        #expect(recorder.events == [.value(1), .value(2), .completed])
    }

    @Test func startWithSignalInterruptHandleDeliversInterruptedAndEndsTheRun() {
        let ended = Box(false)
        let recorder = Recorder<Int, Never>()
        let handle = SignalProducer<Int, Never> { _, lifetime in
            lifetime.observeEnded { ended.value = true }
        }.startWithSignal { signal, handle -> any Disposable in
            signal.observe(recorder.observer)
            return handle
        }
        #expect(recorder.events.isEmpty)
        #expect(!ended.value)
        handle.dispose()
        #expect(recorder.events == [.interrupted])
        #expect(ended.value)
    }

    /// Regression: disposing the interrupt handle inside `setup` still ran the start handler.
    @Test func startWithSignalHandleDisposedInSetupNeverRunsTheStartHandler() {
        let started = Box(false)
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never> { _, _ in started.value = true }
            .startWithSignal { signal, disposable in
                signal.observe(recorder.observer)
                disposable.dispose()
            }
        #expect(recorder.events == [.interrupted])
        #expect(!started.value)
    }

    @Test func producerFromSignalForwardsFromTheStart() {
        let (signal, input) = Signal<Int, Never>.pipe()
        input.send(value: 0)
        let recorder = Recorder<Int, Never>()
        SignalProducer(signal).start(recorder.observer)
        input.send(value: 1)
        input.sendCompleted()
        #expect(recorder.events == [.value(1), .completed])
        let late = Recorder<Int, Never>()
        signal.producer.start(late.observer)
        #expect(late.events == [.interrupted])
    }

    @Test func liftAppliesASignalOperatorToEachRun() {
        let lifted = SignalProducer<Int, Never>([1, 2, 3]).lift { $0.map { $0 * 10 } }
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        lifted.start(first.observer)
        lifted.start(second.observer)
        #expect(first.events == [.value(10), .value(20), .value(30), .completed])
        #expect(second.events == first.events)

        // As in ReactiveSwift, the argument's run starts first, then this producer's.
        let combined = SignalProducer<Int, Never>([1, 2]).lift(Signal.combineLatest(with:))(SignalProducer([7]))
        let pairs = Recorder<(Int, Int), Never>()
        combined.start(pairs.observer)
        #expect(pairs.values.map { [$0.0, $0.1] } == [[1, 7], [2, 7]])
    }

    @Test func resultAndConvertiblesProduce() {
        let recorder = Recorder<Int, TestError>()
        Result<Int, TestError>.success(1).producer.start(recorder.observer)
        SignalProducer(SignalProducer<Int, TestError>(value: 2)).start(recorder.observer)
        #expect(recorder.values == [1, 2])
    }

    @Test func concurrentSendsIntoAStartHandlerAreSerialized() {
        let recorder = Recorder<Int, Never>()
        let inputs = Box<Signal<Int, Never>.Observer?>(nil)
        SignalProducer<Int, Never> { observer, _ in inputs.value = observer }.start(recorder.observer)
        let input = inputs.value!
        DispatchQueueShim.concurrentPerform(iterations: 4) { thread in
            for value in 0..<1000 { input.send(value: thread * 1000 + value) }
        }
        input.sendCompleted()
        #expect(recorder.values.count == 4000)
        #expect(recorder.terminal == .completed)
    }

    /// Regression: a producer whose start handler keeps nothing was interrupted right after it
    /// started, even with its disposable held.
    @Test func runWhoseStartHandlerKeepsNothingStaysAliveUntilDisposed() {
        let ended = Box(false)
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer<Int, Never> { _, lifetime in
            lifetime.observeEnded { ended.value = true }
        }.start(recorder.observer)
        #expect(recorder.events.isEmpty)
        #expect(!ended.value)
        disposable.dispose()
        #expect(recorder.events == [.interrupted])
        #expect(ended.value)
    }

    @Test func runStaysAliveWhenBothItsObserverAndDisposableAreDropped() {
        let lifetime = Box<Lifetime?>(nil)
        let recorder = Recorder<Int, Never>()
        do {
            SignalProducer<Int, Never> { _, runLifetime in lifetime.value = runLifetime }.start(recorder.observer)
        }
        #expect(lifetime.value?.hasEnded == false)
        #expect(recorder.events.isEmpty)
    }

    @Test func disposablesAddedToTheRunsLifetimeAreDisposedWithTheStartDisposable() {
        let resource = AnyDisposable()
        let cleanedUp = Box(false)
        let disposable = SignalProducer<Int, Never> { _, lifetime in
            lifetime += resource
            lifetime.observeEnded { cleanedUp.value = true }
        }.start()
        #expect(!resource.isDisposed)
        disposable.dispose()
        #expect(resource.isDisposed)
        #expect(cleanedUp.value)
    }

    @Test func runIsReleasedOnceItTerminates() {
        weak var weakResource: AnyDisposable?
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        do {
            let resource = AnyDisposable()
            weakResource = resource
            SignalProducer<Int, Never> { observer, lifetime in
                lifetime += resource
                input.value = observer
            }.start()
        }
        #expect(weakResource != nil)
        input.value?.sendCompleted()
        input.value = nil
        #expect(weakResource == nil)
    }
}

@Suite("startWithSignal's interrupt handle")
struct StartWithSignalHandleTests {
    @Test("Disposing the handle ends the run: observe(on:) interrupts on its scheduler, not inside dispose()")
    func handleEndsRunOfSchedulingOperator() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        var handle: (any Disposable)?
        SignalProducer(0..<16).observe(on: scheduler).startWithSignal { signal, interrupter in
            signal.observe(recorder.observer)
            handle = interrupter
        }
        recorder.during { handle?.dispose() }
        #expect(recorder.events.isEmpty)
        scheduler.run()
        #expect(recorder.names == ["interrupted"])
    }

    @Test("Disposing the handle disposes the producer's resources")
    func handleDisposesRun() {
        var ended = false
        var handle: (any Disposable)?
        SignalProducer<Int, Never> { _, lifetime in lifetime.observeEnded { ended = true } }
            .map { $0 + 1 }
            .startWithSignal { signal, interrupter in
                signal.observe { _ in }
                handle = interrupter
            }
        #expect(!ended)
        handle?.dispose()
        #expect(ended)
    }

    @Test("A plain producer's run is interrupted at once by the handle")
    func handleInterruptsPlainRunAtOnce() {
        let recorder = DisposalRecorder<Int, Never>()
        SignalProducer<Int, Never>.never.startWithSignal { signal, interrupter in
            signal.observe(recorder.observer)
            interrupter.dispose()
        }
        #expect(recorder.names == ["interrupted"])
    }

    @Test("A handle disposed in setup interrupts the signal and never starts the run")
    func handleDisposedInSetup() {
        var started = false
        let recorder = DisposalRecorder<Int, Never>()
        SignalProducer<Int, Never> { _, _ in started = true }.observe(on: TestScheduler())
            .startWithSignal { signal, interrupter in
                signal.observe(recorder.observer)
                interrupter.dispose()
            }
        #expect(!started)
        #expect(recorder.names == ["interrupted"])
    }
}

@Suite("A run's disposable does not keep its observer")
struct RunReleasesObserverTests {
    private final class Token {}

    @Test("Disposing a never-ending run releases the observer while the disposable is still held")
    func disposedRunReleasesObserver() {
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer<Int, Never>.never.startWithValues { _ in _ = token }
        }()
        #expect(weakToken != nil)
        disposable.dispose()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }

    @Test("A run that completed by itself releases the observer while the disposable is still held")
    func completedRunReleasesObserver() {
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer(value: 1).startWithValues { _ in _ = token }
        }()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }

    @Test("A disposed run of a scheduling operator releases the observer once interrupted is delivered")
    func scheduledRunReleasesObserverAfterInterrupted() {
        let scheduler = TestScheduler()
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer<Int, Never>.never.observe(on: scheduler).startWithValues { _ in _ = token }
        }()
        disposable.dispose()
        scheduler.run()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }
}

/// Each scenario runs in a child process of its own (an exit test): what it checks is when
/// tasks get to run, and in this process every other test competes for the same executor.

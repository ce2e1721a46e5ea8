import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("flatten and flatMap")
struct FlattenTests {
    typealias Inner = (signal: Signal<Int, TestError>, input: Signal<Int, TestError>.Observer)

    func inners(_ count: Int) -> [Inner] {
        (0..<count).map { _ in
            let (signal, input) = Signal<Int, TestError>.pipe()
            return (signal, input)
        }
    }

    @Test func mergeRunsEveryInnerAndCompletesWhenAllHave() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(.merge).observe(recorder.observer)
        let pipes = inners(2)
        outerInput.send(value: SignalProducer(pipes[0].signal))
        outerInput.send(value: SignalProducer(pipes[1].signal))
        pipes[0].input.send(value: 1)
        pipes[1].input.send(value: 2)
        pipes[0].input.send(value: 3)
        outerInput.sendCompleted()
        pipes[0].input.sendCompleted()
        #expect(recorder.terminal == nil)
        pipes[1].input.sendCompleted()
        #expect(recorder.events == [.value(1), .value(2), .value(3), .completed])
    }

    @Test func concatRunsInnersOneAfterAnother() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(.concat).observe(recorder.observer)
        let pipes = inners(2)
        let secondStarted = Box(false)
        outerInput.send(value: SignalProducer(pipes[0].signal))
        outerInput.send(value: SignalProducer(pipes[1].signal).on(starting: { secondStarted.value = true }))
        pipes[1].input.send(value: 99)  // Not started yet: lost, as for any hot signal.
        pipes[0].input.send(value: 1)
        #expect(!secondStarted.value)
        pipes[0].input.sendCompleted()
        #expect(secondStarted.value)
        pipes[1].input.send(value: 2)
        pipes[1].input.sendCompleted()
        outerInput.sendCompleted()
        #expect(recorder.events == [.value(1), .value(2), .completed])
    }

    @Test func concurrentLimitQueuesTheRest() {
        let recorder = Recorder<Int, TestError>()
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        outer.flatten(.concurrent(limit: 2)).observe(recorder.observer)
        let pipes = inners(3)
        let started = Box<[Int]>([])
        for (index, pipe) in pipes.enumerated() {
            outerInput.send(value: SignalProducer(pipe.signal).on(starting: { started.modify { $0.append(index) } }))
        }
        #expect(started.value == [0, 1])
        pipes[1].input.sendCompleted()
        #expect(started.value == [0, 1, 2])
    }

    @Test func latestDisposesTheReplacedInner() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(.latest).observe(recorder.observer)
        let pipes = inners(2)
        let firstDisposed = Box(false)
        outerInput.send(value: SignalProducer(pipes[0].signal).on(disposed: { firstDisposed.value = true }))
        pipes[0].input.send(value: 1)
        outerInput.send(value: SignalProducer(pipes[1].signal))
        #expect(firstDisposed.value)
        pipes[0].input.send(value: 2)
        pipes[0].input.sendInterrupted()
        pipes[1].input.send(value: 3)
        outerInput.sendCompleted()
        #expect(recorder.terminal == nil)
        pipes[1].input.sendCompleted()
        #expect(recorder.events == [.value(1), .value(3), .completed])
    }

    @Test func raceKeepsTheFirstInnerToSend() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(.race).observe(recorder.observer)
        let pipes = inners(3)
        let loserDisposed = Box(false)
        outerInput.send(value: SignalProducer(pipes[0].signal).on(disposed: { loserDisposed.value = true }))
        outerInput.send(value: SignalProducer(pipes[1].signal))
        pipes[1].input.send(value: 1)
        #expect(loserDisposed.value)
        pipes[0].input.send(value: 2)
        outerInput.send(value: SignalProducer(pipes[2].signal))
        pipes[2].input.send(value: 3)
        pipes[1].input.send(value: 4)
        #expect(recorder.values == [1, 4])
    }

    @Test func throttleDropsInnersArrivingWhileOneRuns() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(.throttle).observe(recorder.observer)
        let pipes = inners(3)
        for pipe in pipes.prefix(2) { outerInput.send(value: SignalProducer(pipe.signal)) }
        pipes[1].input.send(value: 9)
        pipes[0].input.send(value: 1)
        pipes[0].input.sendCompleted()
        outerInput.send(value: SignalProducer(pipes[2].signal))
        pipes[2].input.send(value: 2)
        #expect(recorder.values == [1, 2])
    }

    @Test(arguments: [FlattenStrategy.merge, .concat, .latest])
    func anInnerFailureFailsTheWhole(strategy: FlattenStrategy) {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        outer.flatten(strategy).observe(recorder.observer)
        outerInput.send(value: SignalProducer(error: TestError(code: 3)))
        outerInput.send(value: SignalProducer(value: 1))
        #expect(recorder.events == [.failed(TestError(code: 3))])
    }

    @Test(arguments: [FlattenStrategy.merge, .concat, .latest])
    func interruptingTheOuterInterruptsTheInners(strategy: FlattenStrategy) {
        let innerInterrupted = Box(false)
        let recorder = Recorder<Int, TestError>()
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let disposable = SignalProducer(outer).flatten(strategy).start(recorder.observer)
        outerInput.send(value: SignalProducer.never.on(interrupted: { innerInterrupted.value = true }))
        disposable.dispose()
        #expect(innerInterrupted.value)
        #expect(recorder.events == [.interrupted])
    }

    @Test func outerFailureFailsTheWholeAndInterruptionOfAnInnerInterruptsIt() {
        let (outer, outerInput) = Signal<SignalProducer<Int, TestError>, TestError>.pipe()
        let failed = Recorder<Int, TestError>()
        outer.flatten(.merge).observe(failed.observer)
        outerInput.send(error: TestError(code: 1))
        #expect(failed.events == [.failed(TestError(code: 1))])

        let interrupted = Recorder<Int, TestError>()
        SignalProducer<SignalProducer<Int, TestError>, TestError>(
            value: SignalProducer { observer, _ in
                observer.sendInterrupted()
            }
        ).flatten(.merge).start(interrupted.observer)
        #expect(interrupted.events == [.interrupted])
    }

    @Test func flatMapOverloadsPromoteErrors() {
        let never = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2]).flatMap(.concat) { SignalProducer<Int, Never>([$0, $0 * 10]) }
            .start(never.observer)
        #expect(never.values == [1, 10, 2, 20])

        let innerFails = Recorder<Int, TestError>()
        SignalProducer<Int, Never>([1]).flatMap(.merge) { _ in SignalProducer<Int, TestError>(error: TestError()) }
            .start(innerFails.observer)
        #expect(innerFails.events == [.failed(TestError())])

        let outerFails = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>([1]).flatMap(.latest) { SignalProducer<Int, Never>(value: $0 + 1) }
            .start(outerFails.observer)
        #expect(outerFails.events == [.value(2), .completed])

        let viaProperty = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>([1]).flatMap(.merge) { Property(value: $0 * 3) }.start(viaProperty.observer)
        #expect(viaProperty.values == [3])

        let (signal, input) = Signal<Int, Never>.pipe()
        let fromSignal = Recorder<String, TestError>()
        signal.flatMap(.merge) { SignalProducer<String, TestError>(value: "\($0)") }.observe(fromSignal.observer)
        let neverFromSignal = Recorder<Int, Never>()
        signal.flatMap(.concat) { SignalProducer<Int, Never>(value: -$0) }.observe(neverFromSignal.observer)
        let (failing, failingInput) = Signal<Int, TestError>.pipe()
        let promotedInner = Recorder<Int, TestError>()
        failing.flatMap(.merge) { SignalProducer<Int, Never>(value: $0) }.observe(promotedInner.observer)
        input.send(value: 4)
        failingInput.send(value: 5)
        #expect(fromSignal.values == ["4"])
        #expect(neverFromSignal.values == [-4])
        #expect(promotedInner.values == [5])
    }

    @Test func producerFlattenStartedTwiceRunsIndependently() {
        let producer = SignalProducer<SignalProducer<Int, Never>, Never>([SignalProducer([1, 2]), SignalProducer([3])])
            .flatten(.concat)
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        producer.start(first.observer)
        producer.start(second.observer)
        #expect(first.events == [.value(1), .value(2), .value(3), .completed])
        #expect(second.events == first.events)
    }

    /// An inner admitted while another is starting waits for that start to return; if the
    /// whole run is disposed meanwhile, it is never started: its start handler does not run.
    @Test func anInnerDisposedWhileWaitingToStartIsNeverStarted() {
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let (first, firstInput) = Signal<Int, Never>.pipe()
        let started = Box<[Int]>([])
        let run = Box<(any Disposable)?>(nil)
        run.value = outer.producer.flatMap(.concat) { number -> SignalProducer<Int, Never> in
            if number == 1 { return SignalProducer(first) }
            return SignalProducer { observer, _ in
                started.modify { $0.append(number) }
                observer.send(value: number)
                // Completing admits 3, which waits for this start to return; then the whole
                // run is disposed.
                observer.sendCompleted()
                if number == 2 { run.value?.dispose() }
            }
        }.start()
        outerInput.send(value: 1)
        outerInput.send(value: 2)
        outerInput.send(value: 3)
        firstInput.sendCompleted()
        #expect(started.value == [2])
    }

    /// Inner runs started from two threads at once (each thread's inners finishing
    /// synchronously) all run, and each delivers all of its values.
    @Test func innerRunsStartedFromTwoThreadsAtOnceAllRun() {
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let total = Box(0)
        let completed = Box(false)
        outer.producer.flatMap(.merge) { value in SignalProducer<Int, Never>([value, value]) }
            .start { event in
                switch event {
                case let .value(value): total.modify { $0 += value }
                case .completed: completed.value = true
                default: break
                }
            }
        let perThread = 2_000
        DispatchQueueShim.concurrentPerform(iterations: 2) { _ in
            for value in 1...perThread { outerInput.send(value: value) }
        }
        outerInput.sendCompleted()
        #expect(total.value == 2 * 2 * (perThread * (perThread + 1) / 2))
        #expect(completed.value)
    }
}

@Suite("concat and prefix")
struct ConcatTests {
    @Test func concatAndPrefixForms() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(value: 2).prefix(value: 1).concat(value: 3).concat(SignalProducer(value: 4))
            .prefix(SignalProducer(value: 0)).start(recorder.observer)
        #expect(recorder.events == [.value(0), .value(1), .value(2), .value(3), .value(4), .completed])
        let failing = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 2)).concat(value: 3)
            .start(failing.observer)
        #expect(failing.events == [.value(1), .failed(TestError(code: 2))])
        let convertible = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(value: 1).concat(Result<Int, TestError>.success(2))
            .prefix(Result<Int, TestError>.success(0)).start(convertible.observer)
        #expect(convertible.values == [0, 1, 2])
    }

    /// Regression: inner runs whose start handler kept nothing were interrupted when the
    /// outer stream completed (every strategy).
    @Test(arguments: FlattenStrategy.allForTests)
    func outerCompletionDoesNotDisposePendingInners(_ strategy: FlattenStrategy) {
        let innerEnded = Box(0)
        let inner = SignalProducer<Int, Never> { _, lifetime in
            lifetime.observeEnded { innerEnded.modify { $0 += 1 } }
        }
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer<SignalProducer<Int, Never>, Never>(value: inner)
            .flatten(strategy).start(recorder.observer)
        #expect(innerEnded.value == 0, "\(strategy)")
        #expect(recorder.events.isEmpty, "\(strategy)")
        disposable.dispose()
        #expect(innerEnded.value == 1, "\(strategy): disposing the flatten run cancels inner work")
        #expect(recorder.events == [.interrupted], "\(strategy)")
    }

    @Test(arguments: FlattenStrategy.allForTests)
    func signalFlattenKeepsInnersAfterTheOuterCompletes(_ strategy: FlattenStrategy) {
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let inner = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        outer.flatten(strategy).observe(recorder.observer)
        outerInput.send(value: inner)
        outerInput.sendCompleted()
        input.value?.send(value: 7)
        input.value?.sendCompleted()
        #expect(recorder.events == [.value(7), .completed], "\(strategy)")
    }
}

extension FlattenTests {
    /// `producer`, which ends inside its start, or (`immediate: false`) the same producer
    /// behind an operator, which makes it an ordinary inner for a flatten.
    static func immediate<Error>(
        _ producer: SignalProducer<Int, Error>, _ immediate: Bool
    ) -> SignalProducer<Int, Error> {
        #expect(producer._isImmediate)
        let made = immediate ? producer : producer.map { $0 }
        #expect(made._isImmediate == immediate)
        return made
    }

    /// Inners that end inside their start (`SignalProducer(value:)`, of a sequence, of an
    /// error) are started with an observer the flatten reuses: they deliver exactly what the
    /// same inners behind an operator (which makes them ordinary) deliver.
    ///
    /// A first inner (a pipe's, not immediate) holds the others back under `.concat` and
    /// `.concurrent`, so that they start from the flatten's own loop when it completes,
    /// outside any delivery of the outer stream: the outer values sent from inside their
    /// deliveries then reach the flatten at once, while an immediate inner is running, and one
    /// of those inners fails.
    @Test(arguments: FlattenStrategy.allForTests)
    func immediateInnersDeliverWhatAnyInnerDoes(_ strategy: FlattenStrategy) {
        func events(immediate: Bool) -> [Signal<Int, TestError>.Event] {
            let (gate, gateInput) = Signal<Int, TestError>.pipe()
            func inner(_ value: Int) -> SignalProducer<Int, TestError> {
                if value == 0 { return SignalProducer(gate) }
                let producer =
                    value == 3
                    ? SignalProducer<Int, TestError>(error: TestError(code: 3))
                    : SignalProducer<Int, TestError>([value, value + 100])
                return Self.immediate(producer, immediate)
            }
            let (outer, outerInput) = Signal<Int, TestError>.pipe()
            let recorder = Recorder<Int, TestError>()
            outer.flatMap(strategy, inner).observe { event in
                recorder.observer.send(event)
                if case .value(1) = event { outerInput.send(value: 2) }
                if case .value(102) = event { outerInput.send(value: 4) }
                if case .value(4) = event { outerInput.send(value: 3) }
            }
            outerInput.send(value: 0)
            outerInput.send(value: 1)
            outerInput.send(value: 5)
            gateInput.send(value: 7)
            gateInput.sendCompleted()
            outerInput.send(value: 6)
            outerInput.sendCompleted()
            return recorder.events
        }
        let expected = events(immediate: false)
        #expect(events(immediate: true) == expected, "\(strategy)")
        // The script reaches the inner sent from inside another's delivery (all but `.race`
        // and `.throttle`, which drop inners while one runs).
        #expect(expected.contains(.value(4)) || strategy.kind == .race || strategy.kind == .throttle, "\(strategy)")
    }

    /// Immediate parts of `concat`, `prefix` and `then` chains (which run as `flatten(.concat)`)
    /// deliver what ordinary parts do.
    @Test func immediatePartsOfChains() {
        func events(immediate: Bool) -> [Signal<Int, TestError>.Event] {
            func part(_ values: [Int]) -> SignalProducer<Int, TestError> {
                Self.immediate(SignalProducer(values), immediate)
            }
            let failing =
                immediate
                ? SignalProducer<Int, TestError>(error: TestError(code: 9))
                : SignalProducer<Int, TestError>(error: TestError(code: 9)).map { $0 }
            let recorder = Recorder<Int, TestError>()
            part([1, 2]).concat(part([3])).prefix(part([0])).concat(part([4, 5]).then(part([6])))
                .concat(failing).concat(part([7]))
                .start(recorder.observer)
            return recorder.events
        }
        let expected = events(immediate: false)
        #expect(expected == [.value(0), .value(1), .value(2), .value(3), .value(6), .failed(TestError(code: 9))])
        #expect(events(immediate: true) == expected)
    }

    /// The same from a producer's flatten, started many times in a row: each run has its own
    /// reused observer.
    @Test(arguments: FlattenStrategy.allForTests)
    func immediateInnersOfAProducersFlattenStartedManyTimes(_ strategy: FlattenStrategy) {
        let producer = SignalProducer<Int, Never>(1...50).flatMap(strategy) { SignalProducer(value: $0 * 2) }
        let expected = SignalProducer<Int, Never>(1...50).flatMap(strategy) { SignalProducer(value: $0 * 2).map { $0 } }
        for _ in 0..<3 {
            let (got, wanted) = (Recorder<Int, Never>(), Recorder<Int, Never>())
            producer.start(got.observer)
            expected.start(wanted.observer)
            #expect(got.events == wanted.events, "\(strategy)")
        }
    }
}

extension FlattenStrategy {
    /// Every strategy, for tests that must hold for each.
    static let allForTests: [FlattenStrategy] = [.merge, .concat, .latest, .race, .throttle, .concurrent(limit: 2)]
}

/// Inners that end inside their start are admitted as one inner run that the flatten reuses
/// from one such inner to the next; these check what that reuse must not change.
extension FlattenTests {
    /// Events of a flatten whose outer values are sent from inside inners' deliveries, with
    /// inners that end inside their start or (`immediate: false`) the same inners behind an
    /// operator, for a flatten of a producer and of a signal.
    static func nestedInnerEvents(
        _ strategy: FlattenStrategy, immediate: Bool, ofSignal: Bool
    ) -> [Signal<Int, Never>.Event] {
        func inner(_ value: Int) -> SignalProducer<Int, Never> {
            Self.immediate(SignalProducer([value, value + 100]), immediate)
        }
        let recorder = Recorder<Int, Never>()
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let flattened =
            ofSignal
            ? SignalProducer(outer.flatMap(strategy, inner)) : SignalProducer(outer).flatMap(strategy, inner)
        flattened.start { event in
            recorder.observer.send(event)
            // From inside the first inner's first value, then from inside the second's.
            if case .value(1) = event { outerInput.send(value: 2) }
            if case .value(2) = event { outerInput.send(value: 3) }
            if case .value(103) = event { outerInput.send(value: 4) }
        }
        outerInput.send(value: 1)
        outerInput.send(value: 5)
        outerInput.send(value: 6)
        outerInput.sendCompleted()
        return recorder.events
    }

    @Test(arguments: FlattenStrategy.allForTests, [false, true])
    func innersSentFromInsideAnImmediateInnersDeliveryRunAsTheyWouldOtherwise(
        _ strategy: FlattenStrategy, ofSignal: Bool
    ) {
        let expected = Self.nestedInnerEvents(strategy, immediate: false, ofSignal: ofSignal)
        #expect(expected.last == .completed, "\(strategy)")
        #expect(Self.nestedInnerEvents(strategy, immediate: true, ofSignal: ofSignal) == expected, "\(strategy)")
    }
}

extension FlattenTests {
    /// Under a concurrency limit, an immediate inner that waited for a place starts when an
    /// inner completes, outside any delivery of the outer stream; from inside its first value,
    /// another inner completes and a second immediate inner comes, which takes the freed
    /// place and is admitted while the first still runs. Each delivers all its values, the
    /// first's before the second's, and the flatten completes.
    @Test(arguments: [false, true])
    func anImmediateInnerAdmittedWhileAnotherRunsDeliversAllItsValues(immediate: Bool) {
        let (first, firstInput) = Signal<Int, Never>.pipe()
        let (second, secondInput) = Signal<Int, Never>.pipe()
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        outer.flatMap(.concurrent(limit: 2)) { value -> SignalProducer<Int, Never> in
            if value == 0 { return SignalProducer(first) }
            if value == -1 { return SignalProducer(second) }
            return Self.immediate(SignalProducer([value, value + 100]), immediate)
        }
        .observe { event in
            recorder.observer.send(event)
            if case .value(1) = event {
                secondInput.sendCompleted()
                outerInput.send(value: 2)
            }
        }
        outerInput.send(value: 0)
        outerInput.send(value: -1)
        outerInput.send(value: 1)  // Waits: both places are taken.
        firstInput.sendCompleted()
        outerInput.send(value: 3)
        outerInput.sendCompleted()
        #expect(recorder.values == [1, 101, 2, 102, 3, 103])
        #expect(recorder.terminal == .completed)
    }
}

extension FlattenTests {
    /// Inners that end in any order, from the first admitted, the last and the middle, leave
    /// the flatten tracking exactly the ones still running: disposing it then ends those and
    /// no other, and a flatten whose inners all complete completes.
    @Test(arguments: [[2, 0, 4], [4, 3], [0, 1], [1, 3, 2], [0, 1, 2, 3, 4]])
    func innersEndingInAnyOrderLeaveTheRestTracked(completedFirst: [Int]) {
        let pipes = (0..<5).map { _ in Signal<Int, Never>.pipe() }
        let ended = Box<[Int]>([])
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer(outer).flatMap(.merge) { index in
            SignalProducer(pipes[index].output).on(disposed: { ended.modify { $0.append(index) } })
        }
        .start(recorder.observer)
        for index in 0..<5 { outerInput.send(value: index) }
        for index in completedFirst { pipes[index].input.sendCompleted() }
        #expect(ended.value == completedFirst)
        let rest = (0..<5).filter { !completedFirst.contains($0) }
        for index in rest { pipes[index].input.send(value: index) }
        #expect(recorder.values == rest)
        disposable.dispose()
        // The rest are disposed in the order they came.
        #expect(ended.value == completedFirst + rest)
        #expect(recorder.terminal == .interrupted)
        // A second flatten, whose inners all complete in the same order as the script's.
        let (outer2, outerInput2) = Signal<Int, Never>.pipe()
        let pipes2 = (0..<5).map { _ in Signal<Int, Never>.pipe() }
        let recorder2 = Recorder<Int, Never>()
        outer2.flatMap(.merge) { SignalProducer(pipes2[$0].output) }.observe(recorder2.observer)
        for index in 0..<5 { outerInput2.send(value: index) }
        outerInput2.sendCompleted()
        for index in completedFirst + rest {
            #expect(recorder2.terminal == nil)
            pipes2[index].input.sendCompleted()
        }
        #expect(recorder2.terminal == .completed)
    }
}

extension FlattenTests {
    /// A flatten of a producer, built as `flatten` builds it, with a look at its run.
    static func observedFlatten(
        _ strategy: FlattenStrategy, _ outer: Signal<SignalProducer<Int, Never>, Never>,
        _ flattenRun: Box<_FlattenRun<Int, Never>?>
    ) -> SignalProducer<Int, Never> {
        SignalProducer<Int, Never>._serialized { sink, lifetime in
            let run = _FlattenRun<Int, Never>(strategy, sink: sink, lifetime: lifetime)
            flattenRun.value = run
            lifetime += outer.observe { event in run.outer(event) }
        }
    }

    /// Inners that end inside their start, one after another, are all admitted as the same
    /// inner run, which is free again once each has completed; an inner behind an operator
    /// gets a run of its own and leaves it alone.
    @Test(arguments: [FlattenStrategy.merge, .concat, .latest, .throttle, .concurrent(limit: 2)])
    func immediateInnersOneAfterAnotherReuseOneInnerRun(_ strategy: FlattenStrategy) {
        let flattenRun = Box<_FlattenRun<Int, Never>?>(nil)
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        Self.observedFlatten(strategy, outer, flattenRun).start(recorder.observer)
        outerInput.send(value: SignalProducer(value: 1))
        let reused = flattenRun.value?.reusable
        #expect(reused != nil)
        for value in 2...5 {
            outerInput.send(value: SignalProducer([value, value * 10]))
            #expect(flattenRun.value?.reusable === reused)
            #expect(flattenRun.value?.reusableTaken == false)
        }
        outerInput.send(value: SignalProducer(value: 6).map { $0 })
        #expect(flattenRun.value?.reusable === reused)
        outerInput.sendCompleted()
        #expect(recorder.values == [1, 2, 20, 3, 30, 4, 40, 5, 50, 6])
        #expect(recorder.terminal == .completed)
    }

    /// A race won by the second of three running inners disposes the first and the third, in
    /// the order they came, and forwards only the winner.
    @Test func aRaceWonByAMiddleInnerDisposesTheOthersInTheOrderTheyCame() {
        let pipes = (0..<3).map { _ in Signal<Int, Never>.pipe() }
        let disposed = Box<[Int]>([])
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        outer.flatMap(.race) { index in
            SignalProducer(pipes[index].output).on(disposed: { disposed.modify { $0.append(index) } })
        }
        .observe(recorder.observer)
        for index in 0..<3 { outerInput.send(value: index) }
        pipes[1].input.send(value: 10)
        #expect(disposed.value == [0, 2])
        pipes[0].input.send(value: 1)
        pipes[2].input.send(value: 3)
        pipes[1].input.send(value: 11)
        outerInput.sendCompleted()
        pipes[1].input.sendCompleted()
        #expect(recorder.events == [.value(10), .value(11), .completed])
    }

    /// An immediate inner admitted, as the reused run, while another inner is starting waits
    /// to start; disposed meanwhile (from inside that start), it is never started.
    @Test func anImmediateInnerWaitingToStartIsNotStartedOnceTheFlattenIsDisposed() {
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let (gate, gateInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        let disposable = Box<(any Disposable)?>(nil)
        let started = Box(0)
        disposable.value = SignalProducer(outer).flatten(.concat).start(recorder.observer)
        outerInput.send(value: SignalProducer(gate))
        outerInput.send(
            value: SignalProducer { observer, _ in
                observer.sendCompleted()  // Admits the next inner, which waits for this start.
                disposable.value?.dispose()
            })
        let immediate = SignalProducer<Int, Never> { () -> Int in
            started.modify { $0 += 1 }
            return 1
        }
        #expect(immediate._isImmediate)
        outerInput.send(value: immediate)
        gateInput.sendCompleted()
        #expect(started.value == 0)
        #expect(recorder.events == [.interrupted])
    }

    /// An inner producer is let go of by the flatten once its start returns, not when the
    /// waiting queue it came from drains: a deinitializer that sends to the outer stream (here,
    /// of what the inner producer captured) runs outside the flatten's state changes, and what
    /// it sends is flattened like anything else.
    @Test func anInnerIsLetGoOfOnceStartedAndWhatItsReleaseSendsIsFlattened() {
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let (first, firstInput) = Signal<Int, Never>.pipe()
        let (second, secondInput) = Signal<Int, Never>.pipe()
        let (third, thirdInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        let released = Box(false)
        outer.flatten(.concat).observe(recorder.observer)
        outerInput.send(value: SignalProducer(first))
        do {
            let tracked = Tracked {
                released.value = true
                outerInput.send(value: SignalProducer(value: 4))
            }
            outerInput.send(
                value: SignalProducer { observer, lifetime in
                    _ = tracked
                    lifetime += second.observe(observer)
                })
        }
        outerInput.send(value: SignalProducer(third))
        firstInput.send(value: 1)
        #expect(!released.value)
        firstInput.sendCompleted()  // The second inner starts, and is let go of.
        #expect(released.value)
        secondInput.send(value: 2)
        secondInput.sendCompleted()
        thirdInput.send(value: 3)
        thirdInput.sendCompleted()
        outerInput.sendCompleted()
        #expect(recorder.events == [.value(1), .value(2), .value(3), .value(4), .completed])
    }

    /// The waiting queue of a flatten that always has inners waiting drops the slots of the
    /// inners that left it, so it stays as long as what waits, not as what ever waited.
    @Test func theWaitingQueueOfAFlattenThatNeverDrainsStaysSmall() {
        let flattenRun = Box<_FlattenRun<Int, Never>?>(nil)
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        Self.observedFlatten(.concat, outer, flattenRun).start()
        var inputs: [Signal<Int, Never>.Observer] = []
        func sendInner() {
            let (signal, input) = Signal<Int, Never>.pipe()
            inputs.append(input)
            outerInput.send(value: SignalProducer(signal))
        }
        for _ in 0..<3 { sendInner() }
        for index in 0..<10_000 {
            sendInner()
            inputs[index].sendCompleted()
        }
        let run = flattenRun.value!
        #expect(run.waiting.count - run.waitingHead == 2)
        #expect(run.waiting.count < 200)
        outerInput.sendInterrupted()
    }
}

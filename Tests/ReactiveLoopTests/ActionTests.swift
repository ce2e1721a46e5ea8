import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("Action")
struct ActionTests {
    /// The action's lifetime ends when the action goes away, and not before, even while
    /// something else still holds the lifetime.
    @Test func theLifetimeEndsWhenTheActionGoesAway() {
        let ended = Box(false)
        var action: Action<Int, Int, Never>? = Action { SignalProducer(value: $0) }
        let lifetime = action!.lifetime
        lifetime.observeEnded { ended.value = true }
        action!.apply(1).start()
        #expect(!ended.value)
        action = nil
        #expect(ended.value)
        #expect(lifetime.hasEnded)
    }

    /// As in ReactiveSwift, a kept producer of an apply keeps its action alive, and starting it
    /// later runs the work; dropping the producer lets the action go.
    @Test func aKeptApplyProducerKeepsTheActionAlive() {
        weak var weakAction: Action<Int, Int, Never>?
        let values = Recorder<Int, Never>()
        var producer: SignalProducer<Int, ActionError<Never>>?
        do {
            let action = Action<Int, Int, Never> { SignalProducer(value: $0 * 2) }
            action.values.observe(values.observer)
            weakAction = action
            producer = action.apply(4)
        }
        #expect(weakAction != nil)
        let run = Recorder<Int, ActionError<Never>>()
        producer?.start(run.observer)
        #expect(run.events == [.value(8), .completed])
        #expect(values.values == [8])
        producer = nil
        #expect(weakAction == nil)
    }

    /// An execution keeps its action alive until it terminates, as in ReactiveSwift: its
    /// events still reach the action's signals, and the action goes away after the last one.
    @Test func anExecutionKeepsItsActionAliveUntilItTerminates() {
        let (work, workInput) = Signal<Int, Never>.pipe()
        weak var weakAction: Action<Void, Int, Never>?
        let values = Recorder<Int, Never>()
        let completions = Box(0)
        let run = Recorder<Int, ActionError<Never>>()
        let isExecuting: Property<Bool>
        do {
            let action = Action<Void, Int, Never> { SignalProducer(work) }
            weakAction = action
            isExecuting = action.isExecuting
            action.values.observe(values.observer)
            action.completed.observeValues { completions.modify { $0 += 1 } }
            action.apply().start(run.observer)
        }
        #expect(weakAction != nil)
        #expect(isExecuting.value)
        workInput.send(value: 7)
        workInput.sendCompleted()
        #expect(run.events == [.value(7), .completed])
        #expect(values.values == [7])
        #expect(completions.value == 1)
        #expect(!isExecuting.value)
        #expect(weakAction == nil)
    }

    /// A run of an execution that never ends holds its action until the run is disposed.
    @Test func disposingARunThatNeverEndsLetsItsActionGo() {
        let (work, workInput) = Signal<Int, Never>.pipe()
        weak var weakAction: Action<Void, Int, Never>?
        let run: any Disposable
        do {
            let action = Action<Void, Int, Never> { SignalProducer(work) }
            weakAction = action
            run = action.apply().start()
        }
        #expect(weakAction != nil)
        run.dispose()
        #expect(weakAction == nil)
        withExtendedLifetime(workInput) {}  // The work never ends on its own.
    }

    @Test func applyRunsTheWorkAndForwardsItsEventsEverywhere() {
        let action = Action<Int, String, TestError> { input in SignalProducer(value: "\(input)") }
        let values = Recorder<String, Never>()
        let events = Recorder<Signal<String, TestError>.Event, Never>()
        let completed = Box(0)
        action.values.observe(values.observer)
        action.events.observe(events.observer)
        action.completed.observeValues { completed.modify { $0 += 1 } }
        let run = Recorder<String, ActionError<TestError>>()
        action.apply(4).start(run.observer)
        #expect(run.events == [.value("4"), .completed])
        #expect(values.values == ["4"])
        #expect(events.values == [.value("4"), .completed])
        #expect(completed.value == 1)
    }

    @Test func failuresArriveAsProducerFailedAndOnErrors() {
        let action = Action<Void, Int, TestError> { SignalProducer(error: TestError(code: 5)) }
        let errors = Recorder<TestError, Never>()
        action.errors.observe(errors.observer)
        let run = Recorder<Int, ActionError<TestError>>()
        action.apply().start(run.observer)
        #expect(run.events == [.failed(.producerFailed(TestError(code: 5)))])
        #expect(errors.values == [TestError(code: 5)])
    }

    @Test func applyingWhileExecutingFailsWithDisabled() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let action = Action<Void, Int, TestError> { SignalProducer(signal) }
        let executing = Recorder<Bool, Never>()
        action.isExecuting.producer.start(executing.observer)
        let disabledErrors = Box(0)
        action.disabledErrors.observeValues { disabledErrors.modify { $0 += 1 } }
        let first = Recorder<Int, ActionError<TestError>>()
        action.apply().start(first.observer)
        #expect(action.isExecuting.value)
        #expect(!action.isEnabled.value)
        let second = Recorder<Int, ActionError<TestError>>()
        action.apply().start(second.observer)
        #expect(second.events == [.failed(.disabled)])
        #expect(disabledErrors.value == 1)
        input.send(value: 1)
        input.sendCompleted()
        #expect(first.events == [.value(1), .completed])
        #expect(!action.isExecuting.value)
        #expect(action.isEnabled.value)
        #expect(executing.values == [false, true, false])
    }

    @Test func enabledIfAndStateDriveEnablednessAndInput() {
        let enabled = MutableProperty(false)
        let action = Action<Int, Int, Never>(enabledIf: enabled) { SignalProducer(value: $0) }
        let run = Recorder<Int, ActionError<Never>>()
        action.apply(1).start(run.observer)
        #expect(run.events.count == 1)
        #expect(!action.isEnabled.value)
        enabled.value = true
        #expect(action.isEnabled.value)
        action.apply(2).start(run.observer)
        #expect(run.values == [2])

        let state = MutableProperty(10)
        let stateful = Action<Int, Int, Never>(state: state, enabledIf: { $0 > 0 }) { state, input in
            SignalProducer(value: state + input)
        }
        let result = Recorder<Int, ActionError<Never>>()
        stateful.apply(1).start(result.observer)
        state.value = 20
        stateful.apply(2).start(result.observer)
        state.value = 0
        #expect(!stateful.isEnabled.value)
        stateful.apply(3).start(result.observer)
        #expect(result.values == [11, 22])
        #expect(result.events.last.map { "\($0)" } == "FAILED disabled")

        let plainState = Action<Int, Int, Never>(state: state) { state, input in SignalProducer(value: state - input) }
        let plain = Recorder<Int, ActionError<Never>>()
        plainState.apply(1).start(plain.observer)
        #expect(plain.values == [-1])

        let voidState = Action<Void, String, Never>(state: Property(value: "s")) { (value: String) in
            SignalProducer(value: value + "!")
        }
        let voidRun = Recorder<String, ActionError<Never>>()
        voidState.apply().start(voidRun.observer)
        #expect(voidRun.values == ["s!"])
    }

    @Test func completionHandlerCanApplyTheActionAgain() {
        let runs = Box(0)
        let action = Action<Void, Int, Never> { SignalProducer(value: 1) }
        action.apply().startWithCompleted {
            runs.modify { $0 += 1 }
            action.apply().startWithCompleted { runs.modify { $0 += 1 } }
        }
        #expect(runs.value == 2)
    }

    /// A run applied from the completion handler of another gets its own execution's events
    /// only; `action.events` gets the first execution's terminal event after the second's.
    @Test func aRunAppliedFromACompletionHandlerGetsOnlyItsOwnEvents() {
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        let events = Recorder<Signal<Int, Never>.Event, Never>()
        action.events.observe(events.observer)
        let first = Recorder<Int, ActionError<Never>>()
        let second = Recorder<Int, ActionError<Never>>()
        action.apply(1).start(
            Signal.Observer { event in
                first.observer.send(event)
                if event.isCompleted { action.apply(2).start(second.observer) }
            })
        #expect(first.events == [.value(1), .completed])
        #expect(second.events == [.value(2), .completed])
        #expect(events.values == [.value(1), .value(2), .completed, .completed])
        #expect(!action.isExecuting.value)
    }

    /// Regression: an execution whose producer completed twice (`materialize()` then
    /// `dematerialize()` did) completed the next execution, applied from the first one's
    /// completion handler, before it could send its value.
    @Test func aSecondTerminalEventOfAnExecutionNeverReachesTheNextOne() {
        let scheduler = TestScheduler()
        let action = Action<Int, Int, Never> { input in
            input == 0
                ? SignalProducer(value: 0).materialize().dematerialize()
                : SignalProducer(value: input).delay(1, on: scheduler)
        }
        let second = Recorder<Int, ActionError<Never>>()
        action.apply(0).startWithCompleted { action.apply(1).start(second.observer) }
        #expect(second.events.isEmpty)
        #expect(action.isExecuting.value)
        scheduler.advance(by: .seconds(1))
        #expect(second.events == [.value(1), .completed])
        #expect(!action.isExecuting.value)
    }

    /// Executions that end inside their start leave nothing that keeps the action.
    @Test func anActionWhoseExecutionsEndInsideTheirStartGoesAwayWhenReleased() {
        weak var weakAction: Action<Int, Int, Never>?
        do {
            let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
            weakAction = action
            for input in 0..<3 { action.apply(input).start() }
        }
        #expect(weakAction == nil)
    }

    /// Once an execution has terminated, nothing of its run is kept by the action.
    @Test func aFinishedExecutionLeavesNothingOfItsRunInTheAction() {
        let (work, workInput) = Signal<Int, Never>.pipe()
        let action = Action<Void, Int, Never> { SignalProducer(work) }
        weak var weakRun: AnyObject?
        do {
            let run = action.apply().start() as AnyObject
            weakRun = run
        }
        #expect(weakRun != nil)  // Running: the execution holds it.
        workInput.sendCompleted()
        #expect(weakRun == nil)
        #expect(action.isEnabled.value)
    }

    @Test func disposingARunInterruptsTheExecution() {
        let interrupted = Box(false)
        let action = Action<Void, Int, Never> { SignalProducer.never.on(interrupted: { interrupted.value = true }) }
        let disposable = action.apply().start()
        #expect(action.isExecuting.value)
        disposable.dispose()
        #expect(interrupted.value)
        #expect(!action.isExecuting.value)
    }

    @Test func bindingTargetAppliesTheAction() {
        let action = Action<Int, Int, Never> { SignalProducer(value: $0 * 2) }
        let values = Recorder<Int, Never>()
        action.values.observe(values.observer)
        let (signal, input) = Signal<Int, Never>.pipe()
        action <~ signal
        input.send(value: 3)
        #expect(values.values == [6])
    }

    @Test func actionErrorEquality() {
        #expect(ActionError<TestError>.disabled == .disabled)
        #expect(ActionError<TestError>.producerFailed(TestError(code: 1)) != .producerFailed(TestError(code: 2)))
    }

    /// `isEnabled` and `isExecuting` send a value only when they change, and complete when the
    /// action goes away.
    @Test func enablednessAndExecutionSendOnlyChangesAndCompleteWithTheAction() {
        let condition = MutableProperty(true)
        let (signal, input) = Signal<Int, Never>.pipe()
        var action: Action<Void, Int, Never>? = Action(enabledIf: condition) { SignalProducer(signal) }
        let enabled = Recorder<Bool, Never>()
        let executing = Recorder<Bool, Never>()
        action!.isEnabled.producer.start(enabled.observer)
        action!.isExecuting.producer.start(executing.observer)
        action!.apply().start()
        condition.value = false  // disabled by its condition while executing: no change
        condition.value = true
        input.sendCompleted()
        condition.value = false
        #expect(enabled.values == [true, false, true, false])
        #expect(executing.values == [false, true, false])
        action = nil
        #expect(enabled.terminal == .completed)
        #expect(executing.terminal == .completed)
    }

    /// `isExecuting` and `isEnabled` are made when first read: made while an execution runs,
    /// they start from the current state and follow every change after it.
    @Test func enablednessAndExecutionFirstReadDuringAnExecutionStartFromTheCurrentState() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let action = Action<Void, Int, Never> { SignalProducer(signal) }
        action.apply().start()
        #expect(action.isExecuting.value)
        #expect(!action.isEnabled.value)
        let executing = Recorder<Bool, Never>()
        let enabled = Recorder<Bool, Never>()
        action.isExecuting.producer.start(executing.observer)
        action.isEnabled.producer.start(enabled.observer)
        input.sendCompleted()
        #expect(executing.values == [true, false])
        #expect(enabled.values == [false, true])
        #expect(action.isExecuting === action.isExecuting)
        #expect(action.isEnabled === action.isEnabled)
    }

    /// First read from inside the execution's own terminal event: the state already says idle.
    @Test func enablednessFirstReadFromACompletionHandlerSaysEnabled() {
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        let seen = Box<[Bool]>([])
        action.apply(1).startWithCompleted { seen.value = [action.isEnabled.value, action.isExecuting.value] }
        #expect(seen.value == [true, false])
    }

    @Test func releasingTheActionCompletesItsSignals() {
        let completed = Box(false)
        var action: Action<Void, Int, Never>? = Action { SignalProducer(value: 1) }
        action!.values.observeCompleted { completed.value = true }
        action = nil
        #expect(completed.value)
    }

    /// Regression: an action did not keep the property it was created with alive, so its
    /// enabledness stopped following a temporary property.
    @Test func actionRetainsItsStateProperty() {
        weak var weakState: MutableProperty<Bool>?
        let action: Action<Void, Int, Never>
        do {
            let state = MutableProperty(true)
            weakState = state
            action = Action(enabledIf: state) { SignalProducer(value: 1) }
        }
        #expect(weakState != nil)
        weakState?.value = false
        #expect(!action.isEnabled.value)
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing

@testable @_spi(Testing) import ReactiveLoopCore

/// Serializes the tests that switch off the trap on broken trait promises (a global).
let traitTrapLock = NSLock()

/// Runs `body` with broken trait promises reported as events instead of stopping the program.
@discardableResult
func withoutTraitTrap<R>(_ body: () -> R) -> R {
    traitTrapLock.lock()
    defer { traitTrapLock.unlock() }
    let previous = _traitViolationsTrap.exchange(false, ordering: .relaxed)
    defer { _traitViolationsTrap.store(previous, ordering: .relaxed) }
    return body()
}

extension Recorder {
    /// The failure that ended the run, if one did.
    var failure: Error? { events.last?.error }
}

@Suite("Traits")
struct TraitTests {
    // MARK: Single

    @Test func aSingleCallsExactlyOneOutcome() {
        let outcomes = Box<[String]>([])
        Single<Int, TestError>(value: 4).start(success: { v in outcomes.modify { $0.append("success \(v)") } }) { e in
            outcomes.modify { $0.append("failure \(e.code)") }
        }
        Single<Int, TestError>(error: TestError(code: 2)).start(success: { v in
            outcomes.modify { $0.append("success \(v)") }
        }) { e in outcomes.modify { $0.append("failure \(e.code)") } }
        #expect(outcomes.value == ["success 4", "failure 2"])
    }

    @Test func singleOperatorsKeepTheTrait() {
        let base = SignalProducer<Int, TestError>(value: 3).asSingle()
        let recorder = Recorder<String, TestError>()
        base.map { $0 * 2 }
            .flatMap { value in Single(value: "\(value)") }
            .zip(with: Single(value: "!"))
            .map { $0 + $1 }
            .producer.start(recorder.observer)
        #expect(recorder.events == [.value("6!"), .completed])

        let recovered = Recorder<Int, Never>()
        Single<Int, TestError>(error: TestError(code: 5))
            .flatMapError { error in Single<Int, Never>(value: error.code * 10) }
            .producer.start(recovered.observer)
        #expect(recovered.events == [.value(50), .completed])

        let mapped = Recorder<Int, TestError>()
        Single<Int, TestError>(error: TestError(code: 1)).mapError { TestError(code: $0.code + 1) }
            .producer.start(mapped.observer)
        #expect(mapped.events == [.failed(TestError(code: 2))])
    }

    @Test func aSingleSendsItsValueAsSoonAsTheProducerDoes() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        SignalProducer(signal).asSingle().producer.start(recorder.observer)
        input.send(value: 1)
        #expect(recorder.events == [.value(1)])
        input.sendCompleted()
        #expect(recorder.events == [.value(1), .completed])
    }

    @Test func aSingleWithoutAValueFailsWithTheViolationWhenItsErrorCanHoldIt() {
        let recorder = Recorder<Int, any Swift.Error>()
        withoutTraitTrap { SignalProducer<Int, any Swift.Error>.empty.asSingle().producer.start(recorder.observer) }
        #expect(recorder.values.isEmpty)
        #expect(recorder.failure as? TraitViolation == TraitViolation(trait: "Single", reason: .noValue))
    }

    @Test func aSingleWithTwoValuesIsInterruptedWhenItsErrorIsTyped() {
        let recorder = Recorder<Int, TestError>()
        let ended = Box(false)
        let producer = SignalProducer<Int, TestError>(values: 1, 2, 3).on(disposed: { ended.value = true })
        withoutTraitTrap { producer.asSingle().producer.start(recorder.observer) }
        #expect(recorder.events == [.value(1), .interrupted])
        #expect(ended.value)
    }

    @Test func aBrokenPromiseStopsTheProgramInDebugBuilds() async {
        // Under the lock: a test running in parallel may have switched the trap off meanwhile.
        let trapsByDefault = traitTrapLock.withLock { _traitViolationsTrap.load(ordering: .relaxed) }
        #expect(trapsByDefault == _isDebugAssertConfiguration())
        await #expect(processExitsWith: .failure) {
            SignalProducer<Int, Never>(values: 1, 2).asSingle().producer.start()
        }
    }

    // MARK: Maybe

    @Test func aMaybeCallsExactlyOneOutcome() {
        let outcomes = Box<[String]>([])
        let record = { (text: String) in outcomes.modify { $0.append(text) } }
        Maybe<Int, TestError>(value: 1).start(success: { record("success \($0)") }, empty: { record("empty") })
        Maybe<Int, TestError>.empty.start(success: { record("success \($0)") }, empty: { record("empty") })
        Maybe<Int, TestError>(error: TestError(code: 3)).start(
            success: { record("success \($0)") }, failure: { record("failure \($0.code)") })
        #expect(outcomes.value == ["success 1", "empty", "failure 3"])
    }

    @Test func maybeOperatorsAndConversions() {
        let empty = Recorder<(Int, Int), TestError>()
        Maybe<Int, TestError>(value: 1).zip(with: .empty).producer.start(empty.observer)
        #expect(empty.values.isEmpty)
        #expect(empty.events.count == 1 && empty.events.last?.isCompleted == true)

        let single = Recorder<Int, TestError>()
        Maybe<Int, TestError>.empty.map { $0 + 1 }.asSingle(ifEmpty: 9).producer.start(single.observer)
        #expect(single.events == [.value(9), .completed])

        let chained = Recorder<String, TestError>()
        SignalProducer<Int, TestError>(value: 2).asMaybe().flatMap { Maybe(value: "\($0)") }.producer
            .start(chained.observer)
        #expect(chained.events == [.value("2"), .completed])

        let recovered = Recorder<Int, Never>()
        Maybe<Int, TestError>(error: TestError(code: 4)).flatMapError { _ in .empty }.producer.start(recovered.observer)
        #expect(recovered.events == [.completed])
    }

    @Test func aMaybeWithASecondValueReportsTheViolation() {
        let recorder = Recorder<Int, any Swift.Error>()
        withoutTraitTrap {
            SignalProducer<Int, any Swift.Error>(values: 1, 2).asMaybe().producer.start(recorder.observer)
        }
        #expect(recorder.values == [1])
        #expect(recorder.failure as? TraitViolation == TraitViolation(trait: "Maybe", reason: .secondValue))
    }

    // MARK: Completable

    @Test func aCompletableIgnoresValuesAndCallsExactlyOneOutcome() {
        let outcomes = Box<[String]>([])
        let record = { (text: String) in outcomes.modify { $0.append(text) } }
        SignalProducer<Int, TestError>(values: 1, 2).asCompletable().start(completed: { record("completed") })
        Completable<TestError>(error: TestError(code: 6)).start(completed: { record("completed") }) {
            record("failure \($0.code)")
        }
        #expect(outcomes.value == ["completed", "failure 6"])
    }

    @Test func completablesChainAndZip() {
        let order = Box<[String]>([])
        let step = { (name: String) in
            Completable<TestError>(SignalProducer<(), TestError> { order.modify { $0.append(name) } })
        }
        let recorder = Recorder<Never, TestError>()
        step("a").then(step("b")).zip(with: step("c")).producer.start(recorder.observer)
        #expect(order.value == ["a", "b", "c"])
        #expect(recorder.terminal == .completed)

        let single = Recorder<Int, TestError>()
        step("d").then(Single(value: 7)).producer.start(single.observer)
        #expect(single.events == [.value(7), .completed])

        let failed = Recorder<Never, TestError>()
        step("e").then(Completable(error: TestError(code: 1))).zip(with: .completed).producer.start(failed.observer)
        #expect(failed.terminal == .failed(TestError(code: 1)))

        let recovered = Recorder<Never, Never>()
        Completable<TestError>(error: TestError(code: 2)).flatMapError { _ in Completable<Never>.completed }
            .producer.start(recovered.observer)
        #expect(recovered.terminal == .completed)
    }

    // MARK: Driver

    @Test func aDriverDeliversOnItsSchedulerAndSharesOneRunReplayingTheLatestValue() {
        let scheduler = TestScheduler()
        let starts = Box(0)
        let (signal, input) = Signal<Int, TestError>.pipe()
        let source = SignalProducer<Int, TestError> { observer, lifetime in
            starts.modify { $0 += 1 }
            lifetime += signal.observe(observer)
        }
        let driver = source.asDriver(onErrorJustReturn: -1, on: scheduler)
        let first = Recorder<Int, Never>()
        driver.producer.start(first.observer)
        input.send(value: 1)
        #expect(first.values.isEmpty)
        scheduler.run()
        #expect(first.values == [1])

        let late = Recorder<Int, Never>()
        driver.producer.start(late.observer)
        #expect(late.values == [1])
        #expect(starts.value == 1)

        input.send(error: TestError(code: 1))
        scheduler.run()
        #expect(first.events == [.value(1), .value(-1), .completed])
        #expect(late.events == [.value(1), .value(-1), .completed])
    }

    @Test func aDriverBindsToAProperty() {
        let scheduler = TestScheduler()
        let source = MutableProperty("a")
        let target = MutableProperty("")
        target <~ source.asDriver(on: scheduler)
        scheduler.run()
        #expect(target.value == "a")
        source.value = "b"
        scheduler.run()
        #expect(target.value == "b")
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("then, flatMapError, repeat, retry")
struct ThenRetryTests {
    @Test func thenRunsTheReplacementAfterCompletionIgnoringValues() {
        let started = Box(false)
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<String, TestError>()
        SignalProducer(signal)
            .then(SignalProducer<String, TestError>(value: "next").on(starting: { started.value = true }))
            .start(recorder.observer)
        input.send(value: 1)
        #expect(!started.value)
        input.sendCompleted()
        #expect(recorder.events == [.value("next"), .completed])
    }

    @Test func thenDoesNotStartTheReplacementAfterAFailure() {
        let started = Box(false)
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(error: TestError(code: 1))
            .then(SignalProducer<Int, TestError>(value: 2).on(starting: { started.value = true }))
            .start(recorder.observer)
        #expect(recorder.events == [.failed(TestError(code: 1))])
        #expect(!started.value)
    }

    @Test func thenOverloadsPromoteErrors() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, Never>(value: 0).then(SignalProducer<Int, TestError>(value: 1)).start(recorder.observer)
        SignalProducer<Int, TestError>(value: 0).then(SignalProducer<Int, Never>(value: 2)).start(recorder.observer)
        SignalProducer<Int, TestError>(value: 0).then(Property(value: 3)).start(recorder.observer)
        SignalProducer<Int, Never>(value: 0).then(Result<Int, TestError>.success(4)).start(recorder.observer)
        SignalProducer<Int, TestError>(value: 0).then(Result<Int, TestError>.success(5)).start(recorder.observer)
        #expect(recorder.values == [1, 2, 3, 4, 5])
        let never = Recorder<Int, Never>()
        SignalProducer<Int, Never>(value: 0).then(SignalProducer<Int, Never>(value: 6)).start(never.observer)
        SignalProducer<Int, Never>(value: 0).then(Property(value: 7)).start(never.observer)
        SignalProducer<String, Never>(value: "x").then(SignalProducer<Int, Never>(value: 8)).start(never.observer)
        #expect(never.values == [6, 7, 8])
    }

    @Test func flatMapErrorReplacesAFailure() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 7))
            .flatMapError { SignalProducer<Int, Never>(value: $0.code) }
            .start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(7), .completed])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let viaSignal = Recorder<Int, TestError>()
        signal.flatMapError { _ in SignalProducer<Int, TestError>(error: TestError(code: 9)) }.observe(
            viaSignal.observer)
        let viaConvertible = Recorder<Int, Never>()
        signal.flatMapError { _ in Property(value: 0) }.observe(viaConvertible.observer)
        input.send(value: 1)
        input.send(error: TestError())
        #expect(viaSignal.events == [.value(1), .failed(TestError(code: 9))])
        #expect(viaConvertible.events == [.value(1), .value(0), .completed])
        let producerConvertible = Recorder<Int, Never>()
        SignalProducer<Int, TestError>(error: TestError()).flatMapError { _ in Property(value: 3) }
            .start(producerConvertible.observer)
        #expect(producerConvertible.values == [3])
    }

    @Test func flatMapErrorPassesCompletionAndInterruption() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, TestError>(value: 1).flatMapError { _ in .empty }.start(recorder.observer)
        #expect(recorder.events == [.value(1), .completed])
        let interrupted = Recorder<Int, Never>()
        SignalProducer<Int, TestError>.never.flatMapError { _ in .empty }.start(interrupted.observer).dispose()
        #expect(interrupted.events == [.interrupted])
    }

    @Test func repeatRunsTheProducerCountTimes() {
        let starts = Box(0)
        let producer = SignalProducer<Int, Never>([1, 2]).on(starting: { starts.modify { $0 += 1 } })
        let recorder = Recorder<Int, Never>()
        producer.repeat(3).start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(2), .value(1), .value(2), .value(1), .value(2), .completed])
        #expect(starts.value == 3)
        let zero = Recorder<Int, Never>()
        producer.repeat(0).start(zero.observer)
        #expect(zero.events == [.completed])
        let once = Recorder<Int, Never>()
        producer.repeat(1).start(once.observer)
        #expect(once.values == [1, 2])
        let failing = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(error: TestError()).repeat(3).start(failing.observer)
        #expect(failing.events == [.failed(TestError())])
    }

    @Test func retryRestartsAfterFailuresUpToCount() {
        let attempts = Box(0)
        let flaky = SignalProducer<Int, TestError> { observer, _ in
            attempts.modify { $0 += 1 }
            if attempts.value < 3 {
                observer.send(error: TestError(code: attempts.value))
            } else {
                observer.send(value: attempts.value)
                observer.sendCompleted()
            }
        }
        let recorder = Recorder<Int, TestError>()
        flaky.retry(upTo: 5).start(recorder.observer)
        #expect(recorder.events == [.value(3), .completed])
        attempts.value = 0
        let exhausted = Recorder<Int, TestError>()
        flaky.retry(upTo: 1).start(exhausted.observer)
        #expect(exhausted.events == [.failed(TestError(code: 2))])
        attempts.value = 0
        let none = Recorder<Int, TestError>()
        flaky.retry(upTo: 0).start(none.observer)
        #expect(none.events == [.failed(TestError(code: 1))])
    }

    @Test func retryWithIntervalWaitsBetweenAttempts() {
        let scheduler = TestScheduler()
        let attempts = Timeline<Int, TestError>(scheduler)
        let count = Box(0)
        SignalProducer<Int, TestError> { observer, _ in
            count.modify { $0 += 1 }
            if count.value < 3 {
                observer.send(error: TestError(code: count.value))
            } else {
                observer.send(value: 0)
                observer.sendCompleted()
            }
        }.on(failed: { _ in }).retry(upTo: 3, interval: 2, on: scheduler).start(attempts.observer)
        scheduler.advance(by: 1)
        #expect(count.value == 1)
        scheduler.advance(by: 1)
        #expect(count.value == 2)
        scheduler.advance(by: 2)
        #expect(count.value == 3)
        #expect(attempts.entries == ["4.0:VALUE 0", "4.0:COMPLETED"])
    }
}

@Suite("replayLazily")
struct ReplayLazilyTests {
    @Test func startsOnceAndReplaysTheLastValuesToLateConsumers() {
        let starts = Box(0)
        let (signal, input) = Signal<Int, Never>.pipe()
        let replayed = SignalProducer(signal).on(starting: { starts.modify { $0 += 1 } }).replayLazily(upTo: 2)
        #expect(starts.value == 0)
        let early = Recorder<Int, Never>()
        replayed.start(early.observer)
        for value in 1...3 { input.send(value: value) }
        let late = Recorder<Int, Never>()
        replayed.start(late.observer)
        input.send(value: 4)
        #expect(starts.value == 1)
        #expect(early.values == [1, 2, 3, 4])
        #expect(late.values == [2, 3, 4])
        input.sendCompleted()
        let afterEnd = Recorder<Int, Never>()
        replayed.start(afterEnd.observer)
        #expect(afterEnd.events == [.value(3), .value(4), .completed])
    }

    @Test func replaysAFailure() {
        let replayed = SignalProducer<Int, TestError>(value: 1).concat(error: TestError(code: 3)).replayLazily(upTo: 5)
        let first = Recorder<Int, TestError>()
        replayed.start(first.observer)
        let second = Recorder<Int, TestError>()
        replayed.start(second.observer)
        #expect(first.events == [.value(1), .failed(TestError(code: 3))])
        #expect(second.events == first.events)
    }

    @Test func zeroCapacityReplaysOnlyTheTerminalEvent() {
        let replayed = SignalProducer<Int, Never>([1, 2]).replayLazily(upTo: 0)
        replayed.start()
        let late = Recorder<Int, Never>()
        replayed.start(late.observer)
        #expect(late.events == [.completed])
    }

    @Test func theSharedRunEndsWhenTheProducerAndEveryConsumerAreGone() {
        let interrupted = Box(false)
        var replayed: SignalProducer<Int, Never>? = SignalProducer<Int, Never>.never
            .on(interrupted: { interrupted.value = true }).replayLazily(upTo: 1)
        let disposable = replayed!.start()
        replayed = nil
        #expect(!interrupted.value)
        disposable.dispose()
        #expect(interrupted.value)
    }

    @Test func aConsumerDisposedEarlyStopsReceivingWhileOthersContinue() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let replayed = SignalProducer(signal).replayLazily(upTo: 1)
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        let firstDisposable = replayed.start(first.observer)
        replayed.start(second.observer)
        input.send(value: 1)
        firstDisposable.dispose()
        input.send(value: 2)
        #expect(first.events == [.value(1), .interrupted])
        #expect(second.values == [1, 2])
    }
}

@Suite("first, last, single, wait")
struct BlockingTests {
    @Test func blockingAccessors() {
        #expect(SignalProducer<Int, TestError>([1, 2, 3]).first() == .success(1))
        #expect(SignalProducer<Int, TestError>([1, 2, 3]).last() == .success(3))
        #expect(SignalProducer<Int, TestError>([1]).single() == .success(1))
        #expect(SignalProducer<Int, TestError>([1, 2]).single() == nil)
        #expect(SignalProducer<Int, TestError>.empty.single() == nil)
        #expect(SignalProducer<Int, TestError>.empty.first() == nil)
        #expect(SignalProducer<Int, TestError>(error: TestError(code: 4)).first() == .failure(TestError(code: 4)))
        #expect((try? SignalProducer<Int, TestError>([1]).wait().get()) != nil)
        if case let .failure(error) = SignalProducer<Int, TestError>(error: TestError(code: 6)).wait() {
            #expect(error == TestError(code: 6))
        } else {
            Issue.record("wait() should report the failure")
        }
    }

    @Test func blockingAccessorsWaitForAnotherThread() {
        let producer = SignalProducer<Int, Never> { observer, _ in
            Thread.detachNewThreadShim {
                observer.send(value: 42)
                observer.sendCompleted()
            }
        }
        #expect(producer.first() == .success(42))
        #expect(producer.last() == .success(42))
    }
}

import Foundation
import ReactiveLoopTestSupport
import Synchronization
import Testing

@testable @_spi(Testing) import ReactiveLoopCore

@Suite("Async bridges")
struct AsyncBridgeTests {
    /// Waits (polling, generous bound) until `condition` holds; for effects of task
    /// cancellation, which happen on another thread.
    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<2_000 {
            if condition() { return true }
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
        return condition()
    }

    /// A producer whose runs observe a pipe, with flags for a run having started and ended.
    func observedPipe() -> (
        producer: SignalProducer<Int, Never>, input: Signal<Int, Never>.Observer, started: Box<Bool>, ended: Box<Bool>
    ) {
        let ended = Box(false)
        let started = Box(false)
        let (signal, input) = Signal<Int, Never>.pipe()
        let producer = SignalProducer<Int, Never> { observer, lifetime in
            lifetime += signal.observe(observer)
            lifetime.observeEnded { ended.value = true }
            started.value = true
        }
        return (producer, input, started, ended)
    }

    // MARK: values

    @Test func valuesOfAProducerArriveInOrderAndEndWithCompletion() async {
        var received: [Int] = []
        for await value in SignalProducer<Int, Never>(0..<100).values { received.append(value) }
        #expect(received == Array(0..<100))
    }

    @Test func aFailureIsThrownWithItsOwnTypeOnceThenTheSequenceEnds() async {
        let producer = SignalProducer<Int, TestError>(values: 1, 2).concat(SignalProducer(error: TestError(code: 7)))
        var iterator = producer.values.makeAsyncIterator()
        var received: [Int] = []
        var caught: TestError?
        do throws(TestError) {
            while let value = try await iterator.next() { received.append(value) }
        } catch {
            caught = error
        }
        #expect(received == [1, 2])
        #expect(caught == TestError(code: 7))
        let afterFailure = try? await iterator.next()
        #expect(afterFailure == .some(nil))
    }

    @Test func leavingTheLoopEarlyDisposesTheRun() async {
        let (producer, input, started, ended) = observedPipe()
        // Sends once the loop's run has started (10 s at most), until the run ends.
        let feeder = Thread {
            for _ in 0..<10_000 where !started.value { usleep(1_000) }
            for value in 0..<1_000_000 where !ended.value { input.send(value: value) }
            input.sendCompleted()
        }
        feeder.start()
        var count = 0
        for await _ in producer.values {
            count += 1
            if count == 3 { break }
        }
        #expect(count == 3)
        #expect(ended.value)
    }

    @Test func cancellingTheIteratingTaskDisposesTheRunAndEndsTheLoop() async {
        let ended = Box(false)
        let started = Box(false)
        let producer = SignalProducer<Int, Never> { observer, lifetime in
            started.value = true
            lifetime.observeEnded { ended.value = true }
        }
        let task = Task {
            var count = 0
            for await _ in producer.values { count += 1 }
            return count
        }
        #expect(await eventually { started.value })
        task.cancel()
        #expect(await task.value == 0)
        #expect(ended.value)
    }

    @Test func theIteratorsStateIsReleasedWhenTheLoopEnds() async {
        weak var weakState: _AsyncValuesState<Int, Never>?
        do {
            let iterator = SignalProducer<Int, Never>.never.values.makeAsyncIterator()
            weakState = iterator.handle.state
            #expect(weakState != nil)
        }
        #expect(weakState == nil)
    }

    @Test(arguments: [
        (AsyncBufferingPolicy.unbounded, [0, 1, 2, 3, 4]),
        (.bufferingOldest(2), [0, 1]),
        (.bufferingNewest(2), [3, 4]),
        (.bufferingNewest(0), []),
    ])
    func valuesAreBufferedAsThePolicySays(policy: AsyncBufferingPolicy, expected: [Int]) async {
        let (signal, input) = Signal<Int, Never>.pipe()
        var iterator = signal.values(bufferingPolicy: policy).makeAsyncIterator()
        for value in 0..<5 { input.send(value: value) }
        input.sendCompleted()
        var received: [Int] = []
        while let value = await iterator.next() { received.append(value) }
        #expect(received == expected)
    }

    @Test func signalValuesStartWhenTheIteratorIsMade() async {
        let (signal, input) = Signal<Int, Never>.pipe()
        input.send(value: 0)
        let values = signal.values
        input.send(value: 1)
        var iterator = values.makeAsyncIterator()
        input.send(value: 2)
        input.sendCompleted()
        #expect(await iterator.next() == 2)
        #expect(await iterator.next() == nil)
    }

    @Test func theValuesOfATerminatedSignalAreEmpty() async {
        let (signal, input) = Signal<Int, TestError>.pipe()
        input.send(error: TestError(code: 1))
        var iterator = signal.values.makeAsyncIterator()
        let first = try? await iterator.next()
        #expect(first == .some(nil))
    }

    @Test func propertyValuesStartWithTheCurrentValue() async {
        let property = MutableProperty(1)
        var iterator = property.values.makeAsyncIterator()
        property.value = 2
        #expect(await iterator.next() == 1)
        #expect(await iterator.next() == 2)
    }

    @Test func valuesSentFromAnotherThreadWhileTheConsumerWaitsAllArriveInOrder() async {
        let (signal, input) = Signal<Int, Never>.pipe()
        let values = signal.values
        let observing = Box(false)
        let consumer = Task {
            var received: [Int] = []
            var iterator = values.makeAsyncIterator()
            observing.value = true
            while let value = await iterator.next() { received.append(value) }
            return received
        }
        #expect(await eventually { observing.value })
        let count = 2_000
        let feeder = Thread {
            for value in 0..<count { input.send(value: value) }
            input.sendCompleted()
        }
        feeder.start()
        #expect(await consumer.value == Array(0..<count))
    }

    // MARK: producers from async code

    @Test func aProducerFromAnAsyncOperationSendsItsResultThenCompletes() async {
        let producer = SignalProducer<Int, TestError> { () async throws(TestError) -> Int in
            await Task.yield()
            return 42
        }
        #expect(await producer.allValues().map { try? $0.get() } == [42])
    }

    @Test func aProducerFromAnAsyncOperationFailsWithWhatItThrows() async {
        let producer = SignalProducer<Int, TestError> { () async throws(TestError) -> Int in
            throw TestError(code: 3)
        }
        #expect(await producer.firstResult() == .failure(TestError(code: 3)))
    }

    @Test func disposingTheRunCancelsTheOperationsTask() async {
        let cancelled = Box(false)
        let started = Box(false)
        let producer = SignalProducer<Int, Never> { () async -> Int in
            started.value = true
            while !Task.isCancelled { try? await Task.sleep(nanoseconds: 1_000_000) }
            cancelled.value = true
            return 0
        }
        let recorder = Recorder<Int, Never>()
        let disposable = producer.start(recorder.observer)
        #expect(await eventually { started.value })
        disposable.dispose()
        #expect(await eventually { cancelled.value })
        #expect(recorder.events == [.interrupted])
    }

    @Test func aProducerFromAnAsyncSequenceSendsItsElementsInOrder() async {
        let stream = AsyncStream<Int> { continuation in
            for value in 0..<50 { continuation.yield(value) }
            continuation.finish()
        }
        #expect(await SignalProducer(stream).allValues() == .success(Array(0..<50)))
    }

    @Test func aThrowingAsyncSequenceFailsTheRun() async {
        struct Failing: AsyncSequence, Sendable {
            struct Iterator: AsyncIteratorProtocol {
                var next = 0
                mutating func next() async throws(TestError) -> Int? {
                    defer { next += 1 }
                    if next == 2 { throw TestError(code: 9) }
                    return next
                }
            }
            func makeAsyncIterator() -> Iterator { Iterator() }
        }
        let recorder = Recorder<Int, TestError>()
        let done = Box(false)
        SignalProducer(Failing()).on(terminated: { done.value = true }).start(recorder.observer)
        #expect(await eventually { done.value })
        #expect(recorder.events == [.value(0), .value(1), .failed(TestError(code: 9))])
    }

    @Test func disposingTheRunOfAnAsyncSequenceEndsTheStream() async {
        let terminated = Box(false)
        let stream = AsyncStream<Int> { continuation in
            continuation.onTermination = { _ in terminated.value = true }
            continuation.yield(1)
        }
        let received = Box<[Int]>([])
        let disposable = SignalProducer(stream).startWithValues { value in received.modify { $0.append(value) } }
        #expect(await eventually { received.value == [1] })
        disposable.dispose()
        #expect(await eventually { terminated.value })
    }

    @Test func aSequenceThatIgnoresCancellationIsAskedForNothingAfterDisposal() async {
        final class Counter: @unchecked Sendable {
            let calls = Box(0)
        }
        struct Endless: AsyncSequence, Sendable {
            let counter: Counter
            struct Iterator: AsyncIteratorProtocol {
                let counter: Counter
                mutating func next() async -> Int? {
                    await Task.yield()  // Ignores cancellation: never returns nil.
                    return counter.calls.modify { calls in
                        calls += 1
                        return calls
                    }
                }
            }
            func makeAsyncIterator() -> Iterator { Iterator(counter: counter) }
        }
        let counter = Counter()
        let disposable = SignalProducer(Endless(counter: counter)).start()
        #expect(await eventually { counter.calls.value > 10 })
        disposable.dispose()
        let atDisposal = counter.calls.value
        try? await Task.sleep(nanoseconds: 50_000_000)
        #expect(counter.calls.value <= atDisposal + 1)
    }

    // MARK: async first, last, single, wait

    @Test func asyncFormsMirrorTheBlockingOnes() async {
        let three = SignalProducer<Int, TestError>(values: 1, 2, 3)
        #expect(await three.firstResult().map { try? $0.get() } == 1)
        #expect(await three.lastResult().map { try? $0.get() } == 3)
        #expect(await three.singleResult() == nil)
        #expect(await SignalProducer<Int, TestError>(value: 5).singleResult().map { try? $0.get() } == 5)
        #expect(await SignalProducer<Int, TestError>.empty.firstResult() == nil)
        #expect(await three.completion().map { "ok" } == .success("ok"))
        let failing = SignalProducer<Int, TestError>(error: TestError(code: 1))
        #expect(await failing.completion().map { "ok" } == .failure(TestError(code: 1)))
        #expect(await failing.allValues() == .failure(TestError(code: 1)))
        #expect(await three.allValues() == .success([1, 2, 3]))
    }

    @Test func asyncFirstDisposesTheRunAfterTheFirstValue() async {
        let (producer, input, started, ended) = observedPipe()
        let waiter = Task { await producer.firstResult() }
        #expect(await eventually { started.value })
        input.send(value: 8)
        #expect(await waiter.value == .success(8))
        #expect(ended.value)
    }

    /// In an async function, ported synchronous code keeps its meaning: a closure without
    /// `await` is the synchronous `init(_:)`, which sends at once, and `first()` is still the
    /// blocking form (this would not compile if it were async).
    @Test func synchronousFormsKeepTheirMeaningInAnAsyncFunction() async {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never> { 5 }.start(recorder.observer)
        #expect(recorder.events == [.value(5), .completed])
        let blocking: Result<Int, Never>? = SignalProducer<Int, Never>(value: 6).first()
        #expect(blocking == .success(6))
    }
}

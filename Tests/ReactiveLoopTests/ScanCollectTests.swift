import Testing
@testable import ReactiveLoopCore

@Suite("scan, scanMap, reduce")
struct ScanTests {
    @Test func scanSendsEachPartialResult() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(1...4).scan(0, +).start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(3), .value(6), .value(10), .completed])
        let into = Recorder<[Int], Never>()
        SignalProducer<Int, Never>([1, 2]).scan(into: []) { $0.append($1) }.start(into.observer)
        #expect(into.values == [[1], [1, 2]])
    }

    @Test func scanMapCarriesStateAndSendsOutputs() {
        let (signal, input) = Signal<String, Never>.pipe()
        let recorder = Recorder<String, Never>()
        signal.scanMap(0) { count, word in (count + 1, "\(count + 1):\(word)") }.observe(recorder.observer)
        let into = Recorder<Int, Never>()
        signal.scanMap(into: 10) { state, word in
            state += word.count
            return state
        }.observe(into.observer)
        input.send(value: "a")
        input.send(value: "bc")
        #expect(recorder.values == ["1:a", "2:bc"])
        #expect(into.values == [11, 13])
        let producer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([5, 6]).scanMap(1) { ($0 * $1, $0) }.start(producer.observer)
        SignalProducer<Int, Never>([5]).scanMap(into: 0) { state, value in
            state += value
            return -state
        }.start(producer.observer)
        #expect(producer.values == [1, 5, -5])
    }

    @Test func reduceSendsOnlyTheFinalResultOnCompletion() {
        let recorder = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(1...4).reduce(0, +).start(recorder.observer)
        #expect(recorder.events == [.value(10), .completed])
        let empty = Recorder<Int, Never>()
        SignalProducer<Int, Never>.empty.reduce(7, +).start(empty.observer)
        #expect(empty.events == [.value(7), .completed])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let failed = Recorder<[Int], TestError>()
        signal.reduce(into: []) { $0.append($1) }.observe(failed.observer)
        input.send(value: 1)
        input.send(error: TestError(code: 2))
        #expect(failed.events == [.failed(TestError(code: 2))])
        let interrupted = Recorder<Int, Never>()
        SignalProducer<Int, Never>.never.reduce(0, +).start(interrupted.observer).dispose()
        #expect(interrupted.events == [.interrupted])
    }

    @Test func aScanProducerStartedTwiceRunsTwice() {
        let producer = SignalProducer<Int, Never>([1, 1]).scan(0, +)
        let first = Recorder<Int, Never>()
        let second = Recorder<Int, Never>()
        producer.start(first.observer)
        producer.start(second.observer)
        #expect(first.values == [1, 2])
        #expect(second.values == [1, 2])
    }
}

@Suite("collect")
struct CollectTests {
    @Test func collectSendsAllValuesOnCompletion() {
        let recorder = Recorder<[Int], Never>()
        SignalProducer<Int, Never>(1...3).collect().start(recorder.observer)
        #expect(recorder.events == [.value([1, 2, 3]), .completed])
        let empty = Recorder<[Int], Never>()
        SignalProducer<Int, Never>.empty.collect().start(empty.observer)
        #expect(empty.events == [.value([]), .completed])
    }

    @Test func collectCountSendsFullArraysThenTheRemainder() {
        let recorder = Recorder<[Int], Never>()
        SignalProducer<Int, Never>(1...5).collect(count: 2).start(recorder.observer)
        #expect(recorder.values == [[1, 2], [3, 4], [5]])
        let exact = Recorder<[Int], Never>()
        SignalProducer<Int, Never>(1...4).collect(count: 2).start(exact.observer)
        #expect(exact.values == [[1, 2], [3, 4]])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let failing = Recorder<[Int], TestError>()
        signal.collect(count: 3).observe(failing.observer)
        input.send(value: 1)
        input.send(error: TestError())
        #expect(failing.events == [.failed(TestError())])
    }

    @Test func collectWithPredicates() {
        let whenSumExceeds = Recorder<[Int], Never>()
        SignalProducer<Int, Never>([1, 2, 3, 4, 1]).collect { $0.reduce(0, +) >= 3 }.start(whenSumExceeds.observer)
        #expect(whenSumExceeds.values == [[1, 2], [3], [4], [1]])
        let beforeLatest = Recorder<[Int], Never>()
        SignalProducer<Int, Never>([1, 2, 10, 11, 3]).collect { collected, latest in
            (collected.last.map { abs($0 - latest) > 5 }) ?? false
        }.start(beforeLatest.observer)
        #expect(beforeLatest.values == [[1, 2], [10, 11], [3]])
        let (signal, input) = Signal<Int, Never>.pipe()
        let viaSignal = Recorder<[Int], Never>()
        signal.collect { $0.count == 2 }.observe(viaSignal.observer)
        let viaSignalLatest = Recorder<[Int], Never>()
        signal.collect { collected, _ in collected.count == 1 }.observe(viaSignalLatest.observer)
        let all = Recorder<[Int], Never>()
        signal.collect().observe(all.observer)
        for value in 1...3 { input.send(value: value) }
        input.sendCompleted()
        #expect(viaSignal.values == [[1, 2], [3]])
        #expect(viaSignalLatest.values == [[1], [2], [3]])
        #expect(all.values == [[1, 2, 3]])
    }
}

@Suite("skip(while:), take(while:), take(until:), combinePrevious, uniqueValues")
struct PredicateTests {
    @Test func skipWhileDropsUntilThePredicateFails() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 5, 1, 6]).skip { $0 < 3 }.start(recorder.observer)
        #expect(recorder.values == [5, 1, 6])
        let (signal, input) = Signal<Int, Never>.pipe()
        let viaSignal = Recorder<Int, Never>()
        signal.skip(while: { $0 < 3 }).observe(viaSignal.observer)
        for value in [1, 4, 2] { input.send(value: value) }
        #expect(viaSignal.values == [4, 2])
    }

    @Test func takeWhileStopsBeforeTheFailingValueAndTakeUntilIncludesIt() {
        let whileRecorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 5, 1]).take(while: { $0 < 3 }).start(whileRecorder.observer)
        #expect(whileRecorder.events == [.value(1), .value(2), .completed])
        let untilRecorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 5, 1]).take(until: { $0 < 3 }).start(untilRecorder.observer)
        #expect(untilRecorder.events == [.value(1), .value(2), .value(5), .completed])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let viaSignal = Recorder<Int, TestError>()
        signal.take(while: { $0 > 0 }).observe(viaSignal.observer)
        let untilSignal = Recorder<Int, TestError>()
        signal.take(until: { (value: Int) in value > 0 }).observe(untilSignal.observer)
        input.send(value: 1)
        input.send(error: TestError())
        #expect(viaSignal.events == [.value(1), .failed(TestError())])
        #expect(untilSignal.events == [.value(1), .failed(TestError())])
    }

    @Test func combinePreviousPairsValues() {
        let withInitial = Recorder<(Int, Int), Never>()
        SignalProducer<Int, Never>([1, 2, 3]).combinePrevious(0).start(withInitial.observer)
        #expect(withInitial.values.map { [$0.0, $0.1] } == [[0, 1], [1, 2], [2, 3]])
        let withoutInitial = Recorder<(Int, Int), Never>()
        SignalProducer<Int, Never>([1, 2, 3]).combinePrevious().start(withoutInitial.observer)
        #expect(withoutInitial.values.map { [$0.0, $0.1] } == [[1, 2], [2, 3]])
        let (signal, input) = Signal<Int, Never>.pipe()
        let viaSignal = Recorder<(Int, Int), Never>()
        signal.combinePrevious().observe(viaSignal.observer)
        let viaSignalInitial = Recorder<(Int, Int), Never>()
        signal.combinePrevious(9).observe(viaSignalInitial.observer)
        input.send(value: 1)
        input.send(value: 2)
        #expect(viaSignal.values.map { [$0.0, $0.1] } == [[1, 2]])
        #expect(viaSignalInitial.values.map { [$0.0, $0.1] } == [[9, 1], [1, 2]])
        let property = MutableProperty(1)
        let pairs = property.combinePrevious(0)
        property.value = 2
        #expect(pairs.value == (1, 2))
    }

    @Test func uniqueValuesForwardsFirstOccurrences() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 1, 3, 2]).uniqueValues().start(recorder.observer)
        #expect(recorder.values == [1, 2, 3])
        let byIdentity = Recorder<String, Never>()
        SignalProducer<String, Never>(["a", "B", "A", "b"]).uniqueValues { $0.lowercased() }.start(byIdentity.observer)
        #expect(byIdentity.values == ["a", "B"])
        let (signal, input) = Signal<Int, Never>.pipe()
        let viaSignal = Recorder<Int, Never>()
        signal.uniqueValues().observe(viaSignal.observer)
        let viaSignalIdentity = Recorder<Int, Never>()
        signal.uniqueValues { $0 % 2 }.observe(viaSignalIdentity.observer)
        for value in [1, 1, 2, 3] { input.send(value: value) }
        #expect(viaSignal.values == [1, 2, 3])
        #expect(viaSignalIdentity.values == [1, 2])
        let property = MutableProperty(1)
        let unique = property.uniqueValues()
        let uniqueIdentity = property.uniqueValues { $0 % 2 }
        let changes = Recorder<Int, Never>()
        unique.signal.observe(changes.observer)
        property.value = 2
        property.value = 1
        property.value = 3
        #expect(changes.values == [2, 3])
        #expect(uniqueIdentity.value == 2)
    }

    @Test func propertyFilterStartsWithInitialWhenTheCurrentValueFails() {
        let property = MutableProperty(1)
        let even = property.filter(initial: 0) { $0 % 2 == 0 }
        #expect(even.value == 0)
        property.value = 4
        property.value = 5
        #expect(even.value == 4)
    }
}

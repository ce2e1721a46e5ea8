import Testing
@testable import ReactiveLoop

@Suite("combineLatest and zip")
struct AggregateTests {
    @Test func combineLatestWaitsForEverySourceThenEmitsOnEachChange() {
        let (a, aInput) = Signal<Int, TestError>.pipe()
        let (b, bInput) = Signal<String, TestError>.pipe()
        let recorder = Recorder<(Int, String), TestError>()
        a.combineLatest(with: b).observe(recorder.observer)
        aInput.send(value: 1)
        aInput.send(value: 2)
        bInput.send(value: "x")
        aInput.send(value: 3)
        bInput.send(value: "y")
        #expect(recorder.values.map { "\($0.0)\($0.1)" } == ["2x", "3x", "3y"])
        aInput.sendCompleted()
        #expect(recorder.terminal == nil)
        bInput.send(value: "z")
        bInput.sendCompleted()
        #expect(recorder.values.last.map { "\($0.0)\($0.1)" } == "3z")
        #expect(recorder.events.last?.isCompleted == true)
    }

    @Test func combineLatestFailsOrInterruptsAsSoonAsOneSourceDoes() {
        let (a, aInput) = Signal<Int, TestError>.pipe()
        let (b, bInput) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<(Int, Int), TestError>()
        Signal.combineLatest(a, b).observe(recorder.observer)
        aInput.send(error: TestError(code: 1))
        bInput.send(value: 1)
        #expect(recorder.events.count == 1)
        #expect(recorder.events.first?.error == TestError(code: 1))

        let (c, cInput) = Signal<Int, Never>.pipe()
        let (d, dInput) = Signal<Int, Never>.pipe()
        let interrupted = Recorder<(Int, Int), Never>()
        Signal.combineLatest(c, d).observe(interrupted.observer)
        cInput.sendInterrupted()
        dInput.send(value: 1)
        #expect(interrupted.events.count == 1)
        #expect(interrupted.events.first?.isTerminating == true)
        #expect(interrupted.events.first?.isCompleted == false)
    }

    @Test func zipPairsValuesInOrder() {
        let (a, aInput) = Signal<Int, Never>.pipe()
        let (b, bInput) = Signal<String, Never>.pipe()
        let recorder = Recorder<(Int, String), Never>()
        a.zip(with: b).observe(recorder.observer)
        aInput.send(value: 1)
        aInput.send(value: 2)
        bInput.send(value: "a")
        aInput.send(value: 3)
        bInput.send(value: "b")
        #expect(recorder.values.map { "\($0.0)\($0.1)" } == ["1a", "2b"])
        bInput.sendCompleted()
        // `b` completed with nothing left to pair: the zip completes.
        #expect(recorder.events.last?.isCompleted == true)
    }

    @Test func zipCompletesAfterTheLastPairOfACompletedSource() {
        let (a, aInput) = Signal<Int, Never>.pipe()
        let (b, bInput) = Signal<Int, Never>.pipe()
        let recorder = Recorder<(Int, Int), Never>()
        Signal.zip(a, b).observe(recorder.observer)
        aInput.send(value: 1)
        aInput.send(value: 2)
        aInput.sendCompleted()
        #expect(recorder.terminal == nil)
        bInput.send(value: 10)
        #expect(recorder.terminal == nil)
        bInput.send(value: 20)
        #expect(recorder.values.map { [$0.0, $0.1] } == [[1, 10], [2, 20]])
        #expect(recorder.events.last?.isCompleted == true)
        #expect(recorder.events.count == 3)
    }

    @Test func fixedAritiesAndSequencesOnSignals() {
        let pipes = (0..<10).map { _ in Signal<Int, Never>.pipe() }
        let s = pipes.map(\.output)
        let ten = Recorder<(Int, Int, Int, Int, Int, Int, Int, Int, Int, Int), Never>()
        Signal.combineLatest(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9]).observe(ten.observer)
        let three = Recorder<(Int, Int, Int), Never>()
        Signal.zip(s[0], s[1], s[2]).observe(three.observer)
        let array = Recorder<[Int], Never>()
        Signal.combineLatest(s).observe(array.observer)
        let zipped = Recorder<[Int], Never>()
        Signal.zip(s[0..<4]).observe(zipped.observer)
        for (index, pipe) in pipes.enumerated() { pipe.input.send(value: index) }
        #expect(ten.values.count == 1)
        #expect(ten.values.first.map { [$0.0, $0.5, $0.9] } == [0, 5, 9])
        #expect(three.values.map { [$0.0, $0.1, $0.2] } == [[0, 1, 2]])
        #expect(array.values == [Array(0..<10)])
        #expect(zipped.values == [[0, 1, 2, 3]])
        let empty = Recorder<[Int], Never>()
        Signal<Int, Never>.combineLatest([Signal<Int, Never>]()).observe(empty.observer)
        #expect(empty.events.isEmpty)
    }

    @Test func producerFormsStartTheirSourcesOnEachRun() {
        let starts = Box(0)
        let a = SignalProducer<Int, Never>([1, 2]).on(starting: { starts.modify { $0 += 1 } })
        let b = SignalProducer<String, Never>(["x", "y"])
        let latest = SignalProducer.combineLatest(a, b)
        let first = Recorder<(Int, String), Never>()
        let second = Recorder<(Int, String), Never>()
        latest.start(first.observer)
        latest.start(second.observer)
        #expect(starts.value == 2)
        #expect(first.values.map { "\($0.0)\($0.1)" } == ["2x", "2y"])
        #expect(second.values.map { "\($0.0)\($0.1)" } == ["2x", "2y"])
        #expect(first.events.last?.isCompleted == true)

        let zipped = Recorder<(Int, String), Never>()
        a.zip(with: b).start(zipped.observer)
        #expect(zipped.values.map { "\($0.0)\($0.1)" } == ["1x", "2y"])

        let withConvertible = Recorder<(Int, Int), Never>()
        a.combineLatest(with: Property(value: 5)).start(withConvertible.observer)
        #expect(withConvertible.values.map { [$0.0, $0.1] } == [[2, 5]])
        let zipConvertible = Recorder<(Int, Int), Never>()
        a.zip(with: Property(value: 5)).start(zipConvertible.observer)
        #expect(zipConvertible.values.map { [$0.0, $0.1] } == [[1, 5]])
    }

    @Test func producerSequenceFormsAndSentinels() {
        let producers = [SignalProducer<Int, Never>(value: 1), SignalProducer(value: 2), SignalProducer(value: 3)]
        let latest = Recorder<[Int], Never>()
        SignalProducer.combineLatest(producers).start(latest.observer)
        #expect(latest.values == [[1, 2, 3]])
        let zipped = Recorder<[Int], Never>()
        SignalProducer.zip(producers).start(zipped.observer)
        #expect(zipped.values == [[1, 2, 3]])
        let sentinel = Recorder<[Int], Never>()
        SignalProducer.combineLatest([SignalProducer<Int, Never>](), emptySentinel: [42]).start(sentinel.observer)
        SignalProducer.zip([SignalProducer<Int, Never>](), emptySentinel: [43]).start(sentinel.observer)
        #expect(sentinel.values == [[42], [43]])
        let empty = Recorder<[Int], Never>()
        SignalProducer.zip([SignalProducer<Int, Never>]()).start(empty.observer)
        #expect(empty.events == [.completed])
        let four = Recorder<(Int, Int, Int, Int), Never>()
        SignalProducer.zip(producers[0], producers[1], producers[2], SignalProducer(value: 4)).start(four.observer)
        #expect(four.values.map { [$0.0, $0.1, $0.2, $0.3] } == [[1, 2, 3, 4]])
    }

    @Test func disposingACombinedRunDisposesEverySource() {
        let ended = Box(0)
        func source() -> SignalProducer<Int, Never> {
            SignalProducer { observer, lifetime in
                observer.send(value: 1)
                lifetime.observeEnded {
                    _ = observer
                    ended.modify { $0 += 1 }
                }
            }
        }
        let recorder = Recorder<(Int, Int), Never>()
        let disposable = SignalProducer.combineLatest(source(), source()).start(recorder.observer)
        #expect(recorder.values.count == 1)
        disposable.dispose()
        #expect(ended.value == 2)
        #expect(recorder.events.last?.isTerminating == true)
    }
}

@Suite("merge")
struct MergeTests {
    @Test func mergeForwardsEverySourceAndCompletesWhenAllComplete() {
        let (a, aInput) = Signal<Int, TestError>.pipe()
        let (b, bInput) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        Signal.merge(a, b).observe(recorder.observer)
        aInput.send(value: 1)
        bInput.send(value: 2)
        aInput.sendCompleted()
        bInput.send(value: 3)
        #expect(recorder.terminal == nil)
        bInput.sendCompleted()
        #expect(recorder.events == [.value(1), .value(2), .value(3), .completed])
    }

    @Test func mergeFailsAsSoonAsOneSourceFails() {
        let (a, aInput) = Signal<Int, TestError>.pipe()
        let (b, bInput) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        a.merge(with: b).observe(recorder.observer)
        aInput.send(error: TestError(code: 7))
        bInput.send(value: 1)
        #expect(recorder.events == [.failed(TestError(code: 7))])
    }

    @Test func producerMergeFormsRunEverySource() {
        let recorder = Recorder<Int, Never>()
        SignalProducer.merge([SignalProducer<Int, Never>([1, 2]), SignalProducer([3])]).start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(2), .value(3), .completed])
        let pair = Recorder<Int, Never>()
        SignalProducer<Int, Never>(value: 1).merge(with: SignalProducer(value: 2)).start(pair.observer)
        #expect(pair.values == [1, 2])
        let many = Recorder<Int, Never>()
        let p = SignalProducer<Int, Never>(value: 1)
        SignalProducer.merge(p, p, p, p, p, p, p, p, p, p).start(many.observer)
        #expect(many.values == Array(repeating: 1, count: 10))
        let signalSource = Recorder<Int, Never>()
        let (signal, input) = Signal<Int, Never>.pipe()
        SignalProducer.merge(signal, SignalProducer(value: 0)).start(signalSource.observer)
        input.send(value: 5)
        #expect(signalSource.values == [0, 5])
    }

    @Test func mergedSignalReleasedWithoutObserversStopsObservingItsSources() {
        let (a, aInput) = Signal<Int, Never>.pipe()
        weak var weakMerged: Signal<Int, Never>?
        do {
            let merged = Signal.merge([a])
            weakMerged = merged
        }
        #expect(weakMerged == nil)
        aInput.send(value: 1)
    }
}

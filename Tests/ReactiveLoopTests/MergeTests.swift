import Testing
@testable import ReactiveLoopCore

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

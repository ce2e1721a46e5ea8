import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("combineLatest and zip: arities, sequences and producer runs")
struct AggregateRunTests {
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
}

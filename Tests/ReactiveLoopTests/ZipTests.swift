import Testing
@testable import ReactiveLoopCore

@Suite("zip")
struct ZipTests {
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
}

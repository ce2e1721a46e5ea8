import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("combineLatest")
struct CombineLatestTests {
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

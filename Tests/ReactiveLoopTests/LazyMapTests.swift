import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("lazyMap(on:)")
struct LazyMapTests {
    @Test func lazyMapTransformsOnlyTheLatestValue() {
        let scheduler = TestScheduler()
        let transformed = Box<[Int]>([])
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        signal.lazyMap(on: scheduler) { value -> Int in
            transformed.modify { $0.append(value) }
            return value * 10
        }.observe(recorder.observer)
        input.send(value: 1)
        input.send(value: 2)
        input.sendCompleted()
        scheduler.advance()
        #expect(transformed.value == [2])
        #expect(recorder.events == [.value(20), .completed])
        let producer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2, 3]).lazyMap(on: scheduler) { $0 + 1 }.start(producer.observer)
        scheduler.advance()
        #expect(producer.events == [.value(4), .completed])
    }
}

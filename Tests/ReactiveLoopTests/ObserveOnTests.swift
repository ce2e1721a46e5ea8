import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("observe(on:) and start(on:)")
struct ObserveOnTests {
    @Test func observeOnAndStartOnUseTheScheduler() {
        let scheduler = TestScheduler()
        let recorder = Recorder<Int, Never>()
        let started = Box(false)
        SignalProducer<Int, Never> { observer, _ in
            started.value = true
            observer.send(value: 1)
            observer.sendCompleted()
        }.start(on: scheduler).start(recorder.observer)
        #expect(!started.value)
        scheduler.advance()
        #expect(recorder.events == [.value(1), .completed])

        let (signal, input) = Signal<Int, Never>.pipe()
        let observed = Recorder<Int, Never>()
        signal.observe(on: scheduler).observe(observed.observer)
        input.send(value: 2)
        #expect(observed.values.isEmpty)
        scheduler.advance()
        #expect(observed.values == [2])
        let producerObserved = Recorder<Int, Never>()
        SignalProducer<Int, Never>([3]).observe(on: scheduler).start(producerObserved.observer)
        #expect(producerObserved.values.isEmpty)
        scheduler.advance()
        #expect(producerObserved.events == [.value(3), .completed])
    }

    /// A run that terminated on its own schedules nothing more when its lifetime ends.
    @Test func observeOnSchedulesOneActionPerEventAndNothingAfterTheEnd() {
        let scheduler = CountingScheduler()
        let recorder = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2]).observe(on: scheduler).start(recorder.observer)
        scheduler.base.run()
        #expect(recorder.events == [.value(1), .value(2), .completed])
        #expect(scheduler.count.value == 3)
    }
}

/// A scheduler that counts what is scheduled on it.
final class CountingScheduler: Scheduler, @unchecked Sendable {
    let base = TestScheduler()
    let count = Box(0)
    func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        count.modify { $0 += 1 }
        return base.schedule(action)
    }
}

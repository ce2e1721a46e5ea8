import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("The runs of the operators that deliver on a scheduler")
struct TimedTests {
    /// Every operator that delivers on a scheduler, applied to a producer.
    static var schedulingOperators:
        [(String, (SignalProducer<Int, Never>, TestScheduler) -> SignalProducer<Int, Never>)]
    {
        [
            ("observe(on:)", { $0.observe(on: $1) }),
            ("lazyMap(on:)", { $0.lazyMap(on: $1) { $0 } }),
            ("delay", { $0.delay(1, on: $1) }),
            ("throttle", { $0.throttle(1, on: $1) }),
            ("debounce", { $0.debounce(1, on: $1) }),
        ]
    }

    /// Regression: disposing such a run delivered `interrupted` inside `dispose()`, on the
    /// disposing thread, instead of on the operator's scheduler.
    @Test func disposingARunDeliversInterruptedOnTheOperatorsScheduler() {
        for (name, apply) in Self.schedulingOperators {
            let scheduler = TestScheduler()
            let upstreamEnded = Box(false)
            let upstream = SignalProducer<Int, Never> { _, lifetime in
                lifetime.observeEnded { upstreamEnded.value = true }
            }
            let recorder = Recorder<Int, Never>()
            let disposable = apply(upstream, scheduler).start(recorder.observer)
            disposable.dispose()
            #expect(upstreamEnded.value, "\(name): upstream work is cancelled at once")
            #expect(recorder.events.isEmpty, "\(name): interrupted arrived inside dispose()")
            scheduler.run()
            #expect(recorder.events == [.interrupted], "\(name)")
        }
    }
}

/// The events one run delivered, and whether any arrived inside a given call.
final class DisposalRecorder<Value, Error: Swift.Error>: @unchecked Sendable {  // Test thread only.
    var events: [Signal<Value, Error>.Event] = []
    var insideCall = false
    var deliveredInsideCall = false

    var observer: Signal<Value, Error>.Observer {
        Signal<Value, Error>.Observer { [self] event in
            events.append(event)
            if insideCall { deliveredInsideCall = true }
        }
    }

    func during(_ body: () -> Void) {
        insideCall = true
        body()
        insideCall = false
    }

    var names: [String] {
        events.map { event in
            switch event {
            case let .value(value): "\(value)"
            case .completed: "completed"
            case .failed: "failed"
            case .interrupted: "interrupted"
            }
        }
    }
}

@Suite("Disposing a run of a scheduling operator")
struct SchedulingOperatorDisposalTests {
    /// Every scheduling operator, applied to a producer, on `scheduler`.
    nonisolated(unsafe) static let operators:
        [(String, (SignalProducer<Int, Never>, TestScheduler) -> SignalProducer<Int, Never>)] = [
            ("observe(on:)", { $0.observe(on: $1) }),
            ("lazyMap(on:)", { $0.lazyMap(on: $1) { $0 } }),
            ("throttle", { $0.throttle(1, on: $1) }),
            ("debounce(discardWhenCompleted: true)", { $0.debounce(1, on: $1, discardWhenCompleted: true) }),
            ("debounce(discardWhenCompleted: false)", { $0.debounce(1, on: $1, discardWhenCompleted: false) }),
            ("delay", { $0.delay(1, on: $1) }),
            ("collect(every:)", { $0.collect(every: .seconds(1), on: $1).map { $0.count } }),
        ]

    @Test("Queued values and completion are dropped; exactly interrupted arrives, on the scheduler", arguments: 0..<7)
    func disposalDropsQueuedEvents(index: Int) {
        let (name, apply) = Self.operators[index]
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        let disposable = apply(SignalProducer(0..<128), scheduler).start(recorder.observer)
        recorder.during { disposable.dispose() }
        #expect(recorder.events.isEmpty, "\(name): nothing is delivered inside dispose()")
        scheduler.run()
        #expect(recorder.names == ["interrupted"], "\(name)")
        #expect(!recorder.deliveredInsideCall, "\(name)")
    }

    @Test("A run disposed after its values were scheduled but before they ran delivers no value")
    func disposalAfterValuesScheduled() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        let (signal, input) = Signal<Int, Never>.pipe()
        let disposable = SignalProducer(signal).observe(on: scheduler).start(recorder.observer)
        input.send(value: 1)
        input.send(value: 2)
        disposable.dispose()
        input.send(value: 3)
        scheduler.run()
        #expect(recorder.names == ["interrupted"])
    }

    @Test("An empty producer through observe(on:), disposed before the scheduler runs, is interrupted")
    func emptyProducerDisposedIsInterrupted() {
        let scheduler = TestScheduler()
        var interrupted = 0
        var completed = 0
        let disposable = SignalProducer<Int, Never>.empty.observe(on: scheduler).start { event in
            if case .interrupted = event { interrupted += 1 }
            if case .completed = event { completed += 1 }
        }
        disposable.dispose()
        #expect(interrupted == 0)
        scheduler.run()
        #expect(interrupted == 1)
        #expect(completed == 0)
    }

    @Test("Disposing from inside a delivery drops the values still scheduled")
    func disposalFromInsideDelivery() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        let disposable = SerialDisposable()
        disposable.inner = SignalProducer(0..<10).observe(on: scheduler).start { event in
            recorder.observer.send(event)
            if case .value(1) = event { disposable.dispose() }
        }
        scheduler.run()
        #expect(recorder.names == ["0", "1", "interrupted"])
    }

    @Test("Disposing twice, or after the run completed, schedules nothing more")
    func disposalIsIdempotent() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        let first = SignalProducer(0..<3).observe(on: scheduler).start(recorder.observer)
        first.dispose()
        first.dispose()
        scheduler.run()
        #expect(recorder.names == ["interrupted"])

        let second = DisposalRecorder<Int, Never>()
        let completedRun = SignalProducer(0..<2).observe(on: scheduler).start(second.observer)
        scheduler.run()
        completedRun.dispose()
        scheduler.run()
        #expect(second.names == ["0", "1", "completed"])
    }

    @Test("timeout, which does not hop, still delivers interrupted inside dispose()")
    func timeoutInterruptsAtOnce() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        let disposable = SignalProducer<Int, Never>.never
            .timeout(after: 1, raising: CancellationTestError(), on: scheduler)
            .start { event in if case .interrupted = event { recorder.events.append(.interrupted) } }
        disposable.dispose()
        #expect(recorder.names == ["interrupted"])
    }

    @Test("Cancelled from another thread while the scheduler delivers: one terminal event, no value after it")
    func cancellationRacesDelivery() {
        for _ in 0..<200 {
            let scheduler = QueueScheduler(name: "cancellation-race")
            let lock = NSLock()
            var events: [Signal<Int, Never>.Event] = []
            let done = DispatchSemaphore(value: 0)
            let disposable = SignalProducer(0..<1_000).observe(on: scheduler).start { event in
                lock.lock()
                events.append(event)
                lock.unlock()
                if event.isTerminating { done.signal() }
            }
            disposable.dispose()
            #expect(done.wait(timeout: .now() + 10) == .success)
            lock.lock()
            let terminals = events.filter(\.isTerminating)
            #expect(terminals.count == 1)
            #expect(events.last?.isTerminating == true)
            lock.unlock()
        }
    }
}

private struct CancellationTestError: Swift.Error {}

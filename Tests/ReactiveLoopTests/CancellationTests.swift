import Foundation
import ReactiveLoop
import ReactiveLoopTestSupport
import Testing

// What happens when a run ends: a disposed run of a scheduling operator delivers exactly
// `interrupted`, on its scheduler; `startWithSignal`'s handle ends the run; a run lets go of its
// observer; the async `TestScheduler.advance` lets woken tasks run between actions.

/// The events one run delivered, and whether any arrived inside a given call.
private final class DisposalRecorder<Value, Error: Swift.Error>: @unchecked Sendable {  // Test thread only.
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

@Suite("Cancellation: disposing a run of a scheduling operator")
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

@Suite("Cancellation: startWithSignal's interrupt handle")
struct StartWithSignalHandleTests {
    @Test("Disposing the handle ends the run: observe(on:) interrupts on its scheduler, not inside dispose()")
    func handleEndsRunOfSchedulingOperator() {
        let scheduler = TestScheduler()
        let recorder = DisposalRecorder<Int, Never>()
        var handle: (any Disposable)?
        SignalProducer(0..<16).observe(on: scheduler).startWithSignal { signal, interrupter in
            signal.observe(recorder.observer)
            handle = interrupter
        }
        recorder.during { handle?.dispose() }
        #expect(recorder.events.isEmpty)
        scheduler.run()
        #expect(recorder.names == ["interrupted"])
    }

    @Test("Disposing the handle disposes the producer's resources")
    func handleDisposesRun() {
        var ended = false
        var handle: (any Disposable)?
        SignalProducer<Int, Never> { _, lifetime in lifetime.observeEnded { ended = true } }
            .map { $0 + 1 }
            .startWithSignal { signal, interrupter in
                signal.observe { _ in }
                handle = interrupter
            }
        #expect(!ended)
        handle?.dispose()
        #expect(ended)
    }

    @Test("A plain producer's run is interrupted at once by the handle")
    func handleInterruptsPlainRunAtOnce() {
        let recorder = DisposalRecorder<Int, Never>()
        SignalProducer<Int, Never>.never.startWithSignal { signal, interrupter in
            signal.observe(recorder.observer)
            interrupter.dispose()
        }
        #expect(recorder.names == ["interrupted"])
    }

    @Test("A handle disposed in setup interrupts the signal and never starts the run")
    func handleDisposedInSetup() {
        var started = false
        let recorder = DisposalRecorder<Int, Never>()
        SignalProducer<Int, Never> { _, _ in started = true }.observe(on: TestScheduler())
            .startWithSignal { signal, interrupter in
                signal.observe(recorder.observer)
                interrupter.dispose()
            }
        #expect(!started)
        #expect(recorder.names == ["interrupted"])
    }
}

@Suite("Cancellation: a run's disposable does not keep its observer")
struct RunReleasesObserverTests {
    private final class Token {}

    @Test("Disposing a never-ending run releases the observer while the disposable is still held")
    func disposedRunReleasesObserver() {
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer<Int, Never>.never.startWithValues { _ in _ = token }
        }()
        #expect(weakToken != nil)
        disposable.dispose()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }

    @Test("A run that completed by itself releases the observer while the disposable is still held")
    func completedRunReleasesObserver() {
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer(value: 1).startWithValues { _ in _ = token }
        }()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }

    @Test("A disposed run of a scheduling operator releases the observer once interrupted is delivered")
    func scheduledRunReleasesObserverAfterInterrupted() {
        let scheduler = TestScheduler()
        weak var weakToken: Token?
        let disposable: any Disposable = {
            let token = Token()
            weakToken = token
            return SignalProducer<Int, Never>.never.observe(on: scheduler).startWithValues { _ in _ = token }
        }()
        disposable.dispose()
        scheduler.run()
        #expect(weakToken == nil)
        withExtendedLifetime(disposable) {}
    }
}

/// Each scenario runs in a child process of its own (an exit test): what it checks is when
/// tasks get to run, and in this process every other test competes for the same executor.
@Suite("Cancellation: async TestScheduler.advance lets woken tasks run")
struct AsyncAdvanceTests {
    @Test("A timer loop sees currentDate at each tick, and has the tick when advance returns")
    func timerLoopSeesEachTick() async {
        await #expect(processExitsWith: .success) {
            await AsyncAdvanceScenarios.timerLoop()
        }
    }

    @Test("A task sleeping in a loop wakes once per interval within one advance")
    func sleepingLoopWakesEachInterval() async {
        await #expect(processExitsWith: .success) {
            await AsyncAdvanceScenarios.sleepingLoop()
        }
    }
}

/// The scenarios, which stop the process (a failed exit test) when a check fails.
enum AsyncAdvanceScenarios {
    @MainActor static func timerLoop() async {
        let scheduler = TestScheduler()
        let seen = Box<[(tick: Date, now: Date)]>([])
        let task = Task {
            for await date in scheduler.timer(interval: .seconds(1)) {
                let now = scheduler.currentDate
                seen.modify { $0.append((date, now)) }
            }
        }
        await scheduler.advance(by: .milliseconds(900))
        precondition(seen.value.isEmpty, "a tick before its time")
        await scheduler.advance(by: .seconds(1))
        precondition(seen.value.count == 1, "after 1.9 s: \(seen.value.count) ticks, expected 1")
        await scheduler.advance(by: .seconds(3))
        let ticks = seen.value
        precondition(ticks.count == 4, "after 4.9 s: \(ticks.count) ticks, expected 4")
        for tick in ticks { precondition(tick.tick == tick.now, "tick \(tick.tick) seen at \(tick.now)") }
        task.cancel()
    }

    @MainActor static func sleepingLoop() async {
        let scheduler = TestScheduler()
        let wakes = Box<[TimeInterval]>([])
        let start = scheduler.currentDate
        let task = Task {
            for _ in 0..<5 {
                try? await scheduler.sleep(for: .seconds(2))
                let elapsed = scheduler.currentDate.timeIntervalSince(start)
                wakes.modify { $0.append(elapsed) }
            }
        }
        await scheduler.advance(by: .seconds(10))
        precondition(wakes.value == [2, 4, 6, 8, 10], "woke at \(wakes.value)")
        task.cancel()
    }
}

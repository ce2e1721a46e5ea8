import Foundation
import Testing
@testable import ReactiveLoop

/// Records events with the virtual time (seconds since the scheduler's start) they arrived at.
final class Timeline<Value, Error: Swift.Error>: @unchecked Sendable {
    private let lock = NSLock()
    private var _entries: [(time: Double, event: Signal<Value, Error>.Event)] = []
    let scheduler: TestScheduler
    init(_ scheduler: TestScheduler) { self.scheduler = scheduler }
    var observer: Signal<Value, Error>.Observer {
        Signal.Observer { [self] event in
            let time = scheduler.currentDate.timeIntervalSinceReferenceDate
            lock.lock()
            _entries.append((time, event))
            lock.unlock()
        }
    }
    /// `"time:event"` strings, e.g. `"1.0:VALUE 2"`.
    var entries: [String] {
        lock.lock()
        defer { lock.unlock() }
        return _entries.map { "\($0.time):\($0.event)" }
    }
}

/// Sends `events` into `input` at the given virtual times.
func play<V, E>(
    _ events: [(Double, Signal<V, E>.Event)], into input: Signal<V, E>.Observer, on scheduler: TestScheduler
) {
    for (time, event) in events {
        scheduler.schedule(after: Date(timeIntervalSinceReferenceDate: time)) { input.send(event) }
    }
}

@Suite("Time operators on TestScheduler")
struct TimeOperatorTests {
    @Test func delayShiftsValuesAndCompletionAndKeepsOrder() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.delay(2, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (0.5, .value(3)), (1, .completed)], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["2.0:VALUE 1", "2.5:VALUE 2", "2.5:VALUE 3", "3.0:COMPLETED"])
    }

    @Test func delayDeliversAFailureAtOnceAndDropsWhatWaits() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, TestError>.pipe()
        let timeline = Timeline<Int, TestError>(scheduler)
        signal.delay(2, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (1, .failed(TestError()))], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["1.0:FAILED TestError(code: 0)"])
    }

    @Test func throttleSendsAtMostOneValuePerIntervalTheLatest() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.throttle(1, on: scheduler).observe(timeline.observer)
        play(
            [(0, .value(1)), (0.2, .value(2)), (0.4, .value(3)), (1.5, .value(4)), (3.5, .value(5)), (3.6, .value(6))],
            into: input, on: scheduler)
        scheduler.advance(by: 10)
        #expect(timeline.entries == ["0.0:VALUE 1", "1.0:VALUE 3", "2.0:VALUE 4", "3.5:VALUE 5", "4.5:VALUE 6"])
    }

    @Test func throttleDropsAHeldValueAtCompletion() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.throttle(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (0.6, .completed)], into: input, on: scheduler)
        scheduler.advance(by: 5)
        #expect(timeline.entries == ["0.0:VALUE 1", "0.6:COMPLETED"])
    }

    @Test func throttleWhileHoldsValuesWhileThePropertyIsTrue() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let gate = MutableProperty(false)
        let recorder = Recorder<Int, Never>()
        signal.throttle(while: gate, on: scheduler).observe(recorder.observer)
        input.send(value: 1)
        gate.value = true
        input.send(value: 2)
        input.send(value: 3)
        scheduler.advance()
        #expect(recorder.values == [1])
        gate.value = false
        scheduler.advance()
        #expect(recorder.values == [1, 3])
        let producer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([7]).throttle(while: Property(value: false), on: scheduler).start(producer.observer)
        scheduler.advance()
        #expect(producer.values == [7])
    }

    /// Regression: the producer form kept its property alive as long as the producer.
    @Test func throttleWhileProducerDoesNotRetainItsProperty() {
        weak var weakGate: MutableProperty<Bool>?
        let producer: SignalProducer<Int, Never>
        do {
            let gate = MutableProperty(false)
            weakGate = gate
            producer = SignalProducer<Int, Never>([1]).throttle(while: gate, on: TestScheduler())
        }
        #expect(weakGate == nil)
        _ = producer
    }

    @Test func debounceSendsAfterAQuietInterval() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<Int, Never>(scheduler)
        signal.debounce(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .value(2)), (1.2, .value(3)), (3, .value(4))], into: input, on: scheduler)
        scheduler.advance(by: 10)
        #expect(timeline.entries == ["2.2:VALUE 3", "4.0:VALUE 4"])
    }

    @Test func debounceAtCompletionDiscardsOrSendsThePendingValue() {
        for discard in [true, false] {
            let scheduler = TestScheduler()
            let (signal, input) = Signal<Int, Never>.pipe()
            let timeline = Timeline<Int, Never>(scheduler)
            signal.debounce(1, on: scheduler, discardWhenCompleted: discard).observe(timeline.observer)
            play([(0, .value(1)), (0.5, .completed)], into: input, on: scheduler)
            scheduler.run()
            #expect(timeline.entries == (discard ? ["0.5:COMPLETED"] : ["1.0:VALUE 1", "1.0:COMPLETED"]))
        }
    }

    @Test func debounceDeliversAFailureAtOnce() {
        let scheduler = TestScheduler()
        let timeline = Timeline<Int, TestError>(scheduler)
        let (signal, input) = Signal<Int, TestError>.pipe()
        signal.debounce(1, on: scheduler).observe(timeline.observer)
        play([(0, .value(1)), (0.5, .failed(TestError(code: 1)))], into: input, on: scheduler)
        scheduler.run()
        #expect(timeline.entries == ["0.5:FAILED TestError(code: 1)"])
    }

    @Test func timeoutFailsUnlessTerminatedFirst() {
        let scheduler = TestScheduler()
        let timeline = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, TestError>.never.timeout(after: 2, raising: TestError(code: 9), on: scheduler)
            .start(timeline.observer)
        let completed = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, TestError>(value: 1).timeout(after: 2, raising: TestError(), on: scheduler)
            .start(completed.observer)
        let promoted = Timeline<Int, TestError>(scheduler)
        SignalProducer<Int, Never>.never.timeout(after: 1, raising: TestError(code: 3), on: scheduler).start(
            promoted.observer)
        let (signal, _input) = Signal<Int, Never>.pipe()
        let viaSignal = Timeline<Int, TestError>(scheduler)
        signal.timeout(after: 3, raising: TestError(code: 4), on: scheduler).observe(viaSignal.observer)
        scheduler.run()
        #expect(timeline.entries == ["2.0:FAILED TestError(code: 9)"])
        #expect(completed.entries == ["0.0:VALUE 1", "0.0:COMPLETED"])
        #expect(promoted.entries == ["1.0:FAILED TestError(code: 3)"])
        #expect(viaSignal.entries == ["3.0:FAILED TestError(code: 4)"])
        _ = _input
    }

    @Test func timerAndIntervalTickOnTheVirtualClock() {
        let scheduler = TestScheduler()
        let dates = Timeline<Date, Never>(scheduler)
        let timer = SignalProducer<Date, Never>.timer(interval: .seconds(1), on: scheduler).start(dates.observer)
        let ints = Timeline<Int, Never>(scheduler)
        let counting = SignalProducer<Int, Never>.interval(.milliseconds(500), on: scheduler).start(ints.observer)
        let letters = Timeline<String, Never>(scheduler)
        SignalProducer<String, Never>.interval(["a", "b"], interval: .seconds(2), on: scheduler).start(letters.observer)
        scheduler.advance(by: 5)
        timer.dispose()
        counting.dispose()
        #expect(dates.entries.count == 6)
        #expect(dates.entries.first?.hasPrefix("1.0:VALUE") == true)
        #expect(ints.entries.prefix(3) == ["0.5:VALUE 0", "1.0:VALUE 1", "1.5:VALUE 2"])
        #expect(
            letters.entries == ["2.0:VALUE a", "4.0:VALUE b", "6.0:COMPLETED"]
                || letters.entries == ["2.0:VALUE a", "4.0:VALUE b"])
        scheduler.advance(by: 2)
        #expect(letters.entries == ["2.0:VALUE a", "4.0:VALUE b", "6.0:COMPLETED"])
    }

    @Test func collectEveryGroupsByInterval() {
        let scheduler = TestScheduler()
        let (signal, input) = Signal<Int, Never>.pipe()
        let timeline = Timeline<[Int], Never>(scheduler)
        signal.collect(every: .seconds(1), on: scheduler).observe(timeline.observer)
        let skipping = Timeline<[Int], Never>(scheduler)
        signal.collect(every: .seconds(1), on: scheduler, skipEmpty: true, discardWhenCompleted: false)
            .observe(skipping.observer)
        play([(0.2, .value(1)), (0.4, .value(2)), (2.5, .value(3)), (2.7, .completed)], into: input, on: scheduler)
        scheduler.advance(by: 4)
        #expect(timeline.entries == ["1.0:VALUE [1, 2]", "2.0:VALUE []", "2.7:COMPLETED"])
        // As in ReactiveSwift: kept values go out at the next tick, with the completion.
        #expect(skipping.entries == ["1.0:VALUE [1, 2]", "3.0:VALUE [3]", "3.0:COMPLETED"])
    }

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

    @Test func retryWithIntervalWaitsBetweenAttempts() {
        let scheduler = TestScheduler()
        let attempts = Timeline<Int, TestError>(scheduler)
        let count = Box(0)
        SignalProducer<Int, TestError> { observer, _ in
            count.modify { $0 += 1 }
            if count.value < 3 {
                observer.send(error: TestError(code: count.value))
            } else {
                observer.send(value: 0)
                observer.sendCompleted()
            }
        }.on(failed: { _ in }).retry(upTo: 3, interval: 2, on: scheduler).start(attempts.observer)
        scheduler.advance(by: 1)
        #expect(count.value == 1)
        scheduler.advance(by: 1)
        #expect(count.value == 2)
        scheduler.advance(by: 2)
        #expect(count.value == 3)
        #expect(attempts.entries == ["4.0:VALUE 0", "4.0:COMPLETED"])
    }

    @Test func timeOperatorsStartedTwiceRunIndependently() {
        let scheduler = TestScheduler()
        let producer = SignalProducer<Int, Never>([1, 2]).delay(1, on: scheduler)
        let first = Timeline<Int, Never>(scheduler)
        producer.start(first.observer)
        scheduler.advance(by: 0.5)
        let second = Timeline<Int, Never>(scheduler)
        producer.start(second.observer)
        scheduler.run()
        #expect(first.entries == ["1.0:VALUE 1", "1.0:VALUE 2", "1.0:COMPLETED"])
        #expect(second.entries == ["1.5:VALUE 1", "1.5:VALUE 2", "1.5:COMPLETED"])
    }

    @Test func disposingADelayedRunDropsWhatWaits() {
        let scheduler = TestScheduler()
        let recorder = Recorder<Int, Never>()
        let disposable = SignalProducer<Int, Never>([1]).concat(.never).delay(1, on: scheduler).start(recorder.observer)
        disposable.dispose()
        scheduler.run()
        #expect(recorder.events == [.interrupted])
    }
}

extension TimeOperatorTests {
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

/// A scheduler that counts what is scheduled on it.
final class CountingScheduler: Scheduler, @unchecked Sendable {
    let base = TestScheduler()
    let count = Box(0)
    func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        count.modify { $0 += 1 }
        return base.schedule(action)
    }
}

extension TimeOperatorTests {
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

@Suite("Time operators on QueueScheduler")
struct RealTimeOperatorTests {
    /// The same scenarios on a real queue, with generous bounds; no speed is measured.
    @Test func delayThrottleDebounceAndTimeoutOnARealQueue() {
        let scheduler = QueueScheduler(name: "time operators")
        let done = DispatchSemaphore(value: 0)
        let delayed = Recorder<Int, Never>()
        SignalProducer<Int, Never>([1, 2]).delay(0.05, on: scheduler).start { event in
            delayed.observer.send(event)
            if event.isTerminating { done.signal() }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(delayed.events == [.value(1), .value(2), .completed])

        let (signal, input) = Signal<Int, Never>.pipe()
        let debounced = Recorder<Int, Never>()
        let debouncedDone = DispatchSemaphore(value: 0)
        signal.debounce(0.05, on: scheduler).on(value: { _ in debouncedDone.signal() }).observe(debounced.observer)
        let throttled = Recorder<Int, Never>()
        signal.throttle(10, on: scheduler).observe(throttled.observer)
        for value in 1...5 { input.send(value: value) }
        #expect(debouncedDone.wait(timeout: .now() + 10) == .success)
        scheduler.queue.sync {}
        #expect(debounced.values == [5])
        // The first value opened the window; by the time the scheduler sent it, 5 had replaced it.
        #expect(throttled.values.count == 1)

        let timedOut = DispatchSemaphore(value: 0)
        SignalProducer<Int, TestError>.never.timeout(after: 0.05, raising: TestError(), on: scheduler)
            .startWithFailed { _ in timedOut.signal() }
        #expect(timedOut.wait(timeout: .now() + 10) == .success)
    }
}

extension RealTimeOperatorTests {
    /// Waits for the run's terminal event (or `count` values) with a generous bound.
    func collectEvents<V>(
        _ producer: SignalProducer<V, Never>, values count: Int = .max
    ) -> [Signal<V, Never>.Event] {
        let events = Box<[Signal<V, Never>.Event]>([])
        let done = DispatchSemaphore(value: 0)
        let disposable = producer.start { event in
            let total = events.modify { events -> Int in
                events.append(event)
                return events.count
            }
            if event.isTerminating || total == count { done.signal() }
        }
        _ = done.wait(timeout: .now() + 10)
        disposable.dispose()
        return events.value
    }

    @Test func timerIntervalAndCollectEveryOnARealQueue() {
        let scheduler = QueueScheduler(name: "real timers")
        let ticks = collectEvents(SignalProducer.timer(interval: .milliseconds(10), on: scheduler), values: 3)
        #expect(ticks.count >= 3)
        let counted = collectEvents(SignalProducer.interval(.milliseconds(10), on: scheduler), values: 3)
        #expect(counted.compactMap(\.value).prefix(3) == [0, 1, 2])
        let letters = collectEvents(SignalProducer.interval(["a", "b"], interval: .milliseconds(10), on: scheduler))
        #expect(letters == [.value("a"), .value("b"), .completed])
        let (signal, input) = Signal<Int, Never>.pipe()
        let groups = Box<[[Int]]>([])
        let got = DispatchSemaphore(value: 0)
        signal.collect(every: .milliseconds(20), on: scheduler, skipEmpty: true).observeValues { group in
            groups.modify { $0.append(group) }
            got.signal()
        }
        input.send(value: 1)
        input.send(value: 2)
        #expect(got.wait(timeout: .now() + 10) == .success)
        #expect(groups.value.first == [1, 2])
    }

    @Test func observeOnStartOnLazyMapAndRetryOnARealQueue() {
        let scheduler = QueueScheduler(name: "real hops")
        let key = DispatchSpecificKey<Bool>()
        scheduler.queue.setSpecific(key: key, value: true)
        let onQueue = Box<[Bool]>([])
        let observed = collectEvents(
            SignalProducer<Int, Never>([1, 2]).observe(on: scheduler).on(value: { _ in
                onQueue.modify { $0.append(DispatchQueue.getSpecific(key: key) == true) }
            }))
        #expect(observed == [.value(1), .value(2), .completed])
        #expect(onQueue.value == [true, true])
        let startedOnQueue = Box(false)
        let started = collectEvents(
            SignalProducer<Int, Never> { observer, _ in
                startedOnQueue.value = DispatchQueue.getSpecific(key: key) == true
                observer.send(value: 3)
                observer.sendCompleted()
            }.start(on: scheduler))
        #expect(started == [.value(3), .completed])
        #expect(startedOnQueue.value)
        let lazy = collectEvents(SignalProducer<Int, Never>([1, 2, 3]).lazyMap(on: scheduler) { $0 * 10 })
        // On a real queue a transform may run between two sends; the last value always makes
        // it, in order, before the completion.
        let lazyValues = lazy.compactMap(\.value)
        #expect(lazyValues.last == 30)
        #expect(lazyValues == lazyValues.sorted())
        #expect(lazy.last == .completed)
        let attempts = Box(0)
        let retried = collectEvents(
            SignalProducer<Int, TestError> { observer, _ in
                attempts.modify { $0 += 1 }
                if attempts.value < 2 {
                    observer.send(error: TestError())
                } else {
                    observer.send(value: 9)
                    observer.sendCompleted()
                }
            }.retry(upTo: 2, interval: 0.01, on: scheduler).flatMapError { _ in SignalProducer<Int, Never>.empty })
        #expect(retried == [.value(9), .completed])
    }
}

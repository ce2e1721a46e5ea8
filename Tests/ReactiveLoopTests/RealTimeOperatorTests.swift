import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

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

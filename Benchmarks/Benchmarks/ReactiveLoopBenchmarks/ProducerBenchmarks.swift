// Producers, flatten, Action, properties and schedulers: the paths beyond a single send, each
// beside its OpenCombine or Dispatch equivalent in the same run.
//
// Each benchmark performs `scaledIterations` operations: one operation is one producer start
// (run to completion), one inner producer, one `apply` round trip, one property change or one
// scheduled action.

import Benchmark
import Dispatch
import Foundation
import OpenCombine
@_spi(Testing) import ReactiveLoop

/// The flatten strategies, by the names the benchmark table uses.
let flattenStrategies: [(name: String, strategy: FlattenStrategy)] = [
    ("merge", .merge), ("concat", .concat), ("latest", .latest), ("race", .race),
    ("concurrent(limit: 4)", .concurrent(limit: 4)), ("throttle", .throttle),
]

func producerBenchmarks() {
    let perStart = Benchmark.Configuration(scalingFactor: .kilo)

    // MARK: Producers

    // Producer runs deliver through serial sinks, never through a signal core: no core kinds.

    Benchmark("SignalProducer(value:) start, made once (lock-free)", configuration: perStart) { benchmark in
        var sum = 0
        let producer = SignalProducer<Int, Never>(value: 1)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { producer.startWithValues { sum &+= $0 } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("SignalProducer of 1,000 values, per value (lock-free)") { benchmark in
        var sum = 0
        let producer = SignalProducer<Int, Never>(0..<1_000)
        benchmark.startMeasurement()
        for _ in 0..<(benchmark.scaledIterations.count / 1_000) { producer.startWithValues { sum &+= $0 } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("OpenCombine: Just start", configuration: perStart) { benchmark in
        var sum = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { _ = Just(index).sink { sum &+= $0 } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("OpenCombine: sequence of 1,000 values, per value") { benchmark in
        var sum = 0
        let publisher = (0..<1_000).publisher
        benchmark.startMeasurement()
        for _ in 0..<(benchmark.scaledIterations.count / 1_000) { _ = publisher.sink { sum &+= $0 } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Flatten: one operation is one inner producer

    for (strategyName, strategy) in flattenStrategies {
        Benchmark("flatMap(.\(strategyName)), per inner producer", configuration: perStart) { benchmark in
            var sum = 0
            let inners = SignalProducer<Int, Never>(0..<1_000)
            benchmark.startMeasurement()
            for _ in 0..<(benchmark.scaledIterations.count / 1_000) {
                inners.flatMap(strategy) { SignalProducer<Int, Never>(value: $0) }.startWithValues { sum &+= $0 }
            }
            benchmark.stopMeasurement()
            blackHole(sum)
        }
    }

    Benchmark("OpenCombine: flatMap (merge), per inner publisher", configuration: perStart) { benchmark in
        var sum = 0
        let inners = (0..<1_000).publisher
        benchmark.startMeasurement()
        for _ in 0..<(benchmark.scaledIterations.count / 1_000) {
            _ = inners.flatMap { Just($0) }.sink { sum &+= $0 }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("OpenCombine: flatMap(maxPublishers: 1) (concat), per inner publisher", configuration: perStart) {
        benchmark in
        var sum = 0
        let inners = (0..<1_000).publisher
        benchmark.startMeasurement()
        for _ in 0..<(benchmark.scaledIterations.count / 1_000) {
            _ = inners.flatMap(maxPublishers: .max(1)) { Just($0) }.sink { sum &+= $0 }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("OpenCombine: map + switchToLatest (latest), per inner publisher", configuration: perStart) {
        benchmark in
        var sum = 0
        let inners = (0..<1_000).publisher
        benchmark.startMeasurement()
        for _ in 0..<(benchmark.scaledIterations.count / 1_000) {
            _ = inners.map { Just($0) }.switchToLatest().sink { sum &+= $0 }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Action

    Benchmark("Action.apply round trip", configuration: perStart) { benchmark in
        var sum = 0
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            action.apply(index).startWithResult { if case let .success(value) = $0 { sum &+= value } }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Properties

    // Properties always have the lock-free core: no core kinds.

    Benchmark("combineLatest of 3 properties, set one (lock-free)") { benchmark in
        var sum = 0
        let (first, second, third) = (MutableProperty(0), MutableProperty(0), MutableProperty(0))
        let combined = first.combineLatest(with: second).combineLatest(with: third)
        combined.signal.observeValues { sum &+= $0.0.0 &+ $0.1 }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { first.value = index }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("Binding <~ into a MutableProperty, per value (lock-free)") { benchmark in
        var sum = 0
        let (source, input) = Signal<Int, Never>.pipe()
        let target = MutableProperty(0)
        target.signal.observeValues { sum &+= $0 }
        target <~ source
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { input.send(value: index) }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("OpenCombine: CurrentValueSubject send, 1 subscriber") { benchmark in
        var sum = 0
        let subject = CurrentValueSubject<Int, Never>(0)
        let subscription = subject.sink { sum &+= $0 }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { subject.send(index) }
        benchmark.stopMeasurement()
        blackHole(sum)
        subscription.cancel()
    }

    // OpenCombine 0.14 has no combineLatest, so the property benchmarks have no peer for it.

    // MARK: Schedulers: one operation is one scheduled action

    let actions = Benchmark.Configuration(scalingFactor: .mega, maxIterations: shortMode ? 1 : 5)

    Benchmark("ImmediateScheduler.schedule, 1M actions", configuration: actions) { benchmark in
        let scheduler = ImmediateScheduler()
        var sum = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { scheduler.schedule { sum &+= index } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("TestScheduler.schedule, 1M actions, then run", configuration: actions) { benchmark in
        let scheduler = TestScheduler()
        var sum = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { scheduler.schedule { sum &+= index } }
        scheduler.run()
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Time operators on a real scheduler: the scheduler's clock against the date round trip

    for clock in [_TimeOperatorClock.schedulerClock, .dates] {
        let name = clock == .schedulerClock ? "scheduler clock" : "dates"

        // One timer armed per run: what every time operator pays when it arms one.
        Benchmark("timeout(after: 3600, on: QueueScheduler) start and dispose (\(name))", configuration: perStart) {
            benchmark in
            let scheduler = QueueScheduler(name: "benchmark")
            let producer = withClock(clock) {
                SignalProducer<Int, TimeoutBenchmarkError>.never
                    .timeout(after: 3600, raising: TimeoutBenchmarkError(), on: scheduler)
            }
            // An earlier pending timer, so that arming and disposing never re-arms the queue's.
            let earlier = scheduler.schedule(after: Date(timeIntervalSinceNow: 1_800)) {}
            defer { earlier?.dispose() }
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { producer.start().dispose() }
            benchmark.stopMeasurement()
        }

        // One clock read per input (the timer is armed once and stays pending).
        Benchmark("debounce(3600, on: QueueScheduler), per input (\(name))") { benchmark in
            let scheduler = QueueScheduler(name: "benchmark")
            let (signal, input) = Signal<Int, Never>.pipe()
            var sum = 0
            withClock(clock) { signal.debounce(3600, on: scheduler) }.observeValues { sum &+= $0 }
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations { input.send(value: index) }
            benchmark.stopMeasurement()
            blackHole(sum)
        }
    }
}

/// The failure of the timeout benchmarks.
struct TimeoutBenchmarkError: Error {}

func withClock<R>(_ clock: _TimeOperatorClock, _ body: () -> R) -> R {
    let previous = _TimeOperatorClock.current
    _TimeOperatorClock.current = clock
    defer { _TimeOperatorClock.current = previous }
    return body()
}

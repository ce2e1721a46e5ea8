// ReactiveLoop core benchmarks: the lock-free core against the lock-based reference core and
// against OpenCombine, side by side in one run. Run from this folder:
//
//   swift package --allow-writing-to-package-directory benchmark
//
// Each benchmark performs `scaledIterations` operations (1M or 1k); the table reports time
// per operation and mallocs per operation. With BENCHMARK_SHORT=1 in the environment every
// benchmark runs a few iterations only: the allocation counts are the same, the times are
// rougher (CI checks the allocation thresholds this way).

import Benchmark
import Dispatch
import Foundation
import OpenCombine
@_spi(Testing) import ReactiveLoop

/// Whether the suite runs in its short mode (`BENCHMARK_SHORT=1`): a few iterations each.
let shortMode = ProcessInfo.processInfo.environment["BENCHMARK_SHORT"] != nil

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        scalingFactor: .mega,
        maxDuration: shortMode ? .milliseconds(200) : .seconds(3),
        maxIterations: shortMode ? 3 : 100,
        // Allocation counts are checked against Benchmarks/Thresholds (scripts/benchmark-thresholds):
        // they are totals per run, so one more allocation per operation moves them by a thousand
        // or a million; the tolerance only absorbs one-off allocations (a buffer growing).
        thresholds: [.mallocCountTotal: .init(absolute: [.p90: 100])]
    )

    // MARK: Baselines

    Benchmark("Baseline: plain closure call") { benchmark in
        var sum = 0
        let closure: (Int) -> Void = { sum &+= $0 }
        let call = identity(closure)
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { call(index) }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // The closure above pays a dynamic exclusivity check on its captured `var` (most of its
    // cost). This one adds into memory it does not own as a Swift variable, so the call is
    // nearly free: with it, the send benchmarks below show the signal's own cost undiluted.
    Benchmark("Baseline: trivial closure call") { benchmark in
        let sum = Accumulator()
        let closure: (Int) -> Void = { sum.pointer.pointee &+= $0 }
        let call = identity(closure)
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { call(index) }
        benchmark.stopMeasurement()
        blackHole(sum.pointer.pointee)
    }

    Benchmark("Baseline: 5 closures called directly") { benchmark in
        var sum = 0
        let stages: [(Int) -> Int] = identity([{ $0 &+ 1 }, { $0 &* 3 }, { $0 &- 2 }, { $0 ^ 5 }, { $0 &+ 7 }])
        let (f1, f2, f3, f4, f5) = (stages[0], stages[1], stages[2], stages[3], stages[4])
        let sink: (Int) -> Void = identity { sum &+= $0 }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { sink(f5(f4(f3(f2(f1(index)))))) }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    for kind in [_SignalCoreKind.lockFree, .locked] {
        let name = kind == .lockFree ? "lock-free" : "locked"

        Benchmark("Send to 1 observer (\(name))") { benchmark in
            let input = makePipe(kind: kind, observers: 1)
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations { input.send(value: index) }
            benchmark.stopMeasurement()
        }

        Benchmark("Send to 1 observer, trivial closure (\(name))") { benchmark in
            let sum = Accumulator()
            let (signal, input) = withKind(kind) { Signal<Int, Never>.pipe() }
            signal.observeValues { sum.pointer.pointee &+= $0 }
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations { input.send(value: index) }
            benchmark.stopMeasurement()
            blackHole(sum.pointer.pointee)
        }

        for observers in [10, 100] {
            Benchmark("Send to \(observers) observers (\(name))") { benchmark in
                let input = makePipe(kind: kind, observers: observers)
                benchmark.startMeasurement()
                for index in benchmark.scaledIterations { input.send(value: index) }
                benchmark.stopMeasurement()
            }
        }

        Benchmark("Chain of 5 map/filter (\(name))") { benchmark in
            var sum = 0
            let (signal, input) = withKind(kind) { Signal<Int, Never>.pipe() }
            let first = signal.map { (value: Int) -> Int in value &+ 1 }.filter { (value: Int) -> Bool in value != -1 }
            let second = first.map { (value: Int) -> Int in value &* 3 }.filter { (value: Int) -> Bool in value != -2 }
            second.map { (value: Int) -> Int in value &- 2 }.observeValues { sum &+= $0 }
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations { input.send(value: index) }
            benchmark.stopMeasurement()
            blackHole(sum)
        }

        for threads in [2, 4] {
            Benchmark("\(threads) threads sending into one pipe (\(name))") { benchmark in
                // One scaled iteration is one send: each thread sends its share of them.
                let input = makePipe(kind: kind, observers: 1)
                let perThread = benchmark.scaledIterations.count / threads
                benchmark.startMeasurement()
                DispatchQueue.concurrentPerform(iterations: threads) { thread in
                    for index in 0..<perThread { input.send(value: index &+ thread) }
                }
                benchmark.stopMeasurement()
            }
        }
    }

    // Producer runs and properties never use a signal core of the selected kind: lock-free only.

    Benchmark("SignalProducer(value:) start, made per start (lock-free)", configuration: .init(scalingFactor: .kilo)) {
        benchmark in
        var sum = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            SignalProducer<Int, Never>(value: index).startWithValues { sum &+= $0 }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("SignalProducer start handler (lock-free)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var sum = 0
        let producer = SignalProducer<Int, Never> { observer, _ in
            observer.send(value: 1)
            observer.sendCompleted()
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { producer.startWithValues { sum &+= $0 } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("MutableProperty set, 1 observer (lock-free)") { benchmark in
        var sum = 0
        let property = MutableProperty(0)
        property.signal.observeValues { sum &+= $0 }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { property.value = index }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // The same, observed through `start` on the property's producer: values reach the start's
    // closure through the object it registers on the property's core.
    Benchmark("MutableProperty set, observed through producer.start") { benchmark in
        var sum = 0
        let property = MutableProperty(0)
        let observation = property.producer.start { if case let .value(value) = $0 { sum &+= value } }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { property.value = index }
        benchmark.stopMeasurement()
        observation.dispose()
        blackHole(sum)
    }

    // The same chain on a producer's run: each value goes through the run's observers hop by
    // hop, as through the signals above.
    Benchmark("Chain of 5 map/filter on a producer, per value") { benchmark in
        var sum = 0
        let count = benchmark.scaledIterations.count
        let source = SignalProducer<Int, Never> { observer, _ in
            for index in 0..<count { observer.send(value: index) }
        }
        let chain = source.map { (value: Int) -> Int in value &+ 1 }.filter { (value: Int) -> Bool in value != -1 }
            .map { (value: Int) -> Int in value &* 3 }.filter { (value: Int) -> Bool in value != -2 }
            .map { (value: Int) -> Int in value &- 2 }
        benchmark.startMeasurement()
        chain.startWithValues { sum &+= $0 }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Memory

    // 100,000 properties, each with one observer, all kept until the end: the mallocs and the
    // bytes asked of malloc, per sample (divide by 100,000 for one property).
    let memory = Benchmark.Configuration(
        metrics: [.mallocCountTotal, .mallocBytesCount, .mallocFreeDelta, .memoryLeakedBytes], scalingFactor: .one,
        maxDuration: shortMode ? .milliseconds(200) : .seconds(5), maxIterations: shortMode ? 2 : 5)
    func keepingProperties(_ benchmark: Benchmark, _ make: () -> (AnyObject, Any)) {
        var kept: [(AnyObject, Any)] = []
        kept.reserveCapacity(100_000)
        benchmark.startMeasurement()
        for _ in 0..<100_000 { kept.append(make()) }
        benchmark.stopMeasurement()
        blackHole(kept)
    }
    Benchmark("Memory: 100k MutableProperty<Int>, each observed through its producer", configuration: memory) {
        keepingProperties($0) {
            let property = MutableProperty(0)
            return (property, property.producer.startWithValues { blackHole($0) })
        }
    }
    Benchmark(
        "Memory: 100k MutableProperty<Int>, each observed through producer.start", configuration: memory
    ) {
        keepingProperties($0) {
            let property = MutableProperty(0)
            return (property, property.producer.start { if case let .value(value) = $0 { blackHole(value) } })
        }
    }
    Benchmark(
        "Memory: 100k MutableProperty<Int>, each observed through an operator on its producer", configuration: memory
    ) {
        keepingProperties($0) {
            let property = MutableProperty(0)
            return (property, property.producer.map { $0 }.startWithValues { blackHole($0) })
        }
    }
    Benchmark("Memory: 100k MutableProperty<Int>, each observed through its signal", configuration: memory) {
        keepingProperties($0) {
            let property = MutableProperty(0)
            return (property, property.signal.observeValues { blackHole($0) } as Any)
        }
    }
    Benchmark("OpenCombine: memory of 100k CurrentValueSubject<Int> with a sink", configuration: memory) {
        keepingProperties($0) {
            let subject = CurrentValueSubject<Int, Never>(0)
            return (subject, subject.sink { blackHole($0) })
        }
    }
    Benchmark(
        "OpenCombine: memory of 100k CurrentValueSubject<Int> with a map and a sink", configuration: memory
    ) {
        keepingProperties($0) {
            let subject = CurrentValueSubject<Int, Never>(0)
            return (subject, subject.map { $0 }.sink { blackHole($0) })
        }
    }

    // MARK: Operators

    Benchmark("combineLatest of 3, a value on each") { benchmark in
        var sum = 0
        let pipes = (0..<3).map { _ in Signal<Int, Never>.pipe() }
        Signal.combineLatest(pipes[0].output, pipes[1].output, pipes[2].output).observeValues { sum &+= $0.0 &+ $0.2 }
        for pipe in pipes { pipe.input.send(value: 0) }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            pipes[index % 3].input.send(value: index)
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark("replayLazily(upTo: 10), 10 late observers", configuration: .init(scalingFactor: .kilo)) { benchmark in
        var sum = 0
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let replayed = SignalProducer<Int, Never>(0..<10).replayLazily(upTo: 10)
            for _ in 0..<10 { replayed.startWithValues { sum &+= $0 } }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    // MARK: Schedulers and time

    for (name, make) in [
        (
            "throttle(1, on: TestScheduler)",
            { (signal: Signal<Int, Never>, scheduler: TestScheduler) in signal.throttle(1, on: scheduler) }
        ),
        (
            "debounce(1, on: TestScheduler)",
            { (signal: Signal<Int, Never>, scheduler: TestScheduler) in signal.debounce(1, on: scheduler) }
        ),
        (
            "delay(1, on: TestScheduler)",
            { (signal: Signal<Int, Never>, scheduler: TestScheduler) in signal.delay(1, on: scheduler) }
        ),
    ] {
        for kind in [_SignalCoreKind.lockFree, .locked] {
            Benchmark("\(name), per input (\(kind == .lockFree ? "lock-free" : "locked"))") { benchmark in
                var sum = 0
                let scheduler = TestScheduler()
                let (signal, input) = withKind(kind) { Signal<Int, Never>.pipe() }
                withKind(kind) { make(signal, scheduler) }.observeValues { sum &+= $0 }
                benchmark.startMeasurement()
                for index in benchmark.scaledIterations { input.send(value: index) }
                benchmark.stopMeasurement()
                scheduler.run()
                blackHole(sum)
            }
        }
    }

    Benchmark(
        "QueueScheduler.schedule, 1M actions",
        configuration: .init(scalingFactor: .mega, maxIterations: shortMode ? 1 : 5)
    ) {
        benchmark in
        let scheduler = QueueScheduler(name: "benchmark")
        var sum = 0
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { scheduler.schedule { sum &+= index } }
        scheduler.queue.sync {}
        benchmark.stopMeasurement()
        blackHole(sum)
    }

    Benchmark(
        "DispatchQueue.async, 1M actions", configuration: .init(scalingFactor: .mega, maxIterations: shortMode ? 1 : 5)
    ) {
        benchmark in
        let queue = DispatchQueue(label: "benchmark")
        let sum = Counter()
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { queue.async { sum.value &+= index } }
        queue.sync {}
        benchmark.stopMeasurement()
        blackHole(sum.value)
    }

    // MARK: Peer

    for subscribers in [1, 10, 100] {
        Benchmark("OpenCombine: send to \(subscribers) subscriber\(subscribers == 1 ? "" : "s")") { benchmark in
            var sum = 0
            let subject = PassthroughSubject<Int, Never>()
            let subscriptions = (0..<subscribers).map { _ in subject.sink { sum &+= $0 } }
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations { subject.send(index) }
            benchmark.stopMeasurement()
            blackHole(sum)
            for subscription in subscriptions { subscription.cancel() }
        }
    }

    Benchmark("OpenCombine: chain of 5 map/filter") { benchmark in
        var sum = 0
        let subject = PassthroughSubject<Int, Never>()
        let first = subject.map { (value: Int) -> Int in value &+ 1 }.filter { (value: Int) -> Bool in value != -1 }
        let second = first.map { (value: Int) -> Int in value &* 3 }.filter { (value: Int) -> Bool in value != -2 }
        let subscription = second.map { (value: Int) -> Int in value &- 2 }.sink { sum &+= $0 }
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations { subject.send(index) }
        benchmark.stopMeasurement()
        blackHole(sum)
        subscription.cancel()
    }

    // MARK: Producers, flatten, Action, properties (ProducerBenchmarks.swift)

    producerBenchmarks()

    // MARK: Event loop (LoopBenchmarks.swift)

    loopBenchmarks()
}

/// A pipe on the given core kind with `observers` summing observers; returns its input.
func makePipe(kind: _SignalCoreKind, observers: Int) -> Signal<Int, Never>.Observer {
    let (signal, input) = withKind(kind) { Signal<Int, Never>.pipe() }
    for _ in 0..<observers {
        var sum = 0
        signal.observeValues { sum &+= $0 }
    }
    return input
}

func withKind<R>(_ kind: _SignalCoreKind, _ body: () -> R) -> R {
    let previous = _SignalCoreKind.current
    _SignalCoreKind.current = kind
    defer { _SignalCoreKind.current = previous }
    return body()
}

/// An integer behind a pointer: adding to it costs no exclusivity check.
final class Accumulator: @unchecked Sendable {
    let pointer = UnsafeMutablePointer<Int>.allocate(capacity: 1)
    init() { pointer.initialize(to: 0) }
    deinit { pointer.deallocate() }
}

/// A counter touched only on one serial queue.
final class Counter: @unchecked Sendable {
    var value = 0
}

/// Hides a value from the optimizer so that baselines are not folded away.
@inline(never)
func identity<T>(_ value: T) -> T { value }

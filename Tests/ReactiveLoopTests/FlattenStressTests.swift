import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Flatten strategies under concurrency: inner runs complete on other threads while the outer
/// sends. Nothing is lost or repeated, and order is what each strategy promises. Part of the
/// `Stress` filter, so CI also runs it under ThreadSanitizer.
@Suite("Stress: flatten strategies", .serialized)
struct FlattenStressTests {
    static let queue = DispatchQueue(label: "inner runs", attributes: .concurrent)

    /// An inner producer that sends `count` values starting at `base` from another thread.
    static func inner(_ base: Int, count: Int) -> SignalProducer<Int, Never> {
        SignalProducer { observer, lifetime in
            queue.async {
                for offset in 0..<count where !lifetime.hasEnded { observer.send(value: base + offset) }
                observer.sendCompleted()
            }
        }
    }

    static func run(_ producer: SignalProducer<Int, Never>) -> (values: [Int], terminal: Signal<Int, Never>.Event?) {
        let values = Box<[Int]>([])
        let terminal = Box<Signal<Int, Never>.Event?>(nil)
        let done = DispatchSemaphore(value: 0)
        producer.start { event in
            if case let .value(value) = event {
                values.modify { $0.append(value) }
            } else {
                terminal.value = event
                done.signal()
            }
        }
        _ = done.wait(timeout: .now() + 60)
        return (values.value, terminal.value)
    }

    /// Inners that end inside their start (which flatten starts with one reused observer on
    /// the thread that starts its inners) mixed with inners that complete on other threads,
    /// whose completions start the next inners there while this thread sends more: inners are
    /// started from several threads at once, and each runs once, whole.
    @Test(arguments: [(FlattenStrategy.merge, false), (.concurrent(limit: 2), false), (.concat, true)])
    func immediateInnersStartedFromSeveralThreadsEachRunOnce(_ strategy: FlattenStrategy, ordered: Bool) {
        for _ in 0..<20 {
            let (outer, outerInput) = Signal<Int, Never>.pipe()
            let values = Box<[Int]>([])
            let done = DispatchSemaphore(value: 0)
            outer.flatMap(strategy) { index in
                index % 2 == 0
                    ? Self.inner(index * 10, count: 10) : SignalProducer<Int, Never>((index * 10)..<(index * 10 + 10))
            }
            .observe { event in
                if case let .value(value) = event { values.modify { $0.append(value) } } else { done.signal() }
            }
            for index in 0..<200 { outerInput.send(value: index) }
            outerInput.sendCompleted()
            #expect(done.wait(timeout: .now() + 60) == .success)
            #expect(values.value.sorted() == Array(0..<2_000))
            if ordered { #expect(values.value == Array(0..<2_000)) }
        }
    }

    @Test func concatKeepsInnerOrderWithInnersOnOtherThreads() {
        let (values, terminal) = Self.run(
            SignalProducer<Int, Never>(0..<100).flatMap(.concat) { Self.inner($0 * 50, count: 50) })
        #expect(terminal == .completed)
        #expect(values == Array(0..<5_000))
    }

    @Test func concurrentLimitDeliversEverythingAndKeepsEachInnersOrder() {
        let (values, terminal) = Self.run(
            SignalProducer<Int, Never>(0..<100).flatMap(.concurrent(limit: 3)) { Self.inner($0 * 50, count: 50) })
        #expect(terminal == .completed)
        #expect(values.sorted() == Array(0..<5_000))
        var last = [Int: Int]()
        for value in values {
            #expect((last[value / 50] ?? -1) < value)
            last[value / 50] = value
        }
    }

    @Test func latestForwardsOnlyTheCurrentInnerWhileTheOuterSendsFromAnotherThread() {
        let (outer, outerInput) = Signal<Int, Never>.pipe()
        let values = Box<[Int]>([])
        let terminal = Box<Signal<Int, Never>.Event?>(nil)
        let done = DispatchSemaphore(value: 0)
        SignalProducer(outer).flatMap(.latest) { Self.inner($0 * 1_000, count: 200) }.start { event in
            if case let .value(value) = event {
                values.modify { $0.append(value) }
            } else {
                terminal.value = event
                done.signal()
            }
        }
        let sender = DispatchSemaphore(value: 0)
        Thread.detachNewThreadShim {
            for index in 0..<50 { outerInput.send(value: index) }
            outerInput.sendCompleted()
            sender.signal()
        }
        sender.wait()
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(terminal.value == .completed)
        // Inners are replaced in order: once a value of inner n arrived, nothing of an older
        // inner may follow, and values within an inner keep their order.
        var newestInner = -1
        var lastValue = -1
        for value in values.value {
            let inner = value / 1_000
            #expect(inner >= newestInner)
            if inner > newestInner { newestInner = inner } else { #expect(value > lastValue) }
            lastValue = value
        }
        // The last inner is never replaced, so all of its values arrive.
        #expect(values.value.filter { $0 / 1_000 == 49 }.count == 200)
    }

    @Test func mergeOfSignalsAndPropertiesAsInners() {
        let pipes = (0..<4).map { _ in Signal<Int, Never>.pipe() }
        let recorder = Recorder<Int, Never>()
        SignalProducer<Signal<Int, Never>, Never>(pipes.map(\.output)).flatten(.merge).start(recorder.observer)
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            for value in 0..<1_000 { pipes[index].input.send(value: index * 1_000 + value) }
            pipes[index].input.sendCompleted()
        }
        #expect(recorder.values.sorted() == Array(0..<4_000))
        #expect(recorder.terminal == .completed)

        let properties = [MutableProperty(1), MutableProperty(2)]
        let fromProperties = Recorder<Int, Never>()
        SignalProducer<MutableProperty<Int>, Never>(properties).flatten(.latest).start(fromProperties.observer)
        properties[0].value = 10
        properties[1].value = 20
        #expect(fromProperties.values == [1, 2, 20])
    }
}

@Suite("Leaks: stateful operators")
struct OperatorLeakTests {
    /// Runs `make` with a tracked resource in its inputs, terminates, and checks the resource
    /// was released.
    @Test func combineLatestZipAndSampleReleaseTheirInputsOnTermination() {
        for kind in 0..<4 {
            let released = Box(false)
            let (a, aInput) = Signal<Int, Never>.pipe()
            let (b, bInput) = Signal<Int, Never>.pipe()
            do {
                let tracked = Tracked { released.value = true }
                let combined: Signal<Int, Never> =
                    switch kind {
                    case 0: a.combineLatest(with: b).map { $0.0 + $0.1 }
                    case 1: a.zip(with: b).map { $0.0 + $0.1 }
                    case 2: a.sample(with: b).map { $0.0 + $0.1 }
                    default: a.withLatest(from: b).map { $0.0 + $0.1 }
                    }
                combined.observeValues { _ in _ = tracked }
            }
            #expect(!released.value)
            aInput.sendInterrupted()
            #expect(released.value, "operator \(kind)")
            _ = bInput
        }
    }

    @Test func replayLazilyReleasesItsConsumersWhenTheRunEnds() {
        let released = Box(false)
        let (signal, input) = Signal<Int, Never>.pipe()
        let replayed = SignalProducer(signal).replayLazily(upTo: 3)
        do {
            let tracked = Tracked { released.value = true }
            replayed.startWithValues { _ in _ = tracked }
        }
        #expect(!released.value)
        input.sendCompleted()
        #expect(released.value)
    }

    @Test func flattenLatestReleasesReplacedInners() {
        let released = Box(0)
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        outer.flatten(.latest).observeValues { _ in }
        for _ in 0..<3 {
            let tracked = Tracked { released.modify { $0 += 1 } }
            outerInput.send(
                value: SignalProducer { observer, lifetime in
                    lifetime.observeEnded { _ = (observer, tracked) }
                })
        }
        #expect(released.value == 2)
        outerInput.sendInterrupted()
        #expect(released.value == 3)
    }

    @Test func takeUntilReleasesTheTriggerObservation() {
        let released = Box(false)
        let (signal, input) = Signal<Int, Never>.pipe()
        let (trigger, fire) = Signal<(), Never>.pipe()
        do {
            let tracked = Tracked { released.value = true }
            signal.take(until: trigger).observeValues { _ in _ = tracked }
        }
        fire.send(value: ())
        #expect(released.value)
        _ = input
    }
}

extension FlattenStressTests {
    /// `latest` with inners that end inside their start (which it admits as one reused inner
    /// run), the outer values sent from two threads at once: the outer stream delivers one
    /// value at a time, so each inner delivers all of its values, in order, before the next
    /// replaces it, and the flatten completes after the last.
    @Test func latestOfImmediateInnersSentFromTwoThreadsDeliversEachWhole() {
        for _ in 0..<20 {
            let (outer, outerInput) = Signal<Int, Never>.pipe()
            let values = Box<[Int]>([])
            let terminal = Box<Signal<Int, Never>.Event?>(nil)
            outer.flatMap(.latest) { base in SignalProducer<Int, Never>((base * 100)..<(base * 100 + 20)) }
                .observe { event in
                    if case let .value(value) = event {
                        values.modify { $0.append(value) }
                    } else {
                        terminal.value = event
                    }
                }
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                for index in 0..<200 { outerInput.send(value: 1 + thread * 1_000 + index) }
            }
            outerInput.send(value: 5_000)
            outerInput.sendCompleted()
            #expect(terminal.value == .completed)
            let delivered = values.value
            #expect(delivered.count == 401 * 20)
            for start in stride(from: 0, to: delivered.count, by: 20) {
                let base = delivered[start] / 100
                let inner = Array(delivered[start..<min(start + 20, delivered.count)])
                #expect(inner == Array((base * 100)..<(base * 100 + 20)))
            }
            #expect(delivered.last == 5_000 * 100 + 19)
        }
    }
}

import Foundation
import ReactiveLoopTestSupport
import Synchronization
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// Guarantee 1 under load: events are serial, every value arrives, each sender's values keep
/// their order, and the terminal event comes last. The observers keep plain, unsynchronized
/// state: under `--sanitize=thread` any overlap between two deliveries is reported as a race.
@Suite("Stress", .serialized)
struct StressTests {
    /// An observer that checks the delivery contract as it goes.
    final class CheckingObserver: @unchecked Sendable {  // Relies on the serial delivery under test.
        let inFlight = Atomic<Int>(0)
        var overlaps = 0
        var count = 0
        var lastSequence: [Int]
        var outOfOrder = 0
        var terminal: Signal<Int, Never>.Event?
        var afterTerminal = 0

        init(threads: Int) { lastSequence = Array(repeating: -1, count: threads) }

        func receive(_ event: Signal<Int, Never>.Event, threads: Int) {
            if inFlight.wrappingAdd(1, ordering: .relaxed).newValue != 1 { overlaps += 1 }
            defer { inFlight.wrappingSubtract(1, ordering: .relaxed) }
            if terminal != nil {
                afterTerminal += 1
                return
            }
            switch event {
            case let .value(value):
                count += 1
                let thread = value % threads
                let sequence = value / threads
                if sequence <= lastSequence[thread] { outOfOrder += 1 }
                lastSequence[thread] = sequence
            default:
                terminal = event
            }
        }
    }

    static var valuesPerThread: Int {
        ProcessInfo.processInfo.environment["REACTIVELOOP_STRESS_VALUES"].flatMap(Int.init) ?? 100_000
    }

    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func eightThreadsSendingIntoOnePipeAreSerializedAndNothingIsLost(kind: _SignalCoreKind) {
        let threads = 8
        let perThread = Self.valuesPerThread
        let observers = (0..<3).map { _ in CheckingObserver(threads: threads) }
        let input: Signal<Int, Never>.Observer = withCoreKind(kind) {
            let (signal, input) = Signal<Int, Never>.pipe()
            for observer in observers {
                signal.observe { observer.receive($0, threads: threads) }
            }
            return input
        }
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for sequence in 0..<perThread {
                input.send(value: sequence * threads + thread)
            }
        }
        input.sendCompleted()
        input.send(value: -1)

        for observer in observers {
            #expect(observer.count == threads * perThread)
            #expect(observer.overlaps == 0)
            #expect(observer.outOfOrder == 0)
            #expect(observer.terminal == .completed)
            #expect(observer.afterTerminal == 0)
            #expect(observer.lastSequence == Array(repeating: perThread - 1, count: threads))
        }
    }

    @Test func terminalEventFromAnotherThreadDuringDeliveryIsDeliveredOnceAndLast() {
        for _ in 0..<200 {
            let (signal, input) = Signal<Int, Never>.pipe()
            let observer = CheckingObserver(threads: 1)
            signal.observe { observer.receive($0, threads: 1) }
            let started = DispatchSemaphore(value: 0)
            let finished = DispatchSemaphore(value: 0)
            Thread {
                started.signal()
                for value in 0..<1_000 { input.send(value: value) }
                finished.signal()
            }.start()
            started.wait()
            // Posted if the sender is delivering: it then arrives right after that delivery,
            // on the sender's thread, before the sender's `send` returns.
            input.sendInterrupted()
            finished.wait()
            #expect(observer.terminal == .interrupted)
            #expect(observer.overlaps == 0)
            #expect(observer.afterTerminal == 0)
            #expect(observer.outOfOrder == 0)
        }
    }

    @Test func observersAddedAndRemovedWhileOtherThreadsSend() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let steady = CheckingObserver(threads: 2)
        signal.observe { steady.receive($0, threads: 2) }
        let perThread = 20_000
        DispatchQueue.concurrentPerform(iterations: 3) { worker in
            if worker < 2 {
                for sequence in 0..<perThread { input.send(value: sequence * 2 + worker) }
            } else {
                for _ in 0..<2_000 {
                    let transient = CheckingObserver(threads: 2)
                    let disposable = signal.observe { transient.receive($0, threads: 2) }
                    disposable?.dispose()
                    #expect(transient.overlaps == 0)
                }
            }
        }
        input.sendCompleted()
        #expect(steady.count == 2 * perThread)
        #expect(steady.overlaps == 0)
        #expect(steady.outOfOrder == 0)
        #expect(steady.terminal == .completed)
    }

    @Test func mutablePropertySetFromManyThreadsDeliversChangesInTheOrderTheyWereMade() {
        let property = MutableProperty(0)
        let delivered = Box<[Int]>([])
        final class Last: @unchecked Sendable { var value = 0 }  // Relies on serial delivery.
        let last = Last()
        var decreasing = 0
        property.signal.observeValues { value in
            if value < last.value { decreasing += 1 }
            last.value = value
        }
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<10_000 { property.modify { $0 += 1 } }
        }
        #expect(property.value == 40_000)
        #expect(last.value == 40_000)
        #expect(decreasing == 0)
        _ = delivered
    }

    /// `startWithValues` on a property's producer registers on the core directly: a start in
    /// the middle of another thread's sets loses nothing and repeats nothing, and a disposal
    /// racing the property's release lets go of the closure once, whichever wins.
    @Test func propertyStartWithValuesRacingSetsDisposalAndRelease() {
        for _ in 0..<200 {
            let holder = Box<MutableProperty<Int>?>(MutableProperty(0))  // Released by one thread.
            let producer = holder.value!.producer
            let seen = Box<[Int]>([])  // Confined to the property's serial delivery.
            weak var weakTracked: Tracked?
            let halfway = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            // Weakly: the block, which Dispatch releases some time after it ran, must not be
            // the property's last owner.
            DispatchQueue.global().async { [weak property = holder.value] in
                for value in 1...100 {
                    property?.value = value
                    if value == 50 { halfway.signal() }
                }
                done.signal()
            }
            nonisolated(unsafe) let disposable: any Disposable  // Disposables are thread safe.
            do {
                let tracked = Tracked()
                weakTracked = tracked
                halfway.wait()
                disposable = producer.startWithValues { value in
                    _ = tracked
                    seen.value.append(value)
                }
            }
            done.wait()
            #expect(seen.value.last == 100)
            #expect(zip(seen.value, seen.value.dropFirst()).allSatisfy { $0 + 1 == $1 })
            // The release of the property (its completion) races the disposal.
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                if side == 0 { disposable.dispose() } else { holder.value = nil }
            }
            #expect(weakTracked == nil)
            #expect(disposable.isDisposed)
        }
    }

    /// `start` with a closure of every event on a property's producer registers on the core
    /// directly, with no serializing sink: a disposal from another thread, racing the sets
    /// (and, every other round, the release of the property, which completes it once the
    /// sets are done), ends the run with one terminal event after the values it got, never
    /// inside or beside a delivery.
    @Test func propertyStartOfEveryEventRacingSetsDisposalAndRelease() {
        for round in 0..<400 {
            let releasing = round % 2 == 1
            let holder = Box<MutableProperty<Int>?>(MutableProperty(0))  // Released by one thread.
            let observer = CheckingObserver(threads: 1)
            weak var weakTracked: Tracked?
            nonisolated(unsafe) let disposable: any Disposable  // Disposables are thread safe.
            do {
                let tracked = Tracked()
                weakTracked = tracked
                disposable = holder.value!.producer.start { event in
                    _ = tracked
                    observer.receive(event, threads: 1)
                }
            }
            let halfway = DispatchSemaphore(value: 0)
            DispatchQueue.concurrentPerform(iterations: releasing ? 3 : 2) { side in
                switch side {
                case 0:
                    // Weakly: the property goes when the third side lets go of it.
                    weak var property = holder.value
                    for value in 1...200 {
                        property?.value = value
                        if value == 20 { for _ in 0..<(releasing ? 2 : 1) { halfway.signal() } }
                    }
                case 1:
                    halfway.wait()
                    disposable.dispose()
                default:
                    halfway.wait()
                    holder.value = nil
                }
            }
            #expect(observer.overlaps == 0)
            #expect(observer.outOfOrder == 0)
            #expect(observer.afterTerminal == 0)
            if releasing {
                #expect(observer.terminal == .interrupted || observer.terminal == .completed)
            } else {
                #expect(observer.terminal == .interrupted)
            }
            #expect(weakTracked == nil)
        }
    }

    /// Two threads disposing one run of a property's producer at once: one `interrupted`.
    @Test func propertyStartOfEveryEventDisposedFromTwoThreadsAtOnce() {
        for _ in 0..<500 {
            let property = MutableProperty(0)
            let observer = CheckingObserver(threads: 1)
            nonisolated(unsafe) let disposable = property.producer.start { observer.receive($0, threads: 1) }
            DispatchQueue.concurrentPerform(iterations: 2) { _ in disposable.dispose() }
            #expect(observer.terminal == .interrupted)
            #expect(observer.afterTerminal == 0)
            #expect(observer.overlaps == 0)
        }
    }

    @Test func flattenMergeWithInnerProducersCompletingOnOtherThreads() {
        let inners = 200
        let perInner = 50
        let received = Box<[Int]>([])
        let terminal = Box<Signal<Int, Never>.Event?>(nil)
        let done = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "inner", attributes: .concurrent)
        SignalProducer<Int, Never>(0..<inners)
            .flatMap(.merge) { inner in
                SignalProducer<Int, Never> { observer, _ in
                    queue.async {
                        for value in 0..<perInner { observer.send(value: inner * perInner + value) }
                        observer.sendCompleted()
                    }
                }
            }
            .start { event in
                switch event {
                case let .value(value): received.modify { $0.append(value) }
                default:
                    terminal.value = event
                    done.signal()
                }
            }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(terminal.value == .completed)
        #expect(received.value.sorted() == Array(0..<(inners * perInner)))
        // Each inner's values keep their order.
        var lastPerInner = [Int: Int]()
        for value in received.value {
            let inner = value / perInner
            #expect((lastPerInner[inner] ?? -1) < value)
            lastPerInner[inner] = value
        }
    }

    /// Regression: a value released when the gate opened was scheduled after the decision was
    /// made, so a newer value forwarded meanwhile by another thread could be delivered first.
    @Test func throttleWhileNeverDeliversAnOlderHeldValueAfterANewerOne() {
        let queue = DispatchQueue(label: "throttle-while")
        let scheduler = QueueScheduler(queue: queue)
        let deadline = Date().addingTimeInterval(20)
        for _ in 0..<100 where Date() < deadline {
            let gate = MutableProperty(false)
            let (signal, input) = Signal<Int, Never>.pipe()
            let received = Box<[Int]>([])
            signal.throttle(while: gate, on: scheduler).observeValues { value in received.modify { $0.append(value) } }
            let toggled = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                for index in 0..<300 { gate.value = index % 2 == 0 }
                gate.value = false
                toggled.signal()
            }
            for value in 1...300 { input.send(value: value) }
            toggled.wait()
            queue.sync {}
            let values = received.value
            #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "out of order: \(values)")
        }
    }
}

extension StressTests {
    /// An action applied from four threads at once runs one execution at a time: every apply
    /// either runs (and gets its own input back) or fails with `disabled`, `isExecuting`
    /// alternates between `false` and `true` (never twice the same), and it ends `false`. The
    /// recorder keeps plain state, so an overlapping delivery is a race under
    /// `--sanitize=thread`.
    @Test func anActionAppliedFromFourThreadsRunsOneExecutionAtATime() {
        final class Recorded: @unchecked Sendable {  // Written only by serial deliveries.
            var executing: [Bool] = []
        }
        let threads = 4
        let perThread = min(Self.valuesPerThread / 20, 5_000)
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        let recorded = Recorded()
        action.isExecuting.producer.startWithValues { recorded.executing.append($0) }
        let ran = Atomic<Int>(0)
        let disabled = Atomic<Int>(0)
        let misdelivered = Atomic<Int>(0)  // Values that reached another apply's run.
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                let input = thread * perThread + index
                action.apply(input).startWithResult { result in
                    switch result {
                    case let .success(value):
                        ran.wrappingAdd(1, ordering: .relaxed)
                        if value != input { misdelivered.wrappingAdd(1, ordering: .relaxed) }
                    case .failure: disabled.wrappingAdd(1, ordering: .relaxed)
                    }
                }
            }
        }
        let runs = ran.load(ordering: .relaxed)
        #expect(misdelivered.load(ordering: .relaxed) == 0)
        #expect(runs + disabled.load(ordering: .relaxed) == threads * perThread)
        #expect(runs > 0)
        #expect(recorded.executing.count == 1 + 2 * runs)
        #expect(zip(recorded.executing, recorded.executing.dropFirst()).allSatisfy { $0 != $1 })
        #expect(recorded.executing.last == false)
        #expect(!action.isExecuting.value)
        #expect(action.isEnabled.value)
    }

    /// Executions that deliver on a queue of their own, applied from three threads that each
    /// wait for their run to end before applying again: every run gets its own input back or
    /// `disabled`, and exactly once.
    @Test func executionsDeliveringOnAQueueReachOnlyTheirOwnRuns() {
        let perThread = min(Self.valuesPerThread / 100, 1_000)
        let scheduler = QueueScheduler(queue: DispatchQueue(label: "action-executions"))
        let action = Action<Int, Int, Never> { SignalProducer(value: $0).start(on: scheduler) }
        let ran = Atomic<Int>(0)
        let disabled = Atomic<Int>(0)
        let wrong = Atomic<Int>(0)  // Values or terminal events that reached another run.
        DispatchQueue.concurrentPerform(iterations: 3) { thread in
            for index in 0..<perThread {
                let input = thread * perThread + index
                let ended = DispatchSemaphore(value: 0)
                let received = Box<[Int]>([])
                action.apply(input).start { event in
                    switch event {
                    case let .value(value): received.modify { $0.append(value) }
                    case .completed:
                        if received.value != [input] { wrong.wrappingAdd(1, ordering: .relaxed) }
                        ran.wrappingAdd(1, ordering: .relaxed)
                        ended.signal()
                    case .failed(.disabled):
                        disabled.wrappingAdd(1, ordering: .relaxed)
                        ended.signal()
                    case .failed, .interrupted:
                        wrong.wrappingAdd(1, ordering: .relaxed)
                        ended.signal()
                    }
                }
                ended.wait()
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0)
        #expect(ran.load(ordering: .relaxed) + disabled.load(ordering: .relaxed) == 3 * perThread)
        #expect(ran.load(ordering: .relaxed) > 0)
        #expect(!action.isExecuting.value)
    }

    /// `isExecuting`, made while three threads apply the action, misses and repeats no change:
    /// from its first value on it alternates, and it ends `false`. Whichever of the two
    /// threads reading it first gets there, both get the same property.
    @Test func isExecutingFirstReadWhileOtherThreadsApplyMissesNoChange() {
        final class Recorded: @unchecked Sendable {  // Written only by serial deliveries.
            var executing: [Bool] = []
            var properties: [ObjectIdentifier?] = [nil, nil]
        }
        let perThread = min(Self.valuesPerThread / 20, 5_000)
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        let recorded = Recorded()
        DispatchQueue.concurrentPerform(iterations: 5) { thread in
            if thread >= 3 {
                for _ in 0..<(perThread / 4) { action.apply(0).start() }
                let property = action.isExecuting
                recorded.properties[thread - 3] = ObjectIdentifier(property)
                if thread == 3 { property.producer.startWithValues { recorded.executing.append($0) } }
                return
            }
            for index in 0..<perThread { action.apply(index).start() }
        }
        #expect(recorded.properties[0] != nil && recorded.properties[0] == recorded.properties[1])
        #expect(!recorded.executing.isEmpty)
        #expect(zip(recorded.executing, recorded.executing.dropFirst()).allSatisfy { $0 != $1 })
        #expect(recorded.executing.last == false)
    }
}

import Foundation
import ReactiveLoopTestSupport
import Synchronization
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// A value type that names the producer of the sink contention test in reports.
struct SinkContentionMarker: Sendable { let value: Int }

/// The serializing input of a producer run (a start handler's observer): serial, reentrant
/// sends queued, terminal events from other threads never blocking, nothing after the end.
@Suite("Producer run delivery")
struct SerialSinkTests {
    @Test func aSendFromInsideADeliveryIsQueuedAndDeliveredBeforeTheOuterSendReturns() {
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        var received: [Int] = []
        producer.startWithValues { value in
            received.append(value)
            if value == 1 {
                input.value?.send(value: 2)
                input.value?.send(value: 3)
                // Queued: not delivered yet, inside the delivery of 1.
                #expect(received == [1])
            }
        }
        input.value?.send(value: 1)
        #expect(received == [1, 2, 3])
        input.value?.send(value: 4)
        #expect(received == [1, 2, 3, 4])
    }

    @Test func afterTheTerminalEventSendsAreDroppedAndTheObserverIsReleased() {
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        let recorder = Recorder<Int, Never>()
        weak var weakTracked: Tracked?
        do {
            let tracked = Tracked()
            weakTracked = tracked
            producer.start { event in
                withExtendedLifetime(tracked) { recorder.observer.send(event) }
            }
        }
        input.value?.send(value: 1)
        input.value?.sendCompleted()
        input.value?.send(value: 2)
        input.value?.sendInterrupted()
        #expect(recorder.events == [.value(1), .completed])
        // The start handler still holds its observer; what it delivered to is gone.
        #expect(input.value != nil)
        #expect(weakTracked == nil)
    }

    @Test func aTerminalEventFromAnotherThreadDoesNotWaitForTheDeliveryInProgress() {
        let recorder = Recorder<Int, Never>()
        let inDelivery = DispatchSemaphore(value: 0)
        let disposed = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        let run = producer.start { event in
            recorder.observer.send(event)
            if event.value == 1 {
                inDelivery.signal()
                // Held until the other thread's disposal has returned: it must not wait for us.
                #expect(disposed.wait(timeout: .now() + 10) == .success)
            }
        }
        Thread {
            input.value?.send(value: 1)
            input.value?.send(value: 2)
            finished.signal()
        }.start()
        inDelivery.wait()
        run.dispose()
        disposed.signal()
        finished.wait()
        // Delivered by the sending thread right after the value it was delivering.
        #expect(recorder.events == [.value(1), .interrupted])
    }

    @Test func concurrentSendersAreSerializedInOneRun() {
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        let inFlight = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let count = Atomic<Int>(0)
        producer.startWithValues { _ in
            if inFlight.wrappingAdd(1, ordering: .relaxed).newValue != 1 { overlaps.add(1, ordering: .relaxed) }
            count.add(1, ordering: .relaxed)
            inFlight.wrappingSubtract(1, ordering: .relaxed)
        }
        let observer = input.value!
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for value in 0..<5_000 { observer.send(value: value) }
        }
        #expect(count.load(ordering: .relaxed) == 20_000)
        #expect(overlaps.load(ordering: .relaxed) == 0)
    }

    /// A send from thread B into a run whose delivery on thread A waits for B deadlocks (as in
    /// ReactiveSwift). Debug builds say so once the send has waited: the test breaks the
    /// deadlock with a timeout and reads the report.
    @Test func aSendWaitingForADeliveryThatWaitsForItIsReportedOnce() {
        #if DEBUG
            let ours = contentionReports(naming: "SinkContentionMarker") { onValue in
                let input = Box<Signal<SinkContentionMarker, Never>.Observer?>(nil)
                let producer = SignalProducer<SinkContentionMarker, Never> { observer, _ in input.value = observer }
                producer.startWithValues { onValue($0.value) }
                return { input.value?.send(value: SinkContentionMarker(value: $0)) }
            }
            #expect(ours.count == 1)
            #expect(
                ours.first?.contains("has waited 0.2 s for a delivery of SignalProducer<SinkContentionMarker, Never>")
                    == true)
        #endif
    }
}

/// The run's serializing input under load: many senders, and disposal racing them. The observers
/// keep plain, unsynchronized state, so under `--sanitize=thread` an overlap is a reported race.
@Suite("Stress: producer runs", .serialized)
struct SerialSinkStressTests {
    @Test func eightThreadsSendingIntoOneRunAreSerializedAndNothingIsLost() {
        let threads = 8
        let perThread = max(1, StressTests.valuesPerThread / 10)
        let checker = StressTests.CheckingObserver(threads: threads)
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
        producer.start { checker.receive($0, threads: threads) }
        let observer = input.value!
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for sequence in 0..<perThread { observer.send(value: sequence * threads + thread) }
        }
        observer.sendCompleted()
        observer.send(value: -1)
        #expect(checker.count == threads * perThread)
        #expect(checker.overlaps == 0)
        #expect(checker.outOfOrder == 0)
        #expect(checker.terminal == .completed)
        #expect(checker.afterTerminal == 0)
    }

    @Test func disposalRacingSendersEndsEachRunOnceAndLast() {
        for _ in 0..<200 {
            let checker = StressTests.CheckingObserver(threads: 2)
            let input = Box<Signal<Int, Never>.Observer?>(nil)
            let producer = SignalProducer<Int, Never> { observer, _ in input.value = observer }
            let run = Box<any Disposable>(producer.start { checker.receive($0, threads: 2) })
            let observer = input.value!
            DispatchQueue.concurrentPerform(iterations: 3) { worker in
                if worker < 2 {
                    for sequence in 0..<500 { observer.send(value: sequence * 2 + worker) }
                } else {
                    run.value.dispose()
                }
            }
            #expect(checker.terminal == .interrupted)
            #expect(checker.overlaps == 0)
            #expect(checker.afterTerminal == 0)
            #expect(checker.outOfOrder == 0)
        }
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("MutableProperty")
struct MutablePropertyTests {
    @Test func producerSendsTheCurrentValueThenChangesAndSignalOnlyChanges() {
        let property = MutableProperty(1)
        let producer = Recorder<Int, Never>()
        let signal = Recorder<Int, Never>()
        property.producer.start(producer.observer)
        property.signal.observe(signal.observer)
        property.value = 2
        property.value = 3
        #expect(producer.values == [1, 2, 3])
        #expect(signal.values == [2, 3])
    }

    @Test func swapModifyAndWithValue() {
        let property = MutableProperty(1)
        let recorder = Recorder<Int, Never>()
        property.signal.observe(recorder.observer)
        #expect(property.swap(5) == 1)
        let result = property.modify { value -> String in
            value += 1
            return "modified"
        }
        #expect(result == "modified")
        #expect(property.withValue { $0 * 2 } == 12)
        #expect(recorder.values == [5, 6])
    }

    @Test func modifyThatThrowsLeavesNoDeliveryBehind() {
        let property = MutableProperty(1)
        let recorder = Recorder<Int, Never>()
        property.signal.observe(recorder.observer)
        #expect(throws: TestError.self) {
            try property.modify { value in
                value = 9
                throw TestError()
            }
        }
        property.value = 2
        #expect(recorder.values == [2])
    }

    @Test func lifetimeEndsAndStreamsCompleteWhenThePropertyGoesAway() {
        var property: MutableProperty<Int>? = MutableProperty(0)
        let ended = Box(false)
        let completed = Box(false)
        property!.lifetime.observeEnded { ended.value = true }
        property!.producer.startWithCompleted { completed.value = true }
        property = nil
        #expect(ended.value)
        #expect(completed.value)
    }

    /// The lifetime is made on first read, from any thread: every read, on every thread, gets
    /// the same one, and it ends with the property even while something else holds it.
    @Test func theLifetimeIsOneObjectAndEndsWithThePropertyWhileHeldElsewhere() {
        var property: MutableProperty<Int>? = MutableProperty(0)
        let seen = Box<[ObjectIdentifier]>([])
        do {
            nonisolated(unsafe) let shared = property!  // Only read, by the threads below.
            DispatchQueueShim.concurrentPerform(iterations: 8) { _ in
                let identity = ObjectIdentifier(shared.lifetime)
                seen.modify { $0.append(identity) }
            }
        }
        #expect(Set(seen.value).count == 1)
        let lifetime = property!.lifetime
        #expect(ObjectIdentifier(lifetime) == seen.value.first)
        #expect(!lifetime.hasEnded)
        property = nil
        #expect(lifetime.hasEnded)
    }

    @Test func producerStartedFromAnotherThreadWhileSettingLosesNothing() {
        for _ in 0..<50 {
            let property = MutableProperty(0)
            let recorder = Recorder<Int, Never>()
            let done = DispatchSemaphoreShim()
            Thread.detachNewThreadShim {
                for value in 1...200 { property.value = value }
                done.signal()
            }
            property.producer.start(recorder.observer)
            done.wait()
            let values = recorder.values
            // The first value is whatever was current; every later change follows, in order.
            #expect(values.last == 200)
            #expect(zip(values, values.dropFirst()).allSatisfy { $0 + 1 == $1 })
        }
    }

    /// Regression: a held producer of the property kept its signal open after the property
    /// was released.
    @Test func streamsCompleteWhenThePropertyIsReleasedWhileItsProducerIsHeld() {
        var property: MutableProperty<Int>? = MutableProperty(0)
        let producer = property!.producer
        let fromProducer = Recorder<Int, Never>()
        let fromSignal = Recorder<Int, Never>()
        producer.start(fromProducer.observer)
        property!.signal.observe(fromSignal.observer)
        property = nil
        #expect(fromProducer.events == [.value(0), .completed])
        #expect(fromSignal.events == [.completed])
        // A start after the property went away sees its last value and completes at once.
        let late = Recorder<Int, Never>()
        producer.start(late.observer)
        #expect(late.events == [.value(0), .completed])
    }

    /// Regression: a finished inner run kept by flatten(.concat) held the property's streams open.
    @Test func streamsCompleteWhenThePropertyIsReleasedWhileFlattenHoldsItsProducer() {
        var property: MutableProperty<Int>? = MutableProperty(0)
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        outer.flatten(.concat).observe(recorder.observer)
        outerInput.send(value: property!.producer)
        outerInput.sendCompleted()
        property!.value = 1
        property = nil
        #expect(recorder.events == [.value(0), .value(1), .completed])
    }

    /// Regression: a producer started during a delivery, after a reentrant set, saw the newest
    /// value twice (once as its current value, once as the queued delivery).
    @Test func producerStartedAfterAReentrantSetSeesTheNewestValueOnce() {
        let property = MutableProperty(0)
        let late = Recorder<Int, Never>()
        property.signal.observeValues { value in
            guard value == 1 else { return }
            property.value = 2
            property.producer.start(late.observer)
        }
        property.value = 1
        property.value = 3
        #expect(late.values == [2, 3])
        #expect(property.value == 3)
    }
}

import Foundation
import Testing
@testable import ReactiveLoop

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
}

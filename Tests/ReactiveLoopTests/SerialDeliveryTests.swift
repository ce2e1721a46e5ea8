import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Signals and producer runs share one delivery mechanism, so the rules about who delivers what,
/// and when, are the same for both.
@Suite("One delivery mechanism for signals and producer runs")
struct SerialDeliveryTests {
    /// What delivers: a signal's core (a pipe) or a producer run's serial sink.
    enum Target: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case signal
        case producerRun
        var testDescription: String { rawValue }
    }

    /// The input of a new `target`, observed by `action`.
    static func makeInput(
        _ target: Target, _ action: @escaping (Signal<Int, Never>.Event) -> Void
    ) -> Signal<Int, Never>.Observer {
        switch target {
        case .signal:
            let (signal, input) = Signal<Int, Never>.pipe()
            signal.observe(action)
            return input
        case .producerRun:
            let input = Box<Signal<Int, Never>.Observer?>(nil)
            SignalProducer<Int, Never> { observer, _ in input.value = observer }.start(action)
            return input.value!
        }
    }

    @Test(
        "A terminal event posted from another thread during a delivery goes before the values queued by it",
        arguments: Target.allCases)
    func aPostedTerminalEventGoesBeforeQueuedValues(target: Target) {
        let events = Box<[Signal<Int, Never>.Event]>([])
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let inDelivery = DispatchSemaphore(value: 0)
        let posted = DispatchSemaphore(value: 0)
        input.value = Self.makeInput(target) { event in
            events.value.append(event)
            guard event.value == 1 else { return }
            // Queued behind this delivery.
            input.value?.send(value: 2)
            input.value?.send(value: 3)
            inDelivery.signal()
            posted.wait()
        }
        let poster = Thread {
            inDelivery.wait()
            // Returns at once: the delivering thread delivers it.
            input.value?.sendCompleted()
            posted.signal()
        }
        poster.start()
        #expect(runWithWatchdog { input.value?.send(value: 1) })
        #expect(events.value == [.value(1), .completed])
        input.value?.send(value: 4)
        #expect(events.value == [.value(1), .completed])
    }

    @Test("Sends after the terminal event are dropped without taking ownership", arguments: Target.allCases)
    func sendsAfterTheEndAreDropped(target: Target) {
        let events = Box<[Signal<Int, Never>.Event]>([])
        let input = Self.makeInput(target) { events.value.append($0) }
        input.send(value: 1)
        input.sendInterrupted()
        for value in 2..<100 { input.send(value: value) }
        input.sendCompleted()
        #expect(events.value == [.value(1), .interrupted])
    }
}

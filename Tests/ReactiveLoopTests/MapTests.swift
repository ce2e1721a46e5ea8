import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("Map, filter and friends")
struct MapTests {
    struct Point { var x: Int }

    @Test func signalMapFormsTransformValuesAndPassTerminals() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let mapped = Recorder<Int, TestError>()
        let constant = Recorder<String, TestError>()
        let keyPath = Recorder<Int, TestError>()
        signal.map { $0 * 2 }.observe(mapped.observer)
        signal.map(value: "x").observe(constant.observer)
        signal.map { Point(x: $0) }.map(\.x).observe(keyPath.observer)
        input.send(value: 1)
        input.send(value: 2)
        input.send(error: TestError(code: 1))
        #expect(mapped.events == [.value(2), .value(4), .failed(TestError(code: 1))])
        #expect(constant.events == [.value("x"), .value("x"), .failed(TestError(code: 1))])
        #expect(keyPath.events == [.value(1), .value(2), .failed(TestError(code: 1))])
    }

    @Test func filterCompactMapSkipNilAndMapError() {
        let (signal, input) = Signal<Int?, TestError>.pipe()
        let filtered = Recorder<Int?, TestError>()
        let compact = Recorder<String, TestError>()
        let unwrapped = Recorder<Int, TestError>()
        let errors = Recorder<Int?, TestError>()
        signal.filter { ($0 ?? 0) > 1 }.observe(filtered.observer)
        signal.compactMap { $0.map(String.init) }.observe(compact.observer)
        signal.skipNil().observe(unwrapped.observer)
        signal.mapError { TestError(code: $0.code * 10) }.observe(errors.observer)
        input.send(value: 1)
        input.send(value: nil)
        input.send(value: 3)
        input.send(error: TestError(code: 2))
        #expect(filtered.events == [.value(3), .failed(TestError(code: 2))])
        #expect(compact.events == [.value("1"), .value("3"), .failed(TestError(code: 2))])
        #expect(unwrapped.events == [.value(1), .value(3), .failed(TestError(code: 2))])
        #expect(errors.events.last == .failed(TestError(code: 20)))
    }

    @Test func aViewOfATerminatedSignalInterruptsNewObservers() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let mapped = signal.map { $0 + 1 }.filter { _ in true }
        input.sendCompleted()
        let recorder = Recorder<Int, Never>()
        #expect(mapped.observe(recorder.observer) == nil)
        #expect(recorder.events == [.interrupted])
    }

    @Test func completedAndInterruptedPassThroughEveryStatelessOperator() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.map { $0 }.filter { _ in false }.compactMap { $0 }.mapError { $0 }.observe(recorder.observer)
        input.send(value: 1)
        input.sendCompleted()
        #expect(recorder.events == [.completed])
        let (other, otherInput) = Signal<Int, TestError>.pipe()
        let interrupted = Recorder<Int, TestError>()
        other.map { $0 }.compactMap { $0 }.observe(interrupted.observer)
        otherInput.sendInterrupted()
        #expect(interrupted.events == [.interrupted])
    }

    @Test func disposingAViewObservationStopsIt() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let recorder = Recorder<Int, Never>()
        let disposable = signal.map { $0 * 3 }.observe(recorder.observer)
        input.send(value: 1)
        disposable?.dispose()
        input.send(value: 2)
        #expect(recorder.values == [3])
    }

    @Test func producerMapFormsAreAppliedOnEveryRun() {
        let producer = SignalProducer<Int?, TestError>(values: 1, nil, 3)
        let mapped = Recorder<Int, TestError>()
        producer.map { ($0 ?? 0) * 2 }.start(mapped.observer)
        #expect(mapped.events == [.value(2), .value(0), .value(6), .completed])

        let chain = Recorder<String, TestError>()
        producer.skipNil().filter { $0 > 1 }.map(value: "v").start(chain.observer)
        #expect(chain.events == [.value("v"), .completed])

        let compact = Recorder<Int, TestError>()
        producer.compactMap { $0 }.map { Point(x: $0) }.map(\.x).start(compact.observer)
        producer.compactMap { $0 }.start(compact.observer)
        #expect(compact.values == [1, 3, 1, 3])

        let errors = Recorder<Int, TestError>()
        SignalProducer<Int, TestError>(error: TestError(code: 1)).mapError { TestError(code: $0.code + 1) }
            .start(errors.observer)
        #expect(errors.events == [.failed(TestError(code: 2))])
    }

    /// map, filter, compactMap and mapError hand values along a value shortcut (`Observer.valueAction`)
    /// when a core delivers, and through `action` when an observer is sent an event directly:
    /// both paths must give the same result, into either kind of downstream observer.
    @Test func valueShortcutAndEventPathAgree() throws {
        typealias Adapter = (Signal<Int, TestError>.Observer) -> Signal<Int, TestError>.Observer
        let adapters: [(String, Adapter)] = [
            ("map", _Stateless.map { $0 * 10 }),
            ("filter", _Stateless.filter { $0 % 2 == 0 }),
            ("compactMap", _Stateless.compactMap { $0 > 2 ? $0 + 100 : nil }),
            ("mapError", _Stateless.mapError { TestError(code: $0.code + 1) }),
        ]
        for (name, adapter) in adapters {
            var results: [[Int]] = []
            for useShortcut in [true, false] {
                let events = Recorder<Int, TestError>()
                let values = Box<[Int]>([])
                let intoEvents = adapter(events.observer)
                let intoValues = adapter(Signal.Observer(values: { value in values.modify { $0.append(value) } }))
                for upstream in [intoEvents, intoValues] {
                    let shortcut = try #require(upstream.valueAction, "\(name) has no value shortcut")
                    for value in 1...5 {
                        if useShortcut { shortcut(value) } else { upstream.action(.value(value)) }
                    }
                }
                #expect(events.values == values.value, "\(name)")
                results.append(values.value)
            }
            #expect(results[0] == results[1], "\(name): shortcut \(results[0]), events \(results[1])")
        }
    }

    @Test func valueObserversTakeTheShortcutAndStillSeeTerminalEvents() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let seen = Box<[String]>([])
        let perKind = Signal<Int, TestError>.Observer(
            value: { value in seen.modify { $0.append("value \(value)") } },
            failed: { error in seen.modify { $0.append("failed \(error.code)") } })
        #expect(perKind.valueAction != nil)
        #expect(Signal<Int, TestError>.Observer(completed: {}).valueAction == nil)
        signal.observe(perKind)
        signal.map { $0 + 1 }.filter { $0 > 2 }.observe(
            Signal.Observer(value: { value in seen.modify { $0.append("mapped \(value)") } }))
        input.send(value: 1)
        input.send(value: 2)
        input.send(error: TestError(code: 7))
        #expect(seen.value == ["value 1", "value 2", "mapped 3", "failed 7"])
    }
}

@Suite("map and friends: values on a producer run are not wrapped in events")
struct MapValueShortcutTests {
    /// An observer that counts values that reached it as events and as plain arguments.
    private final class Counts: @unchecked Sendable {  // Test thread only.
        var asEvents = 0
        var asValues: [Int] = []
        var terminals = 0
        var observer: Signal<Int, Never>.Observer {
            Signal<Int, Never>.Observer(
                { [self] event in
                    if event.isTerminating { terminals += 1 } else { asEvents += 1 }
                },
                values: { [self] value in asValues.append(value) })
        }
    }

    @Test(arguments: [false, true])
    func valuesCrossAProducerChainAsPlainArguments(fromStartHandler: Bool) {
        let source: SignalProducer<Int, Never> =
            fromStartHandler
            ? SignalProducer { observer, _ in
                for value in 0..<3 { observer.send(value: value) }
                observer.sendCompleted()
            }
            : SignalProducer(0..<3)
        let counts = Counts()
        source.map { $0 * 10 }.filter { $0 != 10 }.compactMap { $0 + 1 }.start(counts.observer)
        #expect(counts.asValues == [1, 21])
        #expect(counts.asEvents == 0)
        #expect(counts.terminals == 1)
    }
}

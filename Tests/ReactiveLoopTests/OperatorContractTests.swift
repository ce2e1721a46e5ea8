import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Every unary producer operator, through the same five checks: completion, failure,
/// interruption, disposal in the middle of a run, and two starts as two independent runs.
/// Outputs are compared as strings so that one table holds operators of every output type.
@Suite("Operator contract")
struct OperatorContractTests {
    struct Operator: CustomStringConvertible, Sendable {
        let description: String
        let apply: @Sendable (SignalProducer<Int, TestError>) -> SignalProducer<String, TestError>
        init<U>(
            _ name: String,
            _ apply: @escaping @Sendable (SignalProducer<Int, TestError>) -> SignalProducer<U, TestError>
        ) {
            description = name
            self.apply = { apply($0).map { "\($0)" } }
        }
    }

    static let scheduler = ImmediateScheduler()
    /// A lifetime that lasts for the whole test run.
    static let token = Lifetime.Token()

    static let operators: [Operator] = [
        Operator("map") { $0.map { $0 * 2 } },
        Operator("map(value:)") { $0.map(value: "x") },
        Operator("filter") { $0.filter { $0 % 2 == 1 } },
        Operator("compactMap") { $0.compactMap { $0 > 1 ? $0 : nil } },
        Operator("skipNil") { $0.map { $0 > 1 ? $0 : nil }.skipNil() },
        Operator("mapError") { $0.mapError { TestError(code: $0.code) } },
        Operator("take(first:)") { $0.take(first: 2) },
        Operator("take(last:)") { $0.take(last: 2) },
        Operator("take(while:)") { $0.take(while: { $0 < 3 }) },
        Operator("take(until:) predicate") { $0.take(until: { $0 < 3 }) },
        Operator("take(during:)") { $0.take(during: Lifetime(token)) },
        Operator("skip(first:)") { $0.skip(first: 1) },
        Operator("skip(while:)") { $0.skip(while: { $0 < 2 }) },
        Operator("skipRepeats") { $0.skipRepeats() },
        Operator("uniqueValues") { $0.uniqueValues() },
        Operator("scan") { $0.scan(0, +) },
        Operator("scanMap") { $0.scanMap(0) { ($0 + $1, $0) } },
        Operator("reduce") { $0.reduce(0, +) },
        Operator("collect") { $0.collect() },
        Operator("collect(count:)") { $0.collect(count: 2) },
        Operator("collect(_:)") { $0.collect { $0.count == 2 } },
        Operator("combinePrevious") { $0.combinePrevious(0) },
        Operator("attemptMap") { $0.attemptMap { .success($0 + 1) } },
        Operator("on") { $0.on(value: { _ in }) },
        Operator("logEvents") { $0.logEvents(logger: { _, _, _, _, _ in }) },
        Operator("concat(value:)") { $0.concat(value: 9) },
        Operator("prefix(value:)") { $0.prefix(value: 0) },
        Operator("then") { $0.then(SignalProducer<Int, TestError>(value: 7)) },
        Operator("repeat") { $0.repeat(2) },
        Operator("retry(upTo:)") { $0.retry(upTo: 1) },
        Operator("flatMap(.merge)") { $0.flatMap(.merge) { SignalProducer<Int, TestError>(value: $0) } },
        Operator("flatMap(.concat)") { $0.flatMap(.concat) { SignalProducer<Int, TestError>(values: $0, -$0) } },
        Operator("flatMap(.latest)") { $0.flatMap(.latest) { SignalProducer<Int, TestError>(value: $0) } },
        Operator("flatMap(.race)") { $0.flatMap(.race) { SignalProducer<Int, TestError>(value: $0) } },
        Operator("flatMap(.throttle)") { $0.flatMap(.throttle) { SignalProducer<Int, TestError>(value: $0) } },
        Operator("flatMap(.concurrent(limit: 2))") {
            $0.flatMap(.concurrent(limit: 2)) { SignalProducer<Int, TestError>(value: $0) }
        },
        Operator("combineLatest(with:)") { $0.combineLatest(with: SignalProducer<Int, TestError>(value: 0)) },
        Operator("zip(with:)") { $0.zip(with: SignalProducer<Int, TestError>([5, 6, 7, 8, 9])) },
        Operator("merge(with:)") { $0.merge(with: SignalProducer<Int, TestError>(value: 0)) },
        Operator("withLatest(from:)") { $0.withLatest(from: SignalProducer<Int, Never>(value: 3)) },
        Operator("sample(with:)") { $0.sample(with: SignalProducer<Int, Never>.empty) },
        Operator("take(untilReplacement:)") { $0.take(untilReplacement: SignalProducer<Int, TestError>.never) },
        Operator("take(until:) trigger") { $0.take(until: SignalProducer<(), Never>.never) },
        Operator("skip(until:) trigger") { $0.skip(until: SignalProducer<(), Never>(value: ())) },
        Operator("replayLazily") { $0.replayLazily(upTo: 2) },
        Operator("lift(map)") { $0.lift { $0.map { $0 + 1 } } },
        Operator("observe(on: immediate)") { $0.observe(on: scheduler) },
        Operator("start(on: immediate)") { $0.start(on: scheduler) },
        Operator("lazyMap(on: immediate)") { $0.lazyMap(on: scheduler) { $0 } },
    ]

    static func run(_ producer: SignalProducer<String, TestError>) -> [Signal<String, TestError>.Event] {
        let recorder = Recorder<String, TestError>()
        producer.start(recorder.observer)
        return recorder.events
    }

    /// `take(untilReplacement:)` ignores the source's completion by definition (it waits for
    /// the replacement), so it is left out here.
    @Test(arguments: operators.filter { $0.description != "take(untilReplacement:)" })
    func completesAfterACompletingSource(op: Operator) {
        let events = Self.run(op.apply(SignalProducer([1, 2, 3, 1])))
        #expect(events.last == .completed, "\(op)")
        #expect(events.filter(\.isTerminating).count == 1, "\(op)")
    }

    @Test(arguments: operators.filter { $0.description != "retry(upTo:)" })
    func forwardsAFailure(op: Operator) {
        let events = Self.run(op.apply(SignalProducer(error: TestError(code: 5))))
        #expect(events.last == .failed(TestError(code: 5)), "\(op)")
        #expect(events.filter(\.isTerminating).count == 1, "\(op)")
    }

    @Test(arguments: operators)
    func isInterruptedWhenTheRunIsDisposed(op: Operator) {
        let recorder = Recorder<String, TestError>()
        let disposable = op.apply(SignalProducer.never).start(recorder.observer)
        disposable.dispose()
        #expect(recorder.events.last == .interrupted, "\(op)")
        #expect(recorder.events.filter(\.isTerminating).count == 1, "\(op)")
    }

    @Test(arguments: operators)
    func disposalInTheMiddleEndsTheSourceAndDeliversNothingMore(op: Operator) {
        let input = Box<Signal<Int, TestError>.Observer?>(nil)
        let sourceEnded = Box(false)
        let source = SignalProducer<Int, TestError> { observer, lifetime in
            input.value = observer
            lifetime.observeEnded { sourceEnded.value = true }
        }
        let recorder = Recorder<String, TestError>()
        let disposable = op.apply(source).start(recorder.observer)
        input.value?.send(value: 1)
        disposable.dispose()
        let afterDispose = recorder.events.count
        input.value?.send(value: 2)
        input.value?.sendCompleted()
        #expect(sourceEnded.value, "\(op)")
        #expect(recorder.events.count == afterDispose, "\(op)")
        #expect(recorder.events.last == .interrupted, "\(op)")
    }

    @Test(arguments: operators.filter { $0.description != "replayLazily" })
    func twoStartsAreTwoIndependentRuns(op: Operator) {
        let starts = Box(0)
        let source = SignalProducer<Int, TestError>([1, 2, 3, 1]).on(starting: { starts.modify { $0 += 1 } })
        let producer = op.apply(source)
        let first = Self.run(producer)
        let startsPerRun = starts.value
        let second = Self.run(producer)
        #expect(first == second, "\(op)")
        #expect(startsPerRun >= 1, "\(op)")
        #expect(starts.value == 2 * startsPerRun, "\(op)")
    }
}

/// The `Signal` faces of the unary operators: terminal events pass exactly once.
@Suite("Operator contract: signals")
struct SignalOperatorContractTests {
    struct Operator: CustomStringConvertible, Sendable {
        let description: String
        let apply: @Sendable (Signal<Int, TestError>) -> Signal<String, TestError>
        init<U>(_ name: String, _ apply: @escaping @Sendable (Signal<Int, TestError>) -> Signal<U, TestError>) {
            description = name
            self.apply = { apply($0).map { "\($0)" } }
        }
    }

    static let token = Lifetime.Token()
    static let operators: [Operator] = [
        Operator("map") { $0.map { $0 * 2 } },
        Operator("filter") { $0.filter { $0 > 0 } },
        Operator("compactMap") { $0.compactMap { $0 } },
        Operator("mapError") { $0.mapError { $0 } },
        Operator("on") { $0.on(value: { _ in }) },
        Operator("take(first:)") { $0.take(first: 5) },
        Operator("take(last:)") { $0.take(last: 1) },
        Operator("take(while:)") { $0.take(while: { _ in true }) },
        Operator("take(during:)") { $0.take(during: Lifetime(token)) },
        Operator("skip(first:)") { $0.skip(first: 1) },
        Operator("skip(while:)") { $0.skip(while: { _ in false }) },
        Operator("skipRepeats") { $0.skipRepeats() },
        Operator("uniqueValues") { $0.uniqueValues() },
        Operator("scan") { $0.scan(0, +) },
        Operator("reduce") { $0.reduce(0, +) },
        Operator("collect") { $0.collect() },
        Operator("combinePrevious") { $0.combinePrevious() },
        Operator("attemptMap") { $0.attemptMap { .success($0) } },
        Operator("flatMap(.latest)") { $0.flatMap(.latest) { SignalProducer<Int, TestError>(value: $0) } },
        Operator("merge(with:)") { $0.merge(with: $0.filter { _ in false }) },
        Operator("withLatest(from:)") { $0.withLatest(from: SignalProducer<Int, Never>(value: 1)) },
        Operator("logEvents") { $0.logEvents(logger: { _, _, _, _, _ in }) },
        Operator("observe(on:)") { $0.observe(on: ImmediateScheduler()) },
    ]

    @Test(
        arguments: operators,
        [
            Signal<Int, TestError>.Event.completed, .failed(TestError(code: 2)), .interrupted,
        ])
    func terminalEventsPassExactlyOnce(op: Operator, terminal: Signal<Int, TestError>.Event) {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<String, TestError>()
        op.apply(signal).observe(recorder.observer)
        input.send(value: 1)
        input.send(terminal)
        input.send(value: 2)
        let terminals = recorder.events.filter(\.isTerminating)
        #expect(terminals.count == 1, "\(op)")
        #expect(terminals.first.map { "\($0)" } == "\(terminal)", "\(op)")
        #expect(recorder.events.last?.isTerminating == true, "\(op)")
    }
}

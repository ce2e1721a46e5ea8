import Foundation
import Testing
@testable import ReactiveLoopCore

/// What a child process of an exit test printed on standard error.
func standardError(_ result: ExitTest.Result?) -> String {
    result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
}

/// Bad arguments stop the program with a message naming the API, the argument and the value.
/// The checks do not use `precondition`, whose message `-O` drops, so release builds say the
/// same; these tests run each check in a child process and read what it printed.
@Suite("Argument checks")
struct ArgumentCheckTests {
    @Test func timerRejectsANeverIntervalAndANegativeLeeway() async {
        let never = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Date, Never>.timer(interval: .never, on: TestScheduler())
        }
        #expect(standardError(never).contains("timer(interval:on:): interval must be positive and finite, got never"))
        let leeway = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Date, Never>.timer(interval: .seconds(1), on: TestScheduler(), leeway: .seconds(-1))
        }
        #expect(
            standardError(leeway).contains(
                "timer(interval:on:leeway:): leeway must be finite and >= 0, got seconds(-1)"))
    }

    @Test func timeOperatorsRejectNaNAndInfiniteIntervals() async {
        let nan = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>(value: 1).delay(.nan, on: TestScheduler())
        }
        #expect(standardError(nan).contains("delay(_:on:): interval must be finite and >= 0, got nan"))
        let infinite = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>(value: 1).debounce(.infinity, on: TestScheduler())
        }
        #expect(standardError(infinite).contains("interval must be finite and >= 0, got inf"))
    }

    @Test func schedulersRejectBadRepeatingArgumentsAlike() async {
        let testLeeway = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let scheduler = TestScheduler()
            scheduler.schedule(after: scheduler.currentDate, interval: .seconds(1), leeway: .seconds(-1)) {}
        }
        #expect(standardError(testLeeway).contains("leeway must be finite and >= 0, got seconds(-1)"))
        let queueLeeway = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let scheduler = QueueScheduler(queue: .global())
            scheduler.schedule(after: scheduler.currentDate, interval: .seconds(1), leeway: .seconds(-1)) {}
        }
        #expect(standardError(queueLeeway).contains("leeway must be finite and >= 0, got seconds(-1)"))
        let testNever = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let scheduler = TestScheduler()
            scheduler.schedule(after: scheduler.currentDate, interval: .never, leeway: .seconds(0)) {}
        }
        #expect(standardError(testNever).contains("interval must be positive and finite, got never"))
        let queueNever = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let scheduler = QueueScheduler(queue: .global())
            scheduler.schedule(after: scheduler.currentDate, interval: .never, leeway: .seconds(0)) {}
        }
        #expect(standardError(queueNever).contains("interval must be positive and finite, got never"))
    }

    @Test func collectEveryRejectsANeverInterval() async {
        let never = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>(value: 1).collect(every: .never, on: TestScheduler())
        }
        #expect(
            standardError(never).contains(
                "collect(every:on:skipEmpty:discardWhenCompleted:): interval must be positive and finite, got never"))
    }

    @Test func anIntervalThatKeepsTheRuleIsNotDescribed() {
        var described = 0
        func describe() -> String {
            described += 1
            return "seconds(0)"
        }
        #expect(_intervalProblem("interval", 1, .positive, shown: describe()) == nil)
        #expect(described == 0)
        #expect(
            _intervalProblem("interval", 0, .positive, shown: describe())
                == "interval must be positive and finite, got seconds(0)")
        #expect(described == 1)
    }

    @Test func eachIntervalRuleIsWordedOneWay() {
        #expect(_intervalProblem("interval", 0, .nonNegative) == nil)
        #expect(_intervalProblem("interval", -1, .nonNegative) == "interval must be finite and >= 0, got -1.0")
        #expect(_intervalProblem("interval", 0, .positive) == "interval must be positive and finite, got 0.0")
        #expect(_intervalProblem("interval", .infinity, .finite) == "interval must be finite, got inf")
        #expect(
            _intervalProblem("idleTimeout", 2e9, .positiveUpTo(1e9))
                == "idleTimeout must be positive and at most 1000000000 seconds, got 2000000000.0")
        #expect(
            _intervalProblem("--flush-interval", .nan, .within(0.01...86400))
                == "--flush-interval must be in 0.01...86400 seconds, got nan")
        #expect(_intervalProblem("interval", 1e-9, .positive, shown: "nanoseconds(1)") == nil)
    }

    @Test func countArgumentsNameTheOperator() async {
        let take = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>(value: 1).take(first: -1)
        }
        #expect(standardError(take).contains("take(first:): count must be >= 0, got -1"))
        let retry = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = SignalProducer<Int, Never>(value: 1).retry(upTo: -2)
        }
        #expect(standardError(retry).contains("retry(upTo:): count must be >= 0, got -2"))
    }
}

/// Debug builds assert the invariants the delivery core's comments state.
@Suite("Core invariants")
struct CoreInvariantTests {
    @Test func deliveringWithoutOwnershipStopsADebugBuild() async {
        #if DEBUG
            let core = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                _SignalCore<Int, Never>().deliver(.value(1))
            }
            #expect(standardError(core).contains("_SerialDelivery.deliver: the calling thread does not own delivery"))
            let sink = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                _SerialSink<Int, Never>(Signal<Int, Never>.Observer { (_: Signal<Int, Never>.Event) in }).enqueue(
                    .value(1))
            }
            #expect(standardError(sink).contains("_SerialDelivery.enqueue: the calling thread does not own delivery"))
        #endif
    }
}

import Foundation
import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Runs `body` on a thread with a 512 KiB stack (a typical secondary thread's is 512 KiB on
/// Darwin and 8 MiB on Linux): recursion per run would overflow it long before 100,000 runs.
func runOnSmallStack(seconds: Double = 60, _ body: @escaping @Sendable () -> Void) -> Bool {
    runWithWatchdog(seconds: seconds, stackSize: 512 << 10, body)
}

/// Runs that start runs take constant stack, however many finish synchronously.
@Suite("Stack depth")
struct StackDepthTests {
    static let count = 100_000

    /// Regression: flatten started each queued synchronous inner from inside the previous
    /// one's completion, one stack level per inner (a stack overflow at 100,000).
    @Test(arguments: FlattenStrategy.allForTests)
    func flattenDrainsSynchronousInnersQueuedBehindAPendingOneInConstantStack(_ strategy: FlattenStrategy) {
        let finished = runOnSmallStack {
            let pending = Box<Signal<Int, Never>.Observer?>(nil)
            let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
            let values = Box(0)
            let terminal = Box<Signal<Int, Never>.Event?>(nil)
            outer.flatten(strategy).observe { event in
                if case .value = event { values.modify { $0 += 1 } } else { terminal.value = event }
            }
            outerInput.send(value: SignalProducer { observer, _ in pending.value = observer })
            for value in 0..<Self.count { outerInput.send(value: SignalProducer(value: value)) }
            outerInput.sendCompleted()
            pending.value?.sendCompleted()
            #expect(terminal.value == .completed, "\(strategy)")
            // race: the first inner to send wins; throttle: inners arriving while one runs are
            // dropped; every other strategy runs every inner.
            let expected =
                switch strategy.kind {
                case .race: 1
                case .throttle: 0
                default: Self.count
                }
            #expect(values.value == expected, "\(strategy)")
        }
        #expect(finished, "\(strategy)")
    }

    @Test(arguments: FlattenStrategy.allForTests)
    func flattenOfSynchronousInnersThatCompleteAtOnceTakesConstantStack(_ strategy: FlattenStrategy) {
        let finished = runOnSmallStack {
            let inners = (0..<Self.count).lazy.map { SignalProducer<Int, Never>(value: $0) }
            var values = 0
            var terminal: Signal<Int, Never>.Event?
            SignalProducer<SignalProducer<Int, Never>, Never>(inners).flatten(strategy).start { event in
                if case .value = event { values += 1 } else { terminal = event }
            }
            #expect(terminal == .completed, "\(strategy)")
            #expect(values > 0, "\(strategy)")
        }
        #expect(finished, "\(strategy)")
    }

    @Test func concatRunsEveryQueuedInnerInOrder() {
        let finished = runOnSmallStack {
            let pending = Box<Signal<Int, Never>.Observer?>(nil)
            let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
            var values: [Int] = []
            outer.flatten(.concat).observeValues { values.append($0) }
            outerInput.send(value: SignalProducer { observer, _ in pending.value = observer })
            for value in 0..<Self.count { outerInput.send(value: SignalProducer(value: value)) }
            pending.value?.sendCompleted()
            #expect(values == Array(0..<Self.count))
        }
        #expect(finished)
    }

    /// Regression: retry restarted a synchronously failing producer from inside its failure.
    @Test func retryOfASynchronousFailureTakesConstantStack() {
        let finished = runOnSmallStack {
            let attempts = Box(0)
            var terminal: Signal<Int, TestError>.Event?
            SignalProducer<Int, TestError> { observer, _ in
                attempts.modify { $0 += 1 }
                observer.send(error: TestError(code: 1))
            }
            .retry(upTo: Self.count)
            .start { terminal = $0 }
            #expect(attempts.value == Self.count + 1)
            #expect(terminal == .failed(TestError(code: 1)))
        }
        #expect(finished)
    }

    /// Regression: each `concat`/`then` nested the chain so far in a new flatten, and the start
    /// of a chain of 100,000 recursed 100,000 levels.
    @Test func longConcatAndThenChainsStartInConstantStack() {
        let finished = runOnSmallStack {
            var leftNested = SignalProducer<Int, Never>(value: 0)
            var rightNested = SignalProducer<Int, Never>(value: Self.count - 1)
            var thenChain = SignalProducer<Int, Never>(value: 0)
            for value in 1..<Self.count {
                leftNested = leftNested.concat(SignalProducer(value: value))
                rightNested = SignalProducer(value: Self.count - 1 - value).concat(rightNested)
                thenChain = thenChain.then(SignalProducer(value: value))
            }
            var left: [Int] = []
            leftNested.startWithValues { left.append($0) }
            #expect(left == Array(0..<Self.count))
            var right: [Int] = []
            rightNested.startWithValues { right.append($0) }
            #expect(right == Array(0..<Self.count))
            var then: [Int] = []
            thenChain.startWithValues { then.append($0) }
            #expect(then == [Self.count - 1])
        }
        #expect(finished)
    }

    @Test func repeatOfASynchronousProducerTakesConstantStack() {
        let finished = runOnSmallStack {
            var values = 0
            var terminal: Signal<Int, Never>.Event?
            SignalProducer<Int, Never>(value: 1).repeat(Self.count).start { event in
                if case .value = event { values += 1 } else { terminal = event }
            }
            #expect(values == Self.count)
            #expect(terminal == .completed)
        }
        #expect(finished)
    }

    /// Regression: `repeat(n)` built all n runs at start; a pending first run made `start()`
    /// queue n runs before returning.
    @Test func repeatStartsEachRunWhenThePreviousCompletes() {
        let finished = runOnSmallStack(seconds: 10) {
            let starts = Box(0)
            let current = Box<Signal<Int, Never>.Observer?>(nil)
            let producer = SignalProducer<Int, Never> { observer, _ in
                starts.modify { $0 += 1 }
                current.value = observer
            }
            let recorder = Recorder<Int, Never>()
            let disposable = producer.repeat(Int.max).start(recorder.observer)
            #expect(starts.value == 1)
            current.value?.sendCompleted()
            #expect(starts.value == 2)
            disposable.dispose()
            #expect(recorder.events == [.interrupted])
            current.value?.sendCompleted()
            #expect(starts.value == 2)
        }
        #expect(finished)
    }
}

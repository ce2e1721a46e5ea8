import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

struct TestError: Swift.Error, Equatable { var code = 0 }

@Suite("Signal")
struct SignalTests {
    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func pipeDeliversValuesThenTerminalToEveryObserver(kind: _SignalCoreKind) {
        withCoreKind(kind) {
            let (signal, input) = Signal<Int, TestError>.pipe()
            var first: [Signal<Int, TestError>.Event] = []
            var second: [Signal<Int, TestError>.Event] = []
            signal.observe { first.append($0) }
            signal.observe { second.append($0) }
            input.send(value: 1)
            input.send(value: 2)
            input.send(error: TestError(code: 7))
            input.send(value: 3)
            input.sendCompleted()
            #expect(first == [.value(1), .value(2), .failed(TestError(code: 7))])
            #expect(second == first)
        }
    }

    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func observingATerminatedSignalDeliversInterruptedAtOnce(kind: _SignalCoreKind) {
        withCoreKind(kind) {
            let (signal, input) = Signal<Int, Never>.pipe()
            input.sendCompleted()
            var events: [Signal<Int, Never>.Event] = []
            let disposable = signal.observe { events.append($0) }
            #expect(disposable == nil)
            #expect(events == [.interrupted])
        }
    }

    @Test func observeVariantsSeeOnlyTheirEvents() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        var results: [Result<Int, TestError>] = []
        var failed: [TestError] = []
        var completed = 0
        var interrupted = 0
        signal.observeResult { results.append($0) }
        signal.observeFailed { failed.append($0) }
        signal.observeCompleted { completed += 1 }
        signal.observeInterrupted { interrupted += 1 }
        input.send(value: 4)
        input.send(error: TestError(code: 1))
        #expect(results == [.success(4), .failure(TestError(code: 1))])
        #expect(failed == [TestError(code: 1)])
        #expect(completed == 0)
        #expect(interrupted == 0)

        let (other, otherInput) = Signal<Int, Never>.pipe()
        var values: [Int] = []
        other.observeValues { values.append($0) }
        other.observeCompleted { completed += 1 }
        otherInput.send(value: 9)
        otherInput.sendCompleted()
        #expect(values == [9])
        #expect(completed == 1)
        other.observeInterrupted { interrupted += 1 }
        #expect(interrupted == 1)
    }

    @Test func disposedObserverReceivesNothingMore() {
        let (signal, input) = Signal<Int, Never>.pipe()
        var values: [Int] = []
        let disposable = signal.observeValues { values.append($0) }
        input.send(value: 1)
        disposable?.dispose()
        input.send(value: 2)
        #expect(values == [1])
    }

    @Test func generatorRunsAtOnceAndItsLifetimeEndsOnTermination() {
        var lifetimeEnded = false
        var input: Signal<Int, Never>.Observer?
        let signal = Signal<Int, Never> { observer, lifetime in
            input = observer
            lifetime.observeEnded { lifetimeEnded = true }
        }
        var values: [Int] = []
        signal.observeValues { values.append($0) }
        input?.send(value: 5)
        #expect(!lifetimeEnded)
        input?.sendCompleted()
        #expect(values == [5])
        #expect(lifetimeEnded)
    }

    @Test func releasingTheInputObserverInterruptsTheSignal() {
        var interrupted = false
        var signal: Signal<Int, Never>?
        do {
            let (output, input) = Signal<Int, Never>.pipe()
            signal = output
            output.observeInterrupted { interrupted = true }
            _ = input
        }
        #expect(interrupted)
        #expect(signal != nil)
    }

    @Test func neverAndEmpty() {
        var events: [Signal<Int, Never>.Event] = []
        Signal<Int, Never>.never.observe { events.append($0) }
        #expect(events.isEmpty)
        Signal<Int, Never>.empty.observe { events.append($0) }
        #expect(events == [.interrupted])
    }

    /// An input observer given to `observe` is kept by the observation: letting go of every
    /// other reference to it must not interrupt its signal (a released input interrupts).
    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func anInputObservingAnotherSignalIsKeptByTheObservation(kind: _SignalCoreKind) {
        withCoreKind(kind) {
            let (source, sourceInput) = Signal<Int, Never>.pipe()
            var events: [Signal<Int, Never>.Event] = []
            do {
                let (relay, relayInput) = Signal<Int, Never>.pipe()
                relay.observe { events.append($0) }
                source.observe(relayInput)
            }
            #expect(events.isEmpty)
            sourceInput.send(value: 1)
            sourceInput.send(value: 2)
            #expect(events == [.value(1), .value(2)])
            sourceInput.sendCompleted()
            #expect(events == [.value(1), .value(2), .completed])
        }
    }

    /// Observers come and go (one, several, one again, none, several): each receives the values
    /// sent while it was registered, in order of registration, and a disposed one lets go of
    /// what its closure holds at once.
    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func observersComeAndGoAndADisposedOneIsReleasedAtOnce(kind: _SignalCoreKind) {
        withCoreKind(kind) {
            let (signal, input) = Signal<Int, Never>.pipe()
            var seen: [String] = []
            var released: [Int] = []
            var disposables: [Int: any Disposable] = [:]
            func add(_ id: Int) {
                let tracked = Tracked { released.append(id) }
                disposables[id] = signal.observeValues { value in
                    _ = tracked
                    seen.append("\(id):\(value)")
                }
            }
            add(1)
            input.send(value: 10)
            add(2)
            add(3)
            input.send(value: 20)
            disposables[2]?.dispose()
            #expect(released == [2])
            input.send(value: 30)
            disposables[1]?.dispose()
            disposables[3]?.dispose()
            #expect(released == [2, 1, 3])
            input.send(value: 40)
            add(4)
            add(5)
            input.send(value: 50)
            #expect(seen == ["1:10", "1:20", "2:20", "3:20", "1:30", "3:30", "4:50", "5:50"])
            disposables[5]?.dispose()
            input.send(value: 60)
            #expect(released == [2, 1, 3, 5])
            #expect(seen.suffix(1) == ["4:60"])
        }
    }

    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func observingValuesOfATerminatedSignalRegistersNothing(kind: _SignalCoreKind) {
        withCoreKind(kind) {
            let (signal, input) = Signal<Int, Never>.pipe()
            input.sendCompleted()
            var calls = 0
            let disposable = signal.observeValues { _ in calls += 1 }
            #expect(disposable == nil)
            #expect(calls == 0)
        }
    }

    /// On the terminal event, the observers receive it, then the generator's resources are
    /// released (its lifetime ends), then the observers are.
    @Test func terminationEndsTheGeneratorsLifetimeBeforeReleasingTheObservers() {
        var log: [String] = []
        var input: Signal<Int, Never>.Observer?
        let signal = Signal<Int, Never> { observer, lifetime in
            input = observer
            lifetime.observeEnded { log.append("ended") }
        }
        do {
            let tracked = Tracked { log.append("released") }
            signal.observe { event in
                _ = tracked
                log.append("\(event)")
            }
        }
        input?.sendCompleted()
        #expect(log == ["COMPLETED", "ended", "released"])
    }

    /// A core that goes away with observers still registered lets go of them.
    @Test func aCoreReleasedWithObserversLetsGoOfThem() {
        var released = false
        do {
            let core = _SignalCore<Int, Never>()
            let tracked = Tracked { released = true }
            _ = core.observe(values: { _ in _ = tracked })
            core.send(.value(1))
        }
        #expect(released)
    }

    @Test func eventProperties() {
        typealias E = Signal<Int, TestError>.Event
        #expect(E.value(1).value == 1)
        #expect(E.value(1).error == nil)
        #expect(E.failed(TestError()).error == TestError())
        #expect(E.completed.isCompleted)
        #expect(!E.interrupted.isCompleted)
        #expect(E.interrupted.isTerminating)
        #expect(!E.value(0).isTerminating)
        #expect(E.value(2).map { $0 * 3 } == .value(6))
        #expect(E.failed(TestError(code: 1)).mapError { TestError(code: $0.code + 1) } == .failed(TestError(code: 2)))
        #expect(E.value(3).description == "VALUE 3")
        #expect(E.completed.description == "COMPLETED")
        #expect(E.value(1).event == .value(1))
    }
}

/// Runs `body` with signals created on the given core kind. Tests that switch the kind are
/// serialized by `coreKindLock`.
func withCoreKind<R>(_ kind: _SignalCoreKind, _ body: () throws -> R) rethrows -> R {
    coreKindLock.lock()
    defer { coreKindLock.unlock() }
    let previous = _SignalCoreKind.current
    _SignalCoreKind.current = kind
    defer { _SignalCoreKind.current = previous }
    return try body()
}

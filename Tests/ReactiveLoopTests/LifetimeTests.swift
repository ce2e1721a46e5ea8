import Foundation
import ReactiveLoopTestSupport
import Testing

@testable @_spi(Testing) import ReactiveLoopCore

@Suite("Lifetime")
struct LifetimeTests {
    @Test func tokenEndsTheLifetimeWhenDisposedOrReleased() {
        var log: [String] = []
        var token: Lifetime.Token? = Lifetime.Token()
        let lifetime = Lifetime(token!)
        lifetime.observeEnded { log.append("ended") }
        lifetime += AnyDisposable { log.append("disposed") }
        #expect(!lifetime.hasEnded)
        token = nil
        #expect(lifetime.hasEnded)
        #expect(log == ["ended", "disposed"])
        let (made, madeToken) = Lifetime.make()
        madeToken.dispose()
        #expect(made.hasEnded)
    }

    @Test func observingAnEndedLifetimeRunsAtOnce() {
        var ran = false
        #expect(Lifetime.empty.observeEnded { ran = true } == nil)
        #expect(ran)
        let disposable = AnyDisposable()
        Lifetime.empty += disposable
        #expect(disposable.isDisposed)
    }

    @Test func endedSignalCompletesWhenTheLifetimeEnds() {
        let (lifetime, token) = Lifetime.make()
        var completed = 0
        lifetime.ended.observeCompleted { completed += 1 }
        token.dispose()
        #expect(completed == 1)
        Lifetime.empty.ended.observe { event in if event.isTerminating { completed += 1 } }
        #expect(completed == 2)
    }
}

/// Attaching to a lifetime, detaching and ending (the token-level basics are in `LifetimeTests`).
@Suite("Lifetime attachments")
struct LifetimeAttachmentTests {
    @Test func attachmentsRunOnceInTheOrderAttached() {
        let (lifetime, token) = Lifetime.make()
        let log = Box<[String]>([])
        lifetime.observeEnded { log.modify { $0.append("first") } }
        lifetime += AnyDisposable { log.modify { $0.append("second") } }
        lifetime.observeEnded { log.modify { $0.append("third") } }
        #expect(!lifetime.hasEnded)
        token.dispose()
        token.dispose()
        #expect(lifetime.hasEnded)
        #expect(log.value == ["first", "second", "third"])
    }

    @Test func aDetachedAttachmentNeverRunsAndIsReleased() {
        let (lifetime, token) = Lifetime.make()
        weak var captured: Tracked?
        var ran = false
        let detach: (any Disposable)? = {
            let tracked = Tracked()
            captured = tracked
            return lifetime.observeEnded {
                _ = tracked; ran = true
            }
        }()
        #expect(captured != nil)
        #expect(detach?.isDisposed == false)
        detach?.dispose()
        #expect(detach?.isDisposed == true)
        #expect(captured == nil, "detaching releases the action at once, not when the lifetime ends")
        token.dispose()
        #expect(!ran)
    }

    @Test func detachingKeepsTheOthersAndTheirOrder() {
        let (lifetime, token) = Lifetime.make()
        let log = Box<[Int]>([])
        let detachers = (0..<6).map { index in lifetime.observeEnded { log.modify { $0.append(index) } } }
        // The head, the tail and one in the middle.
        for index in [0, 5, 2] { detachers[index]?.dispose() }
        token.dispose()
        #expect(log.value == [1, 3, 4])
    }

    @Test func attachingToAnEndedLifetimeRunsAtOnceAndReturnsNil() {
        let (lifetime, token) = Lifetime.make()
        token.dispose()
        var ran = false
        #expect(lifetime.observeEnded { ran = true } == nil)
        #expect(ran)
        let disposable = AnyDisposable()
        #expect((lifetime += disposable) == nil)
        #expect(disposable.isDisposed)
        #expect((lifetime += nil) == nil)
        #expect(Lifetime.empty.hasEnded)
    }

    @Test func aLifetimeMadeFromATokenSharesItsEnd() {
        let token = Lifetime.Token()
        let first = Lifetime(token)
        let second = Lifetime(token)
        var ended = 0
        first.observeEnded { ended += 1 }
        second.observeEnded { ended += 1 }
        #expect(!first.hasEnded && !second.hasEnded)
        token.dispose()
        #expect(first.hasEnded && second.hasEnded)
        #expect(ended == 2)
    }

    @Test func releasingTheTokenEndsTheLifetime() {
        var token: Lifetime.Token? = Lifetime.Token()
        let lifetime = Lifetime(token!)
        var ended = false
        lifetime.observeEnded { ended = true }
        token = nil
        #expect(ended)
        #expect(lifetime.hasEnded)
    }

    /// A long-lived lifetime that many short runs attach to and detach from (`take(during:)`)
    /// keeps only the attachments still in place.
    @Test func manyAttachAndDetachCyclesKeepNothingBehind() {
        let (lifetime, token) = Lifetime.make()
        let alive = Box(0)
        for _ in 0..<10_000 {
            let tracked = Tracked { alive.modify { $0 -= 1 } }
            alive.modify { $0 += 1 }
            let detach = lifetime.observeEnded { _ = tracked }
            detach?.dispose()
        }
        #expect(alive.value == 0)
        withExtendedLifetime(token) {}
    }

    @Test func aProducerRunEndsItsLifetimeOnTerminationOrDisposal() {
        var endedByCompletion = false
        let completed = SignalProducer<Int, Never> { observer, lifetime in
            lifetime.observeEnded { endedByCompletion = true }
            observer.sendCompleted()
        }.start()
        #expect(endedByCompletion)
        #expect(!completed.isDisposed, "a run that terminated by itself was not disposed")

        var runLifetime: Lifetime?
        let disposable = SignalProducer<Int, Never> { _, lifetime in runLifetime = lifetime }.start()
        #expect(runLifetime?.hasEnded == false)
        #expect(!disposable.isDisposed)
        disposable.dispose()
        #expect(runLifetime?.hasEnded == true)
        #expect(disposable.isDisposed)
    }

    /// A handler for the inline slot that counts its runs and logs them.
    final class CountingHandler: _LifetimeEndHandler, @unchecked Sendable {  // The log is a Box.
        let log: Box<[String]>
        let name: String
        init(_ name: String, log: Box<[String]>) {
            self.name = name
            self.log = log
        }
        override func lifetimeEnded() { log.modify { $0.append(name) } }
    }

    @Test func theInlineSlotRunsOnceBeforeWhatWasAttachedAfterIt() {
        let (lifetime, token) = Lifetime.make()
        let log = Box<[String]>([])
        weak var weakHandler: CountingHandler?
        do {
            let handler = CountingHandler("inline", log: log)
            weakHandler = handler
            lifetime._attachFirst(handler)
        }
        lifetime.observeEnded { log.modify { $0.append("listed") } }
        #expect(weakHandler != nil)
        token.dispose()
        token.dispose()
        #expect(log.value == ["inline", "listed"])
        // Run, so released: the slot does not keep it.
        #expect(weakHandler == nil)
    }

    @Test func aPlainLifetimeHasOneSlotAndListsTheRestInOrder() {
        let (lifetime, token) = Lifetime.make()
        let log = Box<[String]>([])
        lifetime._attachFirst(CountingHandler("first", log: log))
        lifetime._attachFirst(CountingHandler("second", log: log))
        lifetime.observeEnded { log.modify { $0.append("listed") } }
        token.dispose()
        #expect(log.value == ["first", "second", "listed"])
    }

    @Test func aRunsTwoSlotsRunInTheOrderFilledBeforeTheList() {
        let run = _ProducerRun<Int, Never>(Signal<Int, Never>.Observer())
        let log = Box<[String]>([])
        weak var weakSecond: CountingHandler?
        do {
            let second = CountingHandler("second", log: log)
            weakSecond = second
            run._attachFirst(CountingHandler("first", log: log))
            run._attachFirst(second)
        }
        #expect(run._state.load(ordering: .relaxed) == 0)  // No list yet.
        // Both slots are full: the list takes the rest, in order.
        run._attachFirst(CountingHandler("third", log: log))
        run.observeEnded { log.modify { $0.append("listed") } }
        #expect(weakSecond != nil)
        run.dispose()
        #expect(log.value == ["first", "second", "third", "listed"])
        #expect(weakSecond == nil)
    }

    /// A signal's observation attached with `_attachDisposing` takes a slot (no list is made)
    /// and is disposed when the lifetime ends; any other disposable goes to the list, and one
    /// attached after the end is disposed at once.
    @Test func anObservationTakesASlotAndOtherDisposablesTheList() {
        let (signal, input) = withCoreKind(.lockFree) { Signal<Int, Never>.pipe() }
        let (lifetime, token) = Lifetime.make()
        let received = Box<[Int]>([])
        lifetime._attachDisposing(signal.observeValues { value in received.modify { $0.append(value) } })
        #expect(lifetime._state.load(ordering: .relaxed) == 0)  // No list.
        let disposed = Box(false)
        lifetime._attachDisposing(AnyDisposable { disposed.value = true })
        #expect(lifetime._state.load(ordering: .relaxed) != 0)  // Listed.
        input.send(value: 1)
        token.dispose()
        input.send(value: 2)
        #expect(received.value == [1])
        #expect(disposed.value)
        lifetime._attachDisposing(signal.observeValues { value in received.modify { $0.append(value) } })
        Lifetime.empty._attachDisposing(signal.observeValues { value in received.modify { $0.append(value) } })
        input.send(value: 3)
        #expect(received.value == [1])
    }

    /// The runs of a signal's producer and of a property's producer keep their observation in
    /// the run's second slot: starting one makes no attachment list.
    @Test func producerRunsOfASignalAndOfAPropertyMakeNoAttachmentList() {
        let (signal, input) = withCoreKind(.lockFree) { Signal<Int, Never>.pipe() }
        let property = MutableProperty(0)
        let values = Box<[Int]>([])
        // With a signal's input: a closure or an observer of closures makes no run on a
        // property's producer.
        let (propertySignal, propertyInput) = withCoreKind(.lockFree) { Signal<Int, Never>.pipe() }
        propertySignal.observeValues { value in values.modify { $0.append(value) } }
        let runs = [
            SignalProducer(signal).startWithValues { value in values.modify { $0.append(value) } },
            property.producer.start(propertyInput),
        ]
        for run in runs {
            #expect((run as? Lifetime)?._state.load(ordering: .relaxed) == 0)
        }
        input.send(value: 1)
        property.value = 2
        runs.forEach { $0.dispose() }
        input.send(value: 3)
        property.value = 4
        #expect(values.value == [0, 1, 2])
    }

    /// A thread that fills the second slot after another has marked the run ended (it read
    /// the run as live just before) runs that slot's handler only: the first slot's is the
    /// ender's, so that `dispose()` returns only once it has run. The interleaving is made by
    /// hand: the end is marked, the fill happens, then the ender runs the slots.
    @Test func aSlotFilledAfterTheEndRunsOnlyItsOwnHandler() {
        let run = _ProducerRun<Int, Never>(Signal<Int, Never>.Observer())
        let log = Box<[String]>([])
        run._attachFirst(CountingHandler("first", log: log))
        run._state.bitwiseOr(1, ordering: .sequentiallyConsistent)  // The ender's first step.
        let late = Unmanaged.passRetained(CountingHandler("late", log: log) as _LifetimeEndHandler)
        #expect(run._fillSecondSlot(UInt(bitPattern: late.toOpaque())))
        #expect(log.value == ["late"])
        Lifetime._runSlot(run._first)  // The ender goes on.
        run._runSecondSlot()
        #expect(log.value == ["late", "first"])
    }

    /// Whether `run` (a producer run) has made no attachment list, ended or not.
    static func madeNoList(_ run: any Disposable) -> Bool {
        ((run as? Lifetime)?._state.load(ordering: .acquiring) ?? 1) & ~1 == 0
    }

    /// Starts `producer`, waits for its terminal event (delivered on another thread), and
    /// returns its values, its terminal event and its run.
    static func runToEnd(
        _ producer: SignalProducer<Int, Never>
    ) -> (values: [Int], terminal: Signal<Int, Never>.Event?, run: any Disposable) {
        let ended = DispatchSemaphore(value: 0)
        let values = Box<[Int]>([])
        let terminal = Box<Signal<Int, Never>.Event?>(nil)
        let run = producer.start { event in
            if case let .value(value) = event { return values.modify { $0.append(value) } }
            terminal.value = event
            ended.signal()
        }
        ended.wait()
        return (values.value, terminal.value, run)
    }

    /// A run of `start(on:)` on a `QueueScheduler` keeps its scheduled start in the run's
    /// second slot: no attachment list is made.
    @Test func aRunStartedOnAQueueSchedulerMakesNoAttachmentList() {
        let scheduler = QueueScheduler(queue: DispatchQueue(label: "start-on-slot"))
        let ran = Self.runToEnd(SignalProducer(value: 5).start(on: scheduler))
        #expect(ran.values == [5])
        #expect(Self.madeNoList(ran.run))
    }

    /// A time operator's end of run is one object in a slot: a run of `timeout` (its timer in
    /// the first slot, its end in the second) and one of `observe(on:)` make no attachment
    /// list, and both still deliver and end as before.
    @Test func timeOperatorRunsKeepTheirEndInASlot() {
        let queue = DispatchQueue(label: "timed-end-slot")
        let scheduler = QueueScheduler(queue: queue)
        let timedOut = Recorder<Int, TestError>()
        let timeoutRun = SignalProducer<Int, TestError>(value: 1)
            .timeout(after: 3600, raising: TestError(code: 1), on: scheduler).start(timedOut.observer)
        #expect(timedOut.events == [.value(1), .completed])
        #expect(Self.madeNoList(timeoutRun))

        let hopped = Self.runToEnd(SignalProducer(value: 2).observe(on: scheduler))
        #expect(hopped.values == [2])
        #expect(hopped.terminal == .completed)
        #expect(Self.madeNoList(hopped.run))

        // Disposed while pending: interrupted once, on the scheduler.
        let interruptions = Box(0)
        let interrupted = DispatchSemaphore(value: 0)
        let run = SignalProducer<Int, Never>.never.observe(on: scheduler).start { event in
            if case .interrupted = event {
                interruptions.modify { $0 += 1 }
                interrupted.signal()
            }
        }
        run.dispose()
        interrupted.wait()
        queue.sync {}
        #expect(interruptions.value == 1)
    }

    @Test func withSomethingAttachedAlreadyTheHandlerIsListedInOrder() {
        let (lifetime, token) = Lifetime.make()
        let log = Box<[String]>([])
        lifetime.observeEnded { log.modify { $0.append("listed") } }
        lifetime._attachFirst(CountingHandler("second", log: log))
        lifetime._attachFirst(CountingHandler("third", log: log))
        token.dispose()
        #expect(log.value == ["listed", "second", "third"])
    }

    @Test func onAnEndedLifetimeTheHandlerRunsAtOnce() {
        let log = Box<[String]>([])
        Lifetime.empty._attachFirst(CountingHandler("now", log: log))
        #expect(log.value == ["now"])
    }

    @Test func aReleasedRunLifetimeRunsItsInlineHandler() {
        let log = Box<[String]>([])
        do {
            let run = _ProducerRun<Int, Never>(Signal<Int, Never>.Observer())
            run._attachFirst(CountingHandler("ended", log: log))
        }
        #expect(log.value == ["ended"])
    }

    @Test func aReleasedRunRunsBothSlotsAndItsListInOrder() {
        let log = Box<[String]>([])
        do {
            let run = _ProducerRun<Int, Never>(Signal<Int, Never>.Observer())
            run._attachFirst(CountingHandler("first", log: log))
            run._attachFirst(CountingHandler("second", log: log))
            run.observeEnded { log.modify { $0.append("listed") } }
        }
        #expect(log.value == ["first", "second", "listed"])
    }
}

/// Attaching, detaching and ending from many threads at once: every attachment either runs
/// exactly once or is detached, never both, never twice; one attached after the end runs at
/// once. Under `--sanitize=thread` the list's links are checked for races.
@Suite("Lifetime Stress", .serialized)
struct LifetimeStressTests {
    @Test func concurrentAttachDetachAndEnd() {
        let rounds = ProcessInfo.processInfo.environment["CI_SHORT"] == nil ? 200 : 50
        for _ in 0..<rounds {
            let (lifetime, token) = Lifetime.make()
            let perThread = 50
            // Runs per attachment, by thread * perThread + index.
            let runs = Box([Int](repeating: 0, count: 3 * perThread))
            DispatchQueueShim.concurrentPerform(iterations: 4) { thread in
                if thread == 3 {
                    token.dispose()
                    return
                }
                for index in 0..<perThread {
                    let slot = thread * perThread + index
                    let detach = lifetime.observeEnded { runs.modify { $0[slot] += 1 } }
                    if index % 2 == 0 { detach?.dispose() }
                }
            }
            // Kept attachments ran exactly once; detached ones at most once (a detach can lose
            // the race with the end).
            for slot in 0..<(3 * perThread) {
                if slot % perThread % 2 == 1 {
                    #expect(runs.value[slot] == 1, "attachment \(slot) ran \(runs.value[slot]) times")
                } else {
                    #expect(runs.value[slot] <= 1, "attachment \(slot) ran \(runs.value[slot]) times")
                }
            }
            #expect(lifetime.hasEnded)
        }
    }

    /// A run's two slots filled by two threads while a third ends the run: each handler runs
    /// once.
    @Test func bothSlotsRacingTheEndRunOnceEach() {
        let rounds = ProcessInfo.processInfo.environment["CI_SHORT"] == nil ? 2_000 : 500
        for _ in 0..<rounds {
            let run = _ProducerRun<Int, Never>(Signal<Int, Never>.Observer())
            let log = Box<[String]>([])
            DispatchQueueShim.concurrentPerform(iterations: 3) { thread in
                if thread < 2 {
                    run._attachFirst(LifetimeAttachmentTests.CountingHandler("\(thread)", log: log))
                } else {
                    run.dispose()
                }
            }
            #expect(log.value.sorted() == ["0", "1"])
        }
    }

    /// The inline slot filled while another thread ends the lifetime: the handler runs once.
    @Test func inlineSlotRacingTheEndRunsOnce() {
        let rounds = ProcessInfo.processInfo.environment["CI_SHORT"] == nil ? 2_000 : 500
        for _ in 0..<rounds {
            let (lifetime, token) = Lifetime.make()
            let log = Box<[String]>([])
            DispatchQueueShim.concurrentPerform(iterations: 2) { thread in
                if thread == 0 {
                    lifetime._attachFirst(LifetimeAttachmentTests.CountingHandler("inline", log: log))
                } else {
                    token.dispose()
                }
            }
            #expect(log.value == ["inline"])
        }
    }
}

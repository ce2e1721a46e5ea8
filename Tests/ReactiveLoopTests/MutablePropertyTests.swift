import Foundation
import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

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

    /// Every way of starting a property's producer: `startWithValues` takes a path of its own
    /// (no run, sink or observer), a start with an observer or a closure of every event takes
    /// another (one object of its own), and a start through an operator makes a run.
    static func start(
        _ kind: Int, _ producer: SignalProducer<Int, Never>, _ action: @escaping (Int) -> Void
    ) -> any Disposable {
        switch kind {
        case 0: producer.startWithValues(action)
        case 1: producer.start(Signal.Observer(value: action))
        case 2: producer.start { if case let .value(value) = $0 { action(value) } }
        default: producer.map { $0 }.startWithValues(action)
        }
    }

    static let starts = 0..<4

    /// Each way of starting a property's producer that receives every event: an observer, a
    /// closure, the convenience starts made of one (both on the property's core, with no run),
    /// and a run (through an operator, and with a signal's input, which a run keeps).
    static func startEvents(
        _ kind: Int, _ producer: SignalProducer<Int, Never>,
        _ action: @escaping (Signal<Int, Never>.Event) -> Void
    ) -> any Disposable {
        switch kind {
        case 0: return producer.start(action)
        case 1: return producer.start(Signal.Observer(action))
        case 2: return producer.map { $0 }.start(action)
        case 3:
            // Lock-free: a locked pipe's input keeps no core, and takes the other path.
            let (signal, input) = withCoreKind(.lockFree) { Signal<Int, Never>.pipe() }
            signal.observe(action)
            return producer.start(input)
        default:
            // A value through `startWithResult`, the end through `startWithCompleted` and
            // `startWithInterrupted` (three starts, disposed together).
            let result = producer.startWithResult { if case let .success(value) = $0 { action(.value(value)) } }
            let completed = producer.startWithCompleted { action(.completed) }
            let interrupted = producer.startWithInterrupted { action(.interrupted) }
            return CompositeDisposable([result, interrupted, completed])
        }
    }

    static let eventStarts = 0..<5

    /// Starts `producer` the `kind` way with a closure that records every event and keeps an
    /// object, which `trackedIsAlive` says is still alive.
    static func startRecording(
        _ kind: Int, _ producer: SignalProducer<Int, Never>
    ) -> (disposable: (any Disposable)?, seen: Box<[Signal<Int, Never>.Event]>, trackedIsAlive: () -> Bool) {
        let seen = Box<[Signal<Int, Never>.Event]>([])
        weak var weakTracked: Tracked?
        let disposable: any Disposable
        do {
            let tracked = Tracked()
            weakTracked = tracked
            disposable = startEvents(kind, producer) { event in
                _ = tracked
                seen.value.append(event)
            }
        }
        return (disposable, seen, { weakTracked != nil })
    }

    @Test(arguments: eventStarts)
    func disposingARunOfEveryEventInterruptsItOnceAndLetsGoOfItsClosure(start: Int) {
        let property = MutableProperty(0)
        var (disposable, seen, trackedIsAlive) = Self.startRecording(start, property.producer)
        property.value = 1
        #expect(disposable?.isDisposed == false)
        disposable?.dispose()
        #expect(disposable?.isDisposed == true)
        #expect(!trackedIsAlive())
        disposable?.dispose()
        property.value = 2
        #expect(seen.value == [.value(0), .value(1), .interrupted])
        weak let weakDisposable = disposable as AnyObject?
        disposable = nil
        #expect(weakDisposable == nil)
    }

    @Test(arguments: eventStarts)
    func aRunOfEveryEventCompletesWhenThePropertyGoesAndADisposalAfterSendsNothing(start: Int) {
        var property: MutableProperty<Int>? = MutableProperty(0)
        var (disposable, seen, trackedIsAlive) = Self.startRecording(start, property!.producer)
        property!.value = 1
        property = nil
        #expect(seen.value == [.value(0), .value(1), .completed])
        #expect(!trackedIsAlive())
        #expect(disposable?.isDisposed == false)
        disposable?.dispose()
        #expect(disposable?.isDisposed == true)
        #expect(seen.value == [.value(0), .value(1), .completed])
        // Nothing is kept once the run ended and its disposable went.
        weak let weakDisposable = disposable as AnyObject?
        disposable = nil
        #expect(weakDisposable == nil)
    }

    /// Disposed from inside the delivery of a value, after a change made there: `interrupted`
    /// comes once the delivery returns, and the change (which the property's other observers
    /// see) does not reach the run. A change made inside the `interrupted` delivery does not
    /// either.
    /// (Not for the three convenience starts: one's disposal interrupts the others at once.)
    @Test(arguments: eventStarts.dropLast())
    func aRunOfEveryEventDisposedFromInsideItsDeliveryIsInterruptedAfterIt(start: Int) {
        let property = MutableProperty(0)
        let other = Box<[Int]>([])
        property.signal.observeValues { other.value.append($0) }
        let seen = Box<[Signal<Int, Never>.Event]>([])
        let holder = Box<(any Disposable)?>(nil)
        let inside = Box(false)
        holder.value = Self.startEvents(start, property.producer) { event in
            #expect(!inside.value, "a delivery inside another")
            inside.value = true
            defer { inside.value = false }
            seen.value.append(event)
            switch event {
            case .value(1):
                property.value = 2
                holder.value?.dispose()
                #expect(seen.value == [.value(0), .value(1)], "nothing is delivered inside the delivery")
            case .interrupted: property.value = 3
            default: break
            }
        }
        property.value = 1
        property.value = 4
        #expect(seen.value == [.value(0), .value(1), .interrupted])
        #expect(other.value == [1, 2, 3, 4])
    }

    /// A delivery that read the subscription before another thread disposed it, or one behind
    /// the end, reaches the run: it delivers nothing (the race itself is in the stress tests).
    @Test func aRunOfEveryEventDeliversNothingOnceDisposedOrEnded() throws {
        let property = MutableProperty(0)
        let seen = Box<[Signal<Int, Never>.Event]>([])
        let run = try #require(property.producer.start { seen.value.append($0) } as? _PropertyRun<Int, Never>)
        run.dispose()
        run.receive(.value(5))
        run.receive(.completed)
        #expect(seen.value == [.value(0), .interrupted])

        var ending: MutableProperty<Int>? = MutableProperty(1)
        let ended = Box<[Signal<Int, Never>.Event]>([])
        let other = try #require(ending!.producer.start { ended.value.append($0) } as? _PropertyRun<Int, Never>)
        ending = nil
        other.receive(.value(5))
        other.receive(.completed)
        #expect(ended.value == [.value(1), .completed])
    }

    /// Disposed from another thread while a value is being delivered: `dispose()` returns at
    /// once, and `interrupted` comes on the delivering thread when the value's delivery
    /// returns, with nothing in between.
    @Test func aRunOfEveryEventDisposedFromAnotherThreadDuringADeliveryIsInterruptedAfterIt() {
        let property = MutableProperty(0)
        let seen = Box<[Signal<Int, Never>.Event]>([])
        let inside = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let deliveringThread = Box<Thread?>(nil)
        let interruptedThread = Box<Thread?>(nil)
        let disposable = property.producer.start { event in
            seen.modify { $0.append(event) }
            if event == .value(1) {
                deliveringThread.value = Thread.current
                inside.signal()
                proceed.wait()
            }
            if event == .interrupted { interruptedThread.value = Thread.current }
        }
        let done = DispatchSemaphore(value: 0)
        Thread {
            property.value = 1
            done.signal()
        }.start()
        inside.wait()
        disposable.dispose()
        #expect(seen.value == [.value(0), .value(1)], "nothing is delivered while the value's delivery runs")
        proceed.signal()
        done.wait()
        #expect(seen.value == [.value(0), .value(1), .interrupted])
        #expect(interruptedThread.value === deliveringThread.value)
        property.value = 2
        #expect(seen.value == [.value(0), .value(1), .interrupted])
    }

    /// Disposed with no delivery in progress, a run of every event gets `interrupted` while it
    /// is still the property's observer, then leaves, as ReactiveSwift's runs do.
    @Test(arguments: eventStarts.dropLast())
    func aDisposedRunOfEveryEventIsInterruptedBeforeItLeavesTheProperty(start: Int) {
        let property = MutableProperty(0)
        let observersWhenInterrupted = Box<Int32?>(nil)
        let disposable = Self.startEvents(start, property.producer) { event in
            if event == .interrupted { observersWhenInterrupted.value = property.storage.core.observerCount }
        }
        #expect(property.storage.core.observerCount == 1)
        disposable.dispose()
        #expect(observersWhenInterrupted.value == 1)
        #expect(property.storage.core.observerCount == 0)
    }

    /// Disposed from inside its own `completed` or `interrupted`: nothing more.
    @Test(arguments: [false, true])
    func aRunOfEveryEventDisposedFromInsideItsTerminalEventSendsNothingMore(completing: Bool) {
        var property: MutableProperty<Int>? = MutableProperty(0)
        let seen = Box<[Signal<Int, Never>.Event]>([])
        let holder = Box<(any Disposable)?>(nil)
        holder.value = property!.producer.start { event in
            seen.value.append(event)
            if event.isTerminating { holder.value?.dispose() }
        }
        if completing { property = nil } else { holder.value?.dispose() }
        holder.value?.dispose()
        #expect(seen.value == [.value(0), completing ? .completed : .interrupted])
    }

    /// Which starts take the property's core directly (a `_PropertyRun`), and which make a run.
    @Test func theStartsOfEveryEventOnAPropertysProducerMakeNoRun() {
        let property = MutableProperty(0)
        let (_, lockFreeInput) = withCoreKind(.lockFree) { Signal<Int, Never>.pipe() }
        let direct: [any Disposable] = [
            property.producer.start { _ in },
            property.producer.start(Signal.Observer(value: { _ in }, completed: {})),
            property.producer.start(),
            property.producer.startWithResult { _ in },
            property.producer.startWithCompleted {},
            property.producer.startWithInterrupted {},
        ]
        for disposable in direct { #expect(disposable is _PropertyRun<Int, Never>) }
        let runs: [any Disposable] = [
            property.producer.start(lockFreeInput),
            property.producer.map { $0 }.start { _ in },
        ]
        for disposable in runs { #expect(disposable is _RunLifetime) }
        (direct + runs).forEach { $0.dispose() }
    }

    /// A view of a property (`Property(_:)`) takes its values through a start of every event
    /// on the property's producer: releasing the view ends that start, which leaves the
    /// property's core.
    @Test func aReleasedViewOfAPropertyStopsObservingIt() {
        let source = MutableProperty(1)
        var view: Property<Int>? = Property(source)
        #expect(source.storage.core.observerCount == 1)
        source.value = 2
        #expect(view?.value == 2)
        view = nil
        #expect(source.storage.core.observerCount == 0)
        source.value = 3
    }

    /// A run of every event started behind the property's queued completion (from inside a
    /// delivery, as the property went away) gets the value, then `completed`.
    @Test(arguments: eventStarts)
    func aRunOfEveryEventStartedBehindThePropertysCompletionCompletes(start: Int) {
        let holder = Box<MutableProperty<Int>?>(MutableProperty(0))
        let storage = holder.value!.storage
        let producer = holder.value!.producer
        let seen = Box<[Signal<Int, Never>.Event]>([])
        holder.value!.signal.observeValues { value in
            guard value == 1 else { return }
            holder.value = nil
            _ = Self.startEvents(start, producer) { seen.value.append($0) }
        }
        storage.set(1)
        #expect(seen.value == [.value(1), .completed])
    }

    /// Regression: a change made from inside the delivery of the current value was delivered
    /// to the property's other observers, but not to the run that made it.
    @Test(arguments: starts)
    func aChangeMadeWhileTheCurrentValueIsDeliveredReachesTheRunThatMadeIt(start: Int) {
        let property = MutableProperty(0)
        let other = Recorder<Int, Never>()
        property.signal.observe(other.observer)
        let seen = Box<[Int]>([])
        let disposable = Self.start(start, property.producer) { value in
            seen.value.append(value)
            if value == 0 { property.value = 5 }
        }
        property.value = 6
        #expect(seen.value == [0, 5, 6])
        #expect(other.values == [5, 6])
        disposable.dispose()
    }

    @Test(arguments: starts)
    func aRunStartedFromInsideADeliveryAfterAReentrantSetSeesTheNewestValueOnce(start: Int) {
        let property = MutableProperty(0)
        let seen = Box<[Int]>([])
        var disposable: (any Disposable)?
        property.signal.observeValues { value in
            guard value == 1 else { return }
            property.value = 2
            disposable = Self.start(start, property.producer) { seen.value.append($0) }
        }
        property.value = 1
        property.value = 3
        #expect(seen.value == [2, 3])
        disposable?.dispose()
        property.value = 4
        #expect(seen.value == [2, 3])
    }

    @Test(arguments: starts)
    func disposingARunFromInsideItsOwnDeliveryStopsIt(start: Int) {
        let property = MutableProperty(0)
        let seen = Box<[Int]>([])
        let holder = Box<(any Disposable)?>(nil)
        holder.value = Self.start(start, property.producer) { value in
            seen.value.append(value)
            if value == 1 { holder.value?.dispose() }
        }
        property.value = 1
        property.value = 2
        #expect(seen.value == [0, 1])
        #expect(holder.value?.isDisposed == true)
    }

    @Test(arguments: starts)
    func aRunStartedAfterThePropertyWentAwaySendsTheLastValueAndEnds(start: Int) {
        var property: MutableProperty<Int>? = MutableProperty(0)
        property!.value = 7
        let producer = property!.producer
        property = nil
        weak var weakTracked: Tracked?
        let seen = Box<[Int]>([])
        var disposable: (any Disposable)?
        do {
            let tracked = Tracked()
            weakTracked = tracked
            disposable = Self.start(start, producer) { value in
                _ = tracked
                seen.value.append(value)
            }
        }
        #expect(seen.value == [7])
        #expect(weakTracked == nil)
        #expect(disposable?.isDisposed == false)
        disposable?.dispose()
        #expect(disposable?.isDisposed == true)
    }

    @Test func startWithValuesOnEveryKindOfPropertySeesTheCurrentValueThenChanges() {
        let source = MutableProperty(1)
        let view = Property(source)
        let captured = Property(capturing: source)
        let derived = source.map { $0 * 10 }
        let fromView = Box<[Int]>([])
        let fromCaptured = Box<[Int]>([])
        let fromDerived = Box<[Int]>([])
        let runs = [
            source.producer.startWithValues { _ in },
            view.producer.startWithValues { fromView.value.append($0) },
            captured.producer.startWithValues { fromCaptured.value.append($0) },
            derived.producer.startWithValues { fromDerived.value.append($0) },
        ]
        // Each is a registration on the property's core, with no run object around it.
        #expect(runs.allSatisfy { $0 is _Unsubscriber<Int, Never> })
        source.value = 2
        #expect(fromView.value == [1, 2])
        #expect(fromCaptured.value == [1, 2])
        #expect(fromDerived.value == [10, 20])
        // A read-only view of a storage its owner changes: an action's `isExecuting`.
        let action = Action<Int, Int, Never> { SignalProducer(value: $0) }
        let executing = Box<[Bool]>([])
        let run = action.isExecuting.producer.startWithValues { executing.value.append($0) }
        #expect(run is _Unsubscriber<Bool, Never>)
        action.apply(1).start()
        #expect(executing.value == [false, true, false])
    }

    /// Regression: a run started from inside a delivery, as the property went away (its
    /// completion queued behind that delivery), ended with `interrupted`: a property's producer
    /// ends by itself with `completed` only (`interrupted` is for a run that is disposed).
    @Test func aRunStartedBehindThePropertysQueuedCompletionCompletes() {
        let holder = Box<MutableProperty<Int>?>(MutableProperty(0))
        let storage = holder.value!.storage
        let producer = holder.value!.producer
        let recorder = Recorder<Int, Never>()
        let values = Box<[Int]>([])
        holder.value!.signal.observeValues { value in
            guard value == 1 else { return }
            // The last reference goes: the property completes its signal, after this delivery.
            holder.value = nil
            producer.start(recorder.observer)
            producer.startWithValues { values.value.append($0) }
        }
        storage.set(1)
        #expect(holder.value == nil)
        #expect(recorder.events == [.value(1), .completed])
        #expect(values.value == [1])
    }

    /// A derived property's producer started with `startWithValues`, kept by nothing but the
    /// run: the run keeps the derived property's streams, which stop observing the source once
    /// it is disposed.
    @Test func disposingStartWithValuesOnADroppedDerivedPropertyStopsItsRunOnTheSource() {
        let source = MutableProperty(1)
        weak var weakTracked: Tracked?
        let seen = Box<[Int]>([])
        var derived: Property<Int>?
        do {
            let tracked = Tracked()
            weakTracked = tracked
            derived = source.map { value in
                _ = tracked
                return value * 10
            }
        }
        let run = derived!.producer.startWithValues { seen.value.append($0) }
        derived = nil
        source.value = 2
        #expect(seen.value == [10, 20])
        #expect(weakTracked != nil)
        run.dispose()
        source.value = 3
        #expect(seen.value == [10, 20])
        #expect(weakTracked == nil, "the derived property's run on the source was disposed")
    }
}

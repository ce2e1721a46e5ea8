import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

/// Guarantee 5: termination releases observers and the generator's resources; a signal with
/// no observers and no outside reference is released.
@Suite("Leaks")
struct LeakTests {
    @Test func terminationReleasesObservers() {
        let released = Box(false)
        let (signal, input) = Signal<Int, Never>.pipe()
        do {
            let tracked = Tracked { released.value = true }
            signal.observeValues { _ in _ = tracked }
        }
        #expect(!released.value)
        input.sendCompleted()
        #expect(released.value)
    }

    @Test func terminationReleasesTheGeneratorsResources() {
        let released = Box(false)
        let ended = Box(false)
        var input: Signal<Int, Never>.Observer?
        let signal = Signal<Int, Never> { observer, lifetime in
            input = observer
            let tracked = Tracked { released.value = true }
            lifetime.observeEnded {
                _ = tracked; ended.value = true
            }
        }
        signal.observeValues { _ in }
        #expect(!ended.value)
        input?.sendInterrupted()
        #expect(ended.value)
        #expect(released.value)
    }

    @Test func signalWithNoObserversAndNoReferenceIsReleased() {
        weak var weakSignal: Signal<Int, Never>?
        let recorder = EndRecordingSignal<Int>()
        do {
            let signal = recorder.make()
            weakSignal = signal
        }
        #expect(weakSignal == nil)
        #expect(recorder.ended.value)
        #expect(recorder.input != nil)
    }

    @Test func signalWhoseLastObserverIsDisposedAfterItWasReleasedEnds() {
        let recorder = EndRecordingSignal<Int>()
        let disposable = recorder.make().observeValues { _ in }
        #expect(!recorder.ended.value)
        disposable?.dispose()
        #expect(recorder.ended.value)
    }

    @Test func disposedObserverIsReleasedAtOnce() {
        let released = Box(false)
        let (signal, input) = Signal<Int, Never>.pipe()
        var disposable: (any Disposable)?
        do {
            let tracked = Tracked { released.value = true }
            disposable = signal.observeValues { _ in _ = tracked }
        }
        disposable?.dispose()
        #expect(released.value)
        _ = input
    }

    @Test func producerRunReleasesItsObserverAndResourcesWhenItCompletes() {
        let released = Box(false)
        let resources = Box(false)
        let producer = SignalProducer<Int, Never> { observer, lifetime in
            lifetime.observeEnded { resources.value = true }
            observer.send(value: 1)
            observer.sendCompleted()
        }
        do {
            let tracked = Tracked { released.value = true }
            producer.startWithValues { _ in _ = tracked }
        }
        #expect(released.value)
        #expect(resources.value)
    }

    /// The disposable of a run that ended (by itself or by being disposed) is kept: the run
    /// must still let go of the closures (or observer) it was started with, whichever way it
    /// was started.
    @Test(arguments: [false, true])
    func everyStartReleasesWhatItWasGivenWhenTheRunEndsThoughItsDisposableIsKept(disposed: Bool) {
        // A run that completes, or one that only ends when it is disposed.
        let producer = disposed ? SignalProducer<Int, TestError>.never : SignalProducer<Int, TestError>(value: 1)
        let starts: [(Tracked) -> any Disposable] = [
            { tracked in producer.start { _ in _ = tracked } },
            { tracked in producer.start(Signal.Observer(value: { _ in _ = tracked })) },
            { tracked in producer.start(Signal.Observer({ _ in _ = tracked })) },
            { tracked in producer.startWithResult { _ in _ = tracked } },
            { tracked in producer.startWithCompleted { _ = tracked } },
            { tracked in producer.startWithFailed { _ in _ = tracked } },
            { tracked in producer.startWithInterrupted { _ = tracked } },
            { tracked in producer.flatMapError { _ in .empty }.startWithValues { _ in _ = tracked } },
        ]
        for (index, start) in starts.enumerated() {
            weak var weakTracked: Tracked?
            var disposable: (any Disposable)?
            do {
                let tracked = Tracked()
                weakTracked = tracked
                disposable = start(tracked)
            }
            if disposed {
                #expect(weakTracked != nil, "start \(index)")
                disposable?.dispose()
            }
            #expect(weakTracked == nil, "start \(index)")
            #expect(disposable != nil)
        }
    }

    @Test func flattenReleasesInnerRunsWhenTheOuterIsInterrupted() {
        let innerEnded = Box(0)
        let (outer, outerInput) = Signal<SignalProducer<Int, Never>, Never>.pipe()
        let disposable = SignalProducer(outer).flatten(.merge).start()
        for _ in 0..<3 {
            outerInput.send(
                value: SignalProducer { observer, lifetime in
                    lifetime.observeEnded {
                        _ = observer  // Kept so that the inner run lasts until it is disposed.
                        innerEnded.modify { $0 += 1 }
                    }
                })
        }
        #expect(innerEnded.value == 0)
        disposable.dispose()
        #expect(innerEnded.value == 3)
    }

    /// A property lets go of its value when it is released, and of each value it replaces.
    /// The same for a property's producer, whose `startWithValues` registers the closure on
    /// the property's signal core with no run around it: the run ends when the property goes
    /// away, or when it is disposed.
    @Test(arguments: [false, true])
    func everyStartOfAPropertysProducerReleasesWhatItWasGivenWhenTheRunEndsThoughItsDisposableIsKept(
        disposed: Bool
    ) {
        let starts: [(SignalProducer<Int, Never>, Tracked) -> any Disposable] = [
            { producer, tracked in producer.startWithValues { _ in _ = tracked } },
            { producer, tracked in producer.start { _ in _ = tracked } },
            { producer, tracked in producer.start(Signal.Observer(value: { _ in _ = tracked })) },
            { producer, tracked in producer.map { $0 }.startWithValues { _ in _ = tracked } },
        ]
        for (index, start) in starts.enumerated() {
            var property: MutableProperty<Int>? = MutableProperty(0)
            weak var weakTracked: Tracked?
            var disposable: (any Disposable)?
            do {
                let tracked = Tracked()
                weakTracked = tracked
                disposable = start(property!.producer, tracked)
            }
            #expect(weakTracked != nil, "start \(index)")
            if disposed {
                disposable?.dispose()
                #expect(weakTracked == nil, "start \(index)")
                #expect(disposable?.isDisposed == true, "start \(index)")
            }
            property = nil
            #expect(weakTracked == nil, "start \(index)")
            // A run that ended with the property was not disposed.
            #expect(disposable?.isDisposed == disposed, "start \(index)")
        }
    }

    @Test func mutablePropertyReleasesItsValues() {
        var released: [Int] = []
        do {
            let property = MutableProperty(Tracked { released.append(1) })
            property.value = Tracked { released.append(2) }
            #expect(released == [1])
            property.modify { $0 = Tracked { released.append(3) } }
            #expect(released == [1, 2])
            _ = property.swap(Tracked { released.append(4) })
            #expect(released == [1, 2, 3])
        }
        #expect(released == [1, 2, 3, 4])
    }

    @Test func mutablePropertyIsReleasedAndCompletesItsSignal() {
        weak var weakProperty: MutableProperty<Int>?
        let completed = Box(false)
        do {
            let property = MutableProperty(1)
            property.signal.observeCompleted { completed.value = true }
            weakProperty = property
        }
        #expect(weakProperty == nil)
        #expect(completed.value)
    }
}

extension LeakTests {
    /// Holds what it is given weakly.
    final class WeakReference<Object: AnyObject>: @unchecked Sendable {  // Used on one thread.
        weak var object: Object?
    }

    /// How a flatten run ends, for the test below.
    enum FlattenEnding: CaseIterable { case outerCompletes, disposed, innerFails, innerInterrupted, outerFails }

    /// A flatten run keeps the inner run it reuses for inners that end inside their start,
    /// and that run refers back to it: the flatten run lets go of it when it ends, however it
    /// ends, so that both are released.
    @Test(arguments: FlattenStrategy.allForTests, FlattenEnding.allCases)
    func aFlattenRunOfImmediateInnersIsReleasedWhenItEnds(_ strategy: FlattenStrategy, ending: FlattenEnding) {
        typealias Inner = SignalProducer<Int, TestError>
        let flattenRun = WeakReference<_FlattenRun<Int, TestError>>()
        let (outer, outerInput) = Signal<Inner, TestError>.pipe()
        // What `flatten` does, with a look at its run.
        let producer = SignalProducer<Int, TestError>._serialized { sink, lifetime in
            let run = _FlattenRun<Int, TestError>(strategy, sink: sink, lifetime: lifetime)
            flattenRun.object = run
            lifetime += outer.observe { event in run.outer(event) }
        }
        let recorder = Recorder<Int, TestError>()
        let disposable = producer.start(recorder.observer)
        outerInput.send(value: Inner(value: 1))
        outerInput.send(value: Inner([2, 3]))
        #expect(recorder.values.first == 1)
        #expect(flattenRun.object?.reusable != nil, "\(strategy)")
        switch ending {
        case .outerCompletes: outerInput.sendCompleted()
        case .disposed: disposable.dispose()
        case .innerFails: outerInput.send(value: Inner(error: TestError(code: 1)))
        case .innerInterrupted: outerInput.send(value: Inner(value: 9).take(first: 0))
        case .outerFails: outerInput.send(error: TestError(code: 2))
        }
        if strategy.kind == .race && (ending == .innerFails || ending == .innerInterrupted) {
            // The race was won by the first inner: later ones are not started.
            #expect(recorder.terminal == nil)
            outerInput.sendCompleted()
        }
        #expect(recorder.terminal != nil, "\(strategy), \(ending)")
        #expect(flattenRun.object == nil, "\(strategy), \(ending)")
    }
}

import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

@Suite("Disposables")
struct DisposableTests {
    @Test func anyDisposableRunsItsActionOnce() {
        var runs = 0
        let disposable = AnyDisposable { runs += 1 }
        #expect(!disposable.isDisposed)
        disposable.dispose()
        disposable.dispose()
        #expect(runs == 1)
        #expect(disposable.isDisposed)
        let plain = AnyDisposable()
        plain.dispose()
        #expect(plain.isDisposed)
        let wrapped = AnyDisposable(plain)
        wrapped.dispose()
        #expect(wrapped.isDisposed)
    }

    /// The disposable of an observation removes it once: disposing it again (from several
    /// threads, too) neither removes another observer's place nor ends a signal that still has
    /// observers. For both signal cores (each returns its own kind of disposable).
    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func anObservationsDisposableRemovesItOnce(kind: _SignalCoreKind) {
        let recorder = EndRecordingSignal<Int>()
        let received = Box<[Int]>([])
        var first: (any Disposable)?
        var second: (any Disposable)?
        withCoreKind(kind) {
            let signal = recorder.make()
            first = signal.observeValues { _ in }
            second = signal.observeValues { value in received.modify { $0.append(value) } }
        }
        nonisolated(unsafe) let disposable = first!  // Disposing is thread safe.
        #expect(!disposable.isDisposed)
        DispatchQueueShim.concurrentPerform(iterations: 4) { _ in disposable.dispose() }
        #expect(disposable.isDisposed)
        #expect(!recorder.ended.value)
        recorder.input?.send(value: 1)
        #expect(received.value == [1])
        second?.dispose()
        #expect(recorder.ended.value)
    }

    @Test func anyDisposableRunsOnceUnderConcurrentDisposal() {
        let runs = Box(0)
        for _ in 0..<200 {
            let disposable = AnyDisposable { runs.modify { $0 += 1 } }
            DispatchQueueShim.concurrentPerform(iterations: 4) { _ in disposable.dispose() }
        }
        #expect(runs.value == 200)
    }

    @Test func compositeDisposesMembersInOrderAndLateAdditionsAtOnce() {
        var log: [Int] = []
        let composite = CompositeDisposable()
        composite += { log.append(1) }
        composite += AnyDisposable { log.append(2) }
        let removed = composite.add { log.append(3) }
        removed?.dispose()
        #expect(composite.add(nil as (any Disposable)?) == nil)
        composite.dispose()
        #expect(log == [1, 2])
        #expect(composite.isDisposed)
        #expect(composite.add { log.append(4) } == nil)
        #expect(log == [1, 2, 4])
        let fromSequence = CompositeDisposable([AnyDisposable { log.append(5) }, nil])
        fromSequence.dispose()
        let fromDisposables = CompositeDisposable([AnyDisposable { log.append(6) }] as [any Disposable])
        fromDisposables.dispose()
        #expect(log == [1, 2, 4, 5, 6])
    }

    @Test func serialDisposableDisposesReplacedAndLateInners() {
        let first = AnyDisposable()
        let serial = SerialDisposable(first)
        #expect(serial.inner === first)
        let second = AnyDisposable()
        serial.inner = second
        #expect(first.isDisposed)
        #expect(!second.isDisposed)
        serial.dispose()
        #expect(second.isDisposed)
        #expect(serial.isDisposed)
        let third = AnyDisposable()
        serial.inner = third
        #expect(third.isDisposed)
    }

    @Test func scopedDisposableDisposesWhenReleased() {
        let inner = AnyDisposable()
        do { _ = ScopedDisposable(inner) }
        #expect(inner.isDisposed)
        let composite = ScopedDisposable(CompositeDisposable())
        var ran = 0
        composite += { ran += 1 }
        composite += AnyDisposable { ran += 1 }
        composite.dispose()
        #expect(ran == 2)
        #expect(composite.isDisposed)
        let erased = ScopedDisposable(AnyDisposable() as any Disposable)
        erased.dispose()
        #expect(erased.isDisposed)
        let serial = ScopedDisposable(SerialDisposable())
        let member = AnyDisposable()
        serial.inner = member
        #expect(serial.inner === member)
    }
}

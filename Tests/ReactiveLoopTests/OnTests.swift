import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("on(...)")
struct OnTests {
    @Test func signalHooksRunOncePerEventInOrderBeforeObservers() {
        let log = Box<[String]>([])
        let (signal, input) = Signal<Int, TestError>.pipe()
        let hooked = signal.on(
            event: { _ in log.modify { $0.append("event \($0.count)") } },
            failed: { _ in log.modify { $0.append("failed \($0.count)") } },
            terminated: { log.modify { $0.append("terminated") } },
            disposed: { log.modify { $0.append("disposed") } },
            value: { value in log.modify { $0.append("value \(value)") } }
        )
        hooked.observe { event in log.modify { $0.append("observer A \(event)") } }
        hooked.observe { event in log.modify { $0.append("observer B \(event)") } }
        input.send(value: 1)
        input.send(error: TestError(code: 4))
        let expected = [
            "event 0", "value 1", "observer A VALUE 1", "observer B VALUE 1",
            "event 4", "failed 5", "terminated", "observer A FAILED TestError(code: 4)",
            "observer B FAILED TestError(code: 4)", "disposed",
        ]
        #expect(log.value == expected)
    }

    @Test func signalCompletedAndInterruptedHooks() {
        let log = Box<[String]>([])
        let (signal, input) = Signal<Int, Never>.pipe()
        signal.on(completed: { log.modify { $0.append("completed") } }).observe { _ in }
        input.sendCompleted()
        let (other, otherInput) = Signal<Int, Never>.pipe()
        other.on(interrupted: { log.modify { $0.append("interrupted") } }).observe { _ in }
        otherInput.sendInterrupted()
        #expect(log.value == ["completed", "interrupted"])
    }

    @Test func producerHooksIncludeStartingStartedAndDisposed() {
        let log = Box<[String]>([])
        let producer = SignalProducer<Int, Never> { observer, lifetime in
            log.modify { $0.append("handler") }
            observer.send(value: 1)
            lifetime.observeEnded { _ = observer }  // A released input would interrupt the run.
        }.on(
            starting: { log.modify { $0.append("starting") } },
            started: { log.modify { $0.append("started") } },
            interrupted: { log.modify { $0.append("interrupted") } },
            terminated: { log.modify { $0.append("terminated") } },
            disposed: { log.modify { $0.append("disposed") } },
            value: { value in log.modify { $0.append("value \(value)") } }
        )
        let disposable = producer.start()
        #expect(log.value == ["starting", "handler", "value 1", "started"])
        disposable.dispose()
        #expect(log.value == ["starting", "handler", "value 1", "started", "interrupted", "terminated", "disposed"])
    }

    @Test func producerHooksRunPerRun() {
        let starts = Box(0)
        let producer = SignalProducer<Int, Never>(value: 1).on(starting: { starts.modify { $0 += 1 } })
        producer.start()
        producer.start()
        #expect(starts.value == 2)
    }
}

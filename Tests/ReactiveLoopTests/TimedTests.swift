import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoop

@Suite("The runs of the operators that deliver on a scheduler")
struct TimedTests {
    /// Every operator that delivers on a scheduler, applied to a producer.
    static var schedulingOperators:
        [(String, (SignalProducer<Int, Never>, TestScheduler) -> SignalProducer<Int, Never>)]
    {
        [
            ("observe(on:)", { $0.observe(on: $1) }),
            ("lazyMap(on:)", { $0.lazyMap(on: $1) { $0 } }),
            ("delay", { $0.delay(1, on: $1) }),
            ("throttle", { $0.throttle(1, on: $1) }),
            ("debounce", { $0.debounce(1, on: $1) }),
        ]
    }

    /// Regression: disposing such a run delivered `interrupted` inside `dispose()`, on the
    /// disposing thread, instead of on the operator's scheduler.
    @Test func disposingARunDeliversInterruptedOnTheOperatorsScheduler() {
        for (name, apply) in Self.schedulingOperators {
            let scheduler = TestScheduler()
            let upstreamEnded = Box(false)
            let upstream = SignalProducer<Int, Never> { _, lifetime in
                lifetime.observeEnded { upstreamEnded.value = true }
            }
            let recorder = Recorder<Int, Never>()
            let disposable = apply(upstream, scheduler).start(recorder.observer)
            disposable.dispose()
            #expect(upstreamEnded.value, "\(name): upstream work is cancelled at once")
            #expect(recorder.events.isEmpty, "\(name): interrupted arrived inside dispose()")
            scheduler.run()
            #expect(recorder.events == [.interrupted], "\(name)")
        }
    }
}

import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

@Suite("sample, withLatest, take(untilReplacement:), skip(until:)")
struct SampleTests {
    @Test func sampleWithSendsTheLatestValueOnEachSamplerValue() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let (sampler, fire) = Signal<String, Never>.pipe()
        let recorder = Recorder<(Int, String), TestError>()
        signal.sample(with: sampler).observe(recorder.observer)
        fire.send(value: "ignored")
        input.send(value: 1)
        input.send(value: 2)
        fire.send(value: "a")
        fire.send(value: "b")
        #expect(recorder.values.map { "\($0.0)\($0.1)" } == ["2a", "2b"])
        input.sendCompleted()
        #expect(recorder.terminal == nil)
        fire.sendCompleted()
        #expect(recorder.events.last?.isCompleted == true)
    }

    @Test func sampleOnAndItsTerminations() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let (sampler, fire) = Signal<(), Never>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.sample(on: sampler).observe(recorder.observer)
        input.send(value: 5)
        fire.send(value: ())
        fire.sendInterrupted()
        #expect(recorder.events == [.value(5), .interrupted])
        let (other, otherInput) = Signal<Int, TestError>.pipe()
        let (otherSampler, _otherFire) = Signal<(), Never>.pipe()
        let failed = Recorder<Int, TestError>()
        other.sample(on: otherSampler).observe(failed.observer)
        otherInput.send(error: TestError())
        #expect(failed.events == [.failed(TestError())])
        _ = _otherFire
    }

    @Test func producerSampleForms() {
        let recorder = Recorder<(Int, Int), Never>()
        let (samplerSignal, fire) = Signal<Int, Never>.pipe()
        SignalProducer<Int, Never>([1, 2]).concat(.never).sample(with: SignalProducer(samplerSignal))
            .start(recorder.observer)
        fire.send(value: 10)
        #expect(recorder.values.map { [$0.0, $0.1] } == [[2, 10]])
        let on = Recorder<Int, Never>()
        let (trigger, pull) = Signal<(), Never>.pipe()
        SignalProducer<Int, Never>([3]).concat(.never).sample(on: trigger).start(on.observer)
        pull.send(value: ())
        #expect(on.values == [3])
        let withConvertible = Recorder<(Int, Int), Never>()
        SignalProducer<Int, Never>([4]).concat(.never).sample(with: samplerSignal).start(withConvertible.observer)
        fire.send(value: 11)
        #expect(withConvertible.values.map { [$0.0, $0.1] } == [[4, 11]])
        let onProducer = Recorder<Int, Never>()
        SignalProducer<Int, Never>([6]).concat(.never).sample(on: SignalProducer(trigger)).start(onProducer.observer)
        pull.send(value: ())
        #expect(onProducer.values == [6])
    }

    @Test func withLatestPairsEachValueWithTheSamplee() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let (samplee, set) = Signal<String, Never>.pipe()
        let recorder = Recorder<(Int, String), TestError>()
        signal.withLatest(from: samplee).observe(recorder.observer)
        input.send(value: 1)
        set.send(value: "a")
        input.send(value: 2)
        set.sendCompleted()
        input.send(value: 3)
        input.sendCompleted()
        #expect(recorder.values.map { "\($0.0)\($0.1)" } == ["2a", "3a"])
        #expect(recorder.events.last?.isCompleted == true)

        let fromProducer = Recorder<(Int, String), TestError>()
        let (other, otherInput) = Signal<Int, TestError>.pipe()
        other.withLatest(from: SignalProducer<String, Never>(value: "p")).observe(fromProducer.observer)
        other.withLatest(from: Property(value: "q")).observe(fromProducer.observer)
        otherInput.send(value: 7)
        #expect(fromProducer.values.map { "\($0.0)\($0.1)" } == ["7p", "7q"])

        let producerForm = Recorder<(Int, Int), Never>()
        SignalProducer<Int, Never>([1, 2]).withLatest(from: SignalProducer<Int, Never>(value: 9)).start(
            producerForm.observer)
        SignalProducer<Int, Never>([3]).withLatest(from: Property(value: 8)).start(producerForm.observer)
        #expect(producerForm.values.map { [$0.0, $0.1] } == [[1, 9], [2, 9], [3, 8]])
    }

    @Test func takeUntilReplacementSwitchesAtTheReplacementsFirstEvent() {
        let (signal, input) = Signal<Int, TestError>.pipe()
        let (replacement, replace) = Signal<Int, TestError>.pipe()
        let recorder = Recorder<Int, TestError>()
        signal.take(untilReplacement: replacement).observe(recorder.observer)
        input.send(value: 1)
        input.sendCompleted()
        replace.send(value: 10)
        replace.send(value: 11)
        replace.sendCompleted()
        #expect(recorder.events == [.value(1), .value(10), .value(11), .completed])
        let producer = Recorder<Int, Never>()
        let (late, lateInput) = Signal<Int, Never>.pipe()
        SignalProducer<Int, Never>([1]).concat(.never).take(untilReplacement: late).start(producer.observer)
        lateInput.send(value: 2)
        #expect(producer.values == [1, 2])
        let viaProducer = Recorder<Int, Never>()
        SignalProducer<Int, Never>.never.take(untilReplacement: SignalProducer<Int, Never>(value: 3)).start(
            viaProducer.observer)
        #expect(viaProducer.events == [.value(3), .completed])
    }

    @Test func skipUntilStartsForwardingAtTheTrigger() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let (trigger, fire) = Signal<(), Never>.pipe()
        let recorder = Recorder<Int, Never>()
        signal.skip(until: trigger).observe(recorder.observer)
        input.send(value: 1)
        fire.send(value: ())
        input.send(value: 2)
        #expect(recorder.values == [2])
        let producer = Recorder<Int, Never>()
        let (producerTrigger, producerFire) = Signal<(), Never>.pipe()
        SignalProducer(signal).skip(until: producerTrigger).start(producer.observer)
        input.send(value: 3)
        producerFire.sendCompleted()
        input.send(value: 4)
        #expect(producer.values == [4])
        let viaProducer = Recorder<Int, Never>()
        SignalProducer(signal).skip(until: SignalProducer<(), Never>(value: ())).start(viaProducer.observer)
        input.send(value: 5)
        #expect(viaProducer.values == [5])
    }
}

@Suite("Boolean operators")
struct BooleanTests {
    @Test func signalBooleans() {
        let (a, aInput) = Signal<Bool, Never>.pipe()
        let (b, bInput) = Signal<Bool, Never>.pipe()
        let not = Recorder<Bool, Never>()
        let and = Recorder<Bool, Never>()
        let or = Recorder<Bool, Never>()
        let all = Recorder<Bool, Never>()
        let any = Recorder<Bool, Never>()
        a.negate().observe(not.observer)
        a.and(b).observe(and.observer)
        a.or(b).observe(or.observer)
        Signal.all(a, b).observe(all.observer)
        Signal.any([a, b]).observe(any.observer)
        aInput.send(value: true)
        bInput.send(value: false)
        bInput.send(value: true)
        #expect(not.values == [false])
        #expect(and.values == [false, true])
        #expect(or.values == [true, true])
        #expect(all.values == [false, true])
        #expect(any.values == [true, true])
        let anyVariadic = Recorder<Bool, Never>()
        Signal.any(a, b).observe(anyVariadic.observer)
        let allCollection = Recorder<Bool, Never>()
        Signal.all([a]).observe(allCollection.observer)
        aInput.send(value: false)
        bInput.send(value: false)
        // Observed after the earlier values: both signals had to send again.
        #expect(anyVariadic.values == [false])
        #expect(allCollection.values == [false])
    }

    @Test func producerBooleans() {
        let t = SignalProducer<Bool, Never>(value: true)
        let f = SignalProducer<Bool, Never>(value: false)
        #expect(t.negate().first() == .success(false))
        #expect(t.and(f).first() == .success(false))
        #expect(t.or(f).first() == .success(true))
        #expect(t.and(Property(value: true)).first() == .success(true))
        #expect(f.or(Property(value: false)).first() == .success(false))
        #expect(SignalProducer.all(t, t).first() == .success(true))
        #expect(SignalProducer.any(f, f).first() == .success(false))
        #expect(SignalProducer<Bool, Never>.all([SignalProducer<Bool, Never>]()).first() == .success(true))
        #expect(SignalProducer<Bool, Never>.any([SignalProducer<Bool, Never>]()).first() == .success(false))
        #expect(
            SignalProducer<Bool, Never>.all([Property(value: true), Property(value: false)]).first() == .success(false))
        #expect(
            SignalProducer<Bool, Never>.any([Property(value: true), Property(value: false)]).first() == .success(true))
    }
}

@Suite("logEvents")
struct LogEventsTests {
    @Test func signalEventsAreLoggedWithTheirIdentifier() {
        let lines = Box<[String]>([])
        let (signal, input) = Signal<Int, TestError>.pipe()
        signal.logEvents(identifier: "id", events: [.value, .failed, .terminated]) { identifier, event, _, _, line in
            lines.modify { $0.append("\(identifier) \(event) \(line > 0)") }
        }.observe { _ in }
        input.send(value: 1)
        input.send(error: TestError(code: 2))
        #expect(lines.value == ["id value 1 true", "id failed TestError(code: 2) true", "id terminated true"])
    }

    @Test func producerEventsIncludeStartingAndStarted() {
        let lines = Box<[String]>([])
        SignalProducer<Int, Never>(value: 5).logEvents(identifier: "p") { _, event, _, _, _ in
            lines.modify { $0.append(event) }
        }.start()
        #expect(lines.value == ["starting", "value 5", "completed", "terminated", "disposed", "started"])
        #expect(Set(LoggingEvent.Signal.allCases).count == 6)
        #expect(LoggingEvent.SignalProducer(rawValue: "starting") == .starting)
    }
}

@Suite("unserialized names and sequence flattening")
struct UnserializedTests {
    @Test func unserializedVariantsBehaveLikeTheSerializedOnes() {
        let (signal, input) = Signal<Int, Never>.unserializedPipe()
        let (reentrant, reentrantInput) = Signal<Int, Never>.reentrantUnserializedPipe()
        let recorder = Recorder<Int, Never>()
        signal.observe(recorder.observer)
        reentrant.observeValues { if $0 == 1 { reentrantInput.send(value: 2) } }
        reentrant.observe(recorder.observer)
        input.send(value: 0)
        reentrantInput.send(value: 1)
        #expect(recorder.values == [0, 1, 2])
        let generated = Recorder<Int, Never>()
        Signal<Int, Never>.unserialized { observer, _ in observer.send(value: 3) }.observe(generated.observer)
        Signal<Int, Never>.reentrantUnserialized { observer, _ in observer.sendCompleted() }.observe(generated.observer)
        SignalProducer<Int, Never>.unserialized { observer, _ in observer.send(value: 4) }.start(generated.observer)
        #expect(generated.values == [4])
    }

    @Test func flattenSendsTheElementsOfSequenceValues() {
        let recorder = Recorder<Int, Never>()
        SignalProducer<[Int], Never>([[1, 2], [], [3]]).flatten().start(recorder.observer)
        #expect(recorder.events == [.value(1), .value(2), .value(3), .completed])
        let (signal, input) = Signal<[Int], Never>.pipe()
        let viaSignal = Recorder<Int, Never>()
        signal.flatten().observe(viaSignal.observer)
        input.send(value: [4, 5])
        #expect(viaSignal.values == [4, 5])
    }

    /// Regression: the sampler's run started before the receiver's, so a sampler that fires at
    /// once found no value to sample.
    @Test func producerSampleStartsTheReceiverBeforeTheSampler() {
        let order = Box<[String]>([])
        let receiver = SignalProducer<Int, Never> { observer, _ in
            order.modify { $0.append("receiver") }
            observer.send(value: 1)
        }
        let sampler = SignalProducer<(), Never> { observer, _ in
            order.modify { $0.append("sampler") }
            observer.send(value: ())
        }
        let with = Recorder<Int, Never>()
        receiver.sample(with: sampler).map { $0.0 }.start(with.observer)
        #expect(order.value == ["receiver", "sampler"])
        #expect(with.values == [1])
        order.value = []
        let on = Recorder<Int, Never>()
        receiver.sample(on: sampler).start(on.observer)
        #expect(order.value == ["receiver", "sampler"])
        #expect(on.values == [1])
    }
}

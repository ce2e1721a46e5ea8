import Testing
@testable import ReactiveLoopCore

@Suite("Bindings")
struct BindingTests {
    final class Label: ReactiveExtensionsProvider {
        var text = ""
        var count: Int? = nil
    }

    @Test func bindingFromSignalProducerAndProperty() {
        let target = MutableProperty(0)
        let (signal, input) = Signal<Int, Never>.pipe()
        target <~ signal
        input.send(value: 1)
        #expect(target.value == 1)
        target <~ SignalProducer(value: 2)
        #expect(target.value == 2)
        let source = MutableProperty(3)
        target <~ source
        #expect(target.value == 3)
        source.value = 4
        #expect(target.value == 4)
    }

    @Test func bindingToAnOptionalTarget() {
        let target = MutableProperty<Int?>(nil)
        target <~ SignalProducer<Int, Never>(value: 5)
        #expect(target.value == 5)
        let none: MutableProperty<Int>? = nil
        #expect((none <~ SignalProducer<Int, Never>(value: 1)) == nil)
    }

    @Test func bindingEndsWithTheTargetsLifetime() {
        let (signal, input) = Signal<Int, Never>.pipe()
        var received: [Int] = []
        var token: Lifetime.Token? = Lifetime.Token()
        let target = BindingTarget<Int>(lifetime: Lifetime(token!)) { received.append($0) }
        target <~ signal
        input.send(value: 1)
        token = nil
        input.send(value: 2)
        #expect(received == [1])
        #expect((target <~ signal) == nil)
    }

    @Test func disposingTheBindingStopsIt() {
        let target = MutableProperty(0)
        let (signal, input) = Signal<Int, Never>.pipe()
        let disposable = target <~ signal
        disposable?.dispose()
        input.send(value: 1)
        #expect(target.value == 0)
    }

    @Test func keyPathTargetsWriteToTheObjectWithoutRetainingIt() {
        var label: Label? = Label()
        weak let weakLabel = label
        let (texts, input) = Signal<String, Never>.pipe()
        label!.reactive[\.text] <~ texts
        input.send(value: "hello")
        #expect(label?.text == "hello")
        label = nil
        #expect(weakLabel == nil)
        input.send(value: "ignored")
    }

    @Test func makeBindingTargetAndObjectKeyPathInit() {
        let label = Label()
        let target = label.reactive.makeBindingTarget { (label: Label, value: Int) in label.count = value * 2 }
        target <~ SignalProducer<Int, Never>(value: 4)
        #expect(label.count == 8)
        let (lifetime, token) = Lifetime.make()
        let keyPathTarget = BindingTarget(lifetime: lifetime, object: label, keyPath: \.text)
        _ = token
        keyPathTarget.action("direct")
        #expect(label.text == "direct")
        #expect(Label.reactive == Reactive<Label>.self)
    }

    @Test func bindingTargetOnAnotherScheduler() {
        final class Recording: Scheduler {
            var scheduled = 0
            func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
                scheduled += 1
                action()
                return nil
            }
        }
        let scheduler = Recording()
        var received: [Int] = []
        let target = BindingTarget<Int>(on: scheduler, lifetime: Lifetime.make().lifetime) { received.append($0) }
        target.action(1)
        #expect(scheduler.scheduled == 1)
        #expect(received == [1])
    }

    @Test func observerBinding() {
        let (signal, input) = Signal<Int, Never>.pipe()
        var received: [Int] = []
        signal.observeValues { received.append($0) }
        input <~ SignalProducer<Int, Never>([1, 2])
        #expect(received == [1, 2])
    }

    @Test func immediateSchedulerRunsAtOnce() {
        var ran = false
        #expect(ImmediateScheduler().schedule { ran = true } == nil)
        #expect(ran)
    }
}

import Testing
@testable import ReactiveLoop

@Suite("Property")
struct PropertyTests {
    @Test func constantProperty() {
        let property = Property(value: 3)
        #expect(property.value == 3)
        let recorder = Recorder<Int, Never>()
        property.producer.start(recorder.observer)
        #expect(recorder.events == [.value(3), .completed])
        let signal = Recorder<Int, Never>()
        property.signal.observe(signal.observer)
        #expect(signal.events == [.interrupted])
    }

    @Test func capturingAndWrappingFollowTheSource() {
        let source = MutableProperty(1)
        let captured = Property(capturing: source)
        let wrapped = Property(source)
        let recorder = Recorder<Int, Never>()
        wrapped.producer.start(recorder.observer)
        source.value = 2
        #expect(captured.value == 2)
        #expect(wrapped.value == 2)
        #expect(recorder.values == [1, 2])
    }

    @Test func initialThenTakesTheProducersValues() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let property = Property(initial: 0, then: signal)
        #expect(property.value == 0)
        let changes = Recorder<Int, Never>()
        property.signal.observe(changes.observer)
        input.send(value: 5)
        #expect(property.value == 5)
        #expect(changes.values == [5])
        let optional = Property<Int?>(initial: nil, then: SignalProducer<Int, Never>(value: 7))
        #expect(optional.value == 7)
        let optionalFromSignal = Property<Int?>(initial: nil, then: signal)
        input.send(value: 8)
        #expect(optionalFromSignal.value == 8)
    }

    @Test func propertyWrapperForms() {
        final class Model {
            @MutableProperty var count = 1
            @Property var fixed: String
            init() { _fixed = Property(value: "f") }
        }
        let model = Model()
        model.count = 2
        #expect(model.$count.value == 2)
        #expect(model.fixed == "f")
        #expect(model.$fixed.value == "f")
    }

    @Test func mapFormsAndSkipRepeats() {
        struct Box2 { var inner: Int }
        let source = MutableProperty(Box2(inner: 1))
        let mapped = source.map { $0.inner * 10 }
        let keyPath = source.map(\.inner)
        let constant = source.map(value: "c")
        let distinct = keyPath.skipRepeats()
        let changes = Recorder<Int, Never>()
        distinct.signal.observe(changes.observer)
        source.value = Box2(inner: 1)
        source.value = Box2(inner: 2)
        #expect(mapped.value == 20)
        #expect(keyPath.value == 2)
        #expect(constant.value == "c")
        #expect(changes.values == [2])
        let custom = source.skipRepeats { $0.inner % 2 == $1.inner % 2 }
        source.value = Box2(inner: 4)
        #expect(custom.value.inner == 2)
    }

    @Test func combineLatestAndZipWith() {
        let a = MutableProperty(1)
        let b = MutableProperty("x")
        let latest = a.combineLatest(with: b)
        let zipped = a.zip(with: b)
        a.value = 2
        #expect(latest.value == (2, "x"))
        #expect(zipped.value == (1, "x"))
        b.value = "y"
        #expect(latest.value == (2, "y"))
        #expect(zipped.value == (2, "y"))
    }

    @Test func staticAggregates() {
        let a = MutableProperty(1)
        let b = MutableProperty(2)
        let c = MutableProperty(3)
        let pair = Property.combineLatest(a, b)
        let triple = Property.combineLatest(a, b, c)
        let zipTriple = Property.zip(a, b, c)
        let array = Property<Int>.combineLatest([a, b, c])
        let none = Property<Int>.combineLatest([MutableProperty<Int>]())
        let sentinel = Property<Int>.zip([MutableProperty<Int>](), emptySentinel: [9])
        a.value = 10
        #expect(pair.value == (10, 2))
        #expect(triple.value == (10, 2, 3))
        #expect(zipTriple.value == (1, 2, 3))
        #expect(array?.value == [10, 2, 3])
        #expect(none == nil)
        #expect(sentinel.value == [9])
        let zippedArray = Property<Int>.zip([a, b])
        #expect(zippedArray?.value == [10, 2])
        #expect(Property<Int>.combineLatest([a], emptySentinel: []).value == [10])
    }

    @Test func flatMapLatestFollowsTheCurrentInnerProperty() {
        let first = MutableProperty(1)
        let second = MutableProperty(100)
        let selector = MutableProperty(true)
        let flattened = selector.flatMap(.latest) { $0 ? first : second }
        #expect(flattened.value == 1)
        first.value = 2
        #expect(flattened.value == 2)
        selector.value = false
        #expect(flattened.value == 100)
        first.value = 3
        #expect(flattened.value == 100)
        let nested = MutableProperty(Property(value: 5))
        #expect(nested.flatten(.latest).value == 5)
    }

    @Test func booleanOperators() {
        let a = MutableProperty(true)
        let b = MutableProperty(false)
        let not = a.negate()
        let and = a.and(b)
        let or = a.or(b)
        let all = Property.all([a, b])
        let any = Property.any(a, b)
        let allVariadic = Property.all(a, b)
        let anyCollection = Property.any([a, b])
        #expect(!not.value)
        #expect(!and.value)
        #expect(or.value)
        #expect(!all.value)
        #expect(any.value)
        #expect(!allVariadic.value)
        #expect(anyCollection.value)
        b.value = true
        #expect(and.value)
        #expect(all.value)
        a.value = false
        b.value = false
        #expect(!or.value)
        #expect(!any.value)
        #expect(not.value)
    }

    @Test func derivedPropertyKeepsItsSourceAliveAndReleasesItWithItself() {
        weak var weakSource: MutableProperty<Int>?
        var mapped: Property<Int>?
        do {
            let source = MutableProperty(1)
            weakSource = source
            mapped = source.map { $0 + 1 }
            source.value = 5
        }
        #expect(weakSource != nil)
        #expect(mapped?.value == 6)
        mapped = nil
        #expect(weakSource == nil)
    }
}

extension PropertyTests {
    /// Regression: a property derived from a temporary derived property stopped changing,
    /// because the temporary was released and its run disposed.
    @Test func propertyDerivedFromATemporaryDerivedPropertyKeepsChanging() {
        let source = MutableProperty(1)
        let twiceDerived = source.map { $0 + 1 }.map { $0 * 10 }
        source.value = 2
        #expect(twiceDerived.value == 30)
    }
}

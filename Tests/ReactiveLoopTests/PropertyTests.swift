import ReactiveLoopTestSupport
import Testing
@testable import ReactiveLoopCore

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

    @Test func derivedPropertyDoesNotRetainItsSourceAndCompletesWhenItGoesAway() {
        weak var weakSource: MutableProperty<Int>?
        let mapped: Property<Int>
        let completed = Box(false)
        do {
            let source = MutableProperty(1)
            weakSource = source
            mapped = source.map { $0 + 1 }
            mapped.producer.startWithCompleted { completed.value = true }
            source.value = 5
        }
        #expect(weakSource == nil)
        #expect(mapped.value == 6)
        #expect(completed.value)
    }

    @Test func capturingPropertyRetainsItsSource() {
        weak var weakSource: MutableProperty<Int>?
        var captured: Property<Int>?
        do {
            let source = MutableProperty(1)
            weakSource = source
            captured = Property(capturing: source)
        }
        #expect(weakSource != nil)
        #expect(captured?.value == 1)
        captured = nil
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

    /// Regression: `title <~ count.map { … }` stopped updating at once, because the derived
    /// property was released and its run disposed with it.
    @Test(arguments: DerivedKind.allCases)
    func bindingFromATemporaryDerivedPropertyKeepsUpdating(_ kind: DerivedKind) {
        let source = MutableProperty(1)
        let other = MutableProperty(10)
        let target = MutableProperty("")
        target <~ kind.derive(source, other)
        let first = target.value
        source.value = 2
        other.value = 20
        #expect(target.value != first, "\(kind): the binding stopped")
        #expect(target.value == kind.expected(2, 20), "\(kind)")
    }

    /// The producer of a derived property completes when its sources go away, and not before,
    /// although nothing holds the derived property itself.
    @Test(arguments: DerivedKind.allCases)
    func derivedProducerCompletesWhenTheSourcesAreReleased(_ kind: DerivedKind) {
        var source: MutableProperty<Int>? = MutableProperty(1)
        var other: MutableProperty<Int>? = MutableProperty(10)
        let recorder = Recorder<String, Never>()
        kind.derive(source!, other!).producer.start(recorder.observer)
        source!.value = 2
        #expect(recorder.terminal == nil, "\(kind)")
        source = nil
        other = nil
        #expect(recorder.terminal == .completed, "\(kind)")
    }

    /// A producer taken from a derived property keeps following the source after the property
    /// object is gone, until it is started and beyond.
    @Test func aHeldProducerOfAReleasedDerivedPropertyStillFollowsItsSource() {
        let source = MutableProperty(1)
        var derived: Property<Int>? = source.map { $0 * 10 }
        let producer = derived!.producer
        derived = nil
        source.value = 2
        let recorder = Recorder<Int, Never>()
        producer.start(recorder.observer)
        source.value = 3
        #expect(recorder.values == [20, 30])
        #expect(recorder.terminal == nil)
    }

    /// The run behind a derived property holds its storage strongly; releasing the property
    /// (with nothing observing it) still releases the storage and the value in it, while the
    /// source lives on.
    @Test func aReleasedDerivedPropertyReleasesItsLatestValue() {
        final class Payload {}
        let source = MutableProperty(1)
        weak var latest: Payload?
        var derived: Property<Payload>? = source.map { _ in Payload() }
        source.value = 2
        latest = derived?.value
        #expect(latest != nil)
        derived = nil
        #expect(latest == nil)
        source.value = 3
    }

    @Test func propertyFromAProducerStopsItWhenNothingHoldsOrObservesIt() {
        let ended = Box(false)
        let values = SignalProducer<Int, Never> { _, lifetime in lifetime.observeEnded { ended.value = true } }
        var property: Property<Int>? = Property(initial: 0, then: values)
        #expect(property?.value == 0)
        #expect(!ended.value)
        property = nil
        #expect(ended.value)
    }

    @Test func propertyFromAProducerKeepsItWhileItsSignalIsObserved() {
        let ended = Box(false)
        let input = Box<Signal<Int, Never>.Observer?>(nil)
        let values = SignalProducer<Int, Never> { observer, lifetime in
            input.value = observer
            lifetime.observeEnded { ended.value = true }
        }
        let recorder = Recorder<Int, Never>()
        let observation = Property(initial: 0, then: values).signal.observe(recorder.observer)
        input.value?.send(value: 3)
        #expect(recorder.values == [3])
        #expect(!ended.value)
        observation?.dispose()
        #expect(ended.value)
    }
}

/// Every way of deriving a property, for the lifetime tests.
enum DerivedKind: CaseIterable, Sendable {
    case map, combineLatest, zip, combinePrevious, skipRepeats, uniqueValues, flatMap, flatten
    case negate, and, or, initialThen, wrapping

    func derive(_ a: MutableProperty<Int>, _ b: MutableProperty<Int>) -> Property<String> {
        switch self {
        case .map: a.map { "\($0)" }
        case .combineLatest: a.combineLatest(with: b).map { "\($0)+\($1)" }
        case .zip: a.zip(with: b).map { "\($0)+\($1)" }
        case .combinePrevious: a.combinePrevious(0).map { "\($0.1)" }
        case .skipRepeats: a.skipRepeats().map { "\($0)" }
        case .uniqueValues: a.uniqueValues().map { "\($0)" }
        case .flatMap: a.flatMap(.latest) { _ in b }.map { "\($0)" }
        case .flatten: a.map { _ in b }.flatten(.latest).map { "\($0)" }
        case .negate: a.map { $0 > 1 }.negate().map { "\($0)" }
        case .and: a.map { $0 > 1 }.and(b.map { $0 > 10 }).map { "\($0)" }
        case .or: a.map { $0 > 1 }.or(b.map { $0 > 100 }).map { "\($0)" }
        case .initialThen: Property(initial: a.value, then: a.producer).map { "\($0)" }
        case .wrapping: Property(a).map { "\($0)" }
        }
    }

    /// The derived value once `a` is `x` and `b` is `y`.
    func expected(_ x: Int, _ y: Int) -> String {
        switch self {
        case .map, .combinePrevious, .skipRepeats, .uniqueValues, .initialThen, .wrapping: "\(x)"
        case .combineLatest, .zip: "\(x)+\(y)"
        case .flatMap, .flatten: "\(y)"
        case .negate: "\(!(x > 1))"
        case .and: "\(x > 1 && y > 10)"
        case .or: "\(x > 1 || y > 100)"
        }
    }
}

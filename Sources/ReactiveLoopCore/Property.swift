/// A value that changes over time, and the streams of its changes.
///
/// - Note: `producer` sends the current value, then every change; `signal` sends changes only.
///   Both complete when the property goes away.
public protocol PropertyProtocol<Value>: AnyObject, BindingSource {
    /// The current value.
    var value: Value { get }
    /// The current value, then every change; completes when the property goes away.
    var producer: SignalProducer<Value, Never> { get }
    /// Every change from now on; completes when the property goes away.
    var signal: Signal<Value, Never> { get }
}

/// A property whose value can be set.
public protocol MutablePropertyProtocol<Value>: PropertyProtocol, BindingTargetProvider {
    /// The current value; setting it sends the new value to observers.
    var value: Value { get set }
    /// Ends when the property goes away.
    var lifetime: Lifetime { get }
}

extension MutablePropertyProtocol {
    /// A binding target that sets `value`, bound to the property's lifetime.
    @inlinable
    public var bindingTarget: BindingTarget<Value> {
        BindingTarget(lifetime: lifetime) { [weak self] value in self?.value = value }
    }
}

/// A mutable property whose value can be read and changed atomically.
public protocol ComposableMutablePropertyProtocol<Value>: MutablePropertyProtocol {
    /// Runs `action` with the current value while no change can happen.
    func withValue<Result>(_ action: (Value) throws -> Result) rethrows -> Result
    /// Changes the value in place, atomically, then sends the new value.
    func modify<Result>(_ action: (inout Value) throws -> Result) rethrows -> Result
}

/// A read-only property: a constant, a view of another property, or the latest value of a
/// producer.
///
/// A property derived from others (`map`, `combineLatest`, `Property(initial:then:)`,
/// `Property(_:)` …) does not keep its sources alive, as in ReactiveSwift: it keeps their
/// latest value. Its `signal` and `producer` live as long as its ultimate sources, not as long
/// as the derived `Property` object, so a binding from a temporary derived property keeps
/// updating; they complete when the sources go away. When nothing holds or observes the
/// derived property or its streams any more, it stops observing its sources.
/// `Property(capturing:)` is the one form that keeps its source alive.
@propertyWrapper
public final class Property<Value>: PropertyProtocol {
    @usableFromInline let _value: () -> Value
    /// The current value, then every change; completes when the property's sources go away.
    public let producer: SignalProducer<Value, Never>
    /// Every change from now on; completes when the property's sources go away.
    public let signal: Signal<Value, Never>
    /// What this property keeps alive: the captured property, or the derived value's storage.
    @usableFromInline let retained: AnyObject?

    /// The current value.
    public var value: Value { _value() }

    /// The current value (property-wrapper form).
    public var wrappedValue: Value { value }

    /// The property itself (property-wrapper form: `$name`).
    public var projectedValue: Property<Value> { self }

    /// A property that never changes.
    public init(value: Value) {
        _value = { value }
        producer = SignalProducer(value: value)
        signal = .empty
        retained = nil
    }

    /// A view of `property` that keeps it alive: its streams complete only when this view and
    /// every other owner of `property` are gone.
    public init<P: PropertyProtocol>(capturing property: P) where P.Value == Value {
        _value = { property.value }
        producer = property.producer
        signal = property.signal
        retained = property
    }

    /// A read-only view of `property` that does not keep it alive: it holds `property`'s
    /// latest value, and its streams complete when `property` goes away.
    @inlinable
    public convenience init<P: PropertyProtocol>(_ property: P) where P.Value == Value {
        self.init(_unsafeProducer: property.producer)
    }

    /// A property that starts at `initial` and then takes each value of `values`, which runs
    /// until it terminates or nothing holds or observes the property any more.
    @inlinable
    public convenience init(initial: Value, then values: SignalProducer<Value, Never>) {
        self.init(_unsafeProducer: values.prefix(value: initial))
    }

    /// A property that starts at `initial` and then takes each value of `values`.
    public convenience init<Values: SignalProducerConvertible>(initial: Value, then values: Values)
    where Values.Value == Value, Values.Error == Never {
        self.init(initial: initial, then: values.producer)
    }

    /// A read-only view of `storage`, which its owner changes and completes.
    @usableFromInline
    init(_storage storage: _PropertyStorage<Value>) {
        let signal = Signal(source: .core(storage.core))
        _value = { storage.value }
        producer = storage.producer(keeping: signal)
        self.signal = signal
        retained = storage
    }

    /// A property holding the latest value of `producer`, which must send a value as soon as it
    /// starts.
    ///
    /// Ownership: the run of `producer` holds the storage (value and signal core) strongly; the
    /// property, its signal and any producer made from it hold the signal handle. The core's
    /// resources are the run: when no handle is left and the core has no observer, the core
    /// ends and disposes the run, which releases the storage. A change from the source is one
    /// plain store and delivery, with no weak reference to load.
    ///
    /// Inlinable, so that the run and the storage specialize for the value's type in the
    /// caller: a change then costs no generic metadata look-up.
    @inlinable
    init(_unsafeProducer producer: SignalProducer<Value, Never>) {
        let core = _SignalCore<Value, Never>()
        let run = SerialDisposable()
        core.setResources(run)
        let link = _DerivedStorageLink<Value>()
        run.inner = producer.start { event in
            switch event {
            case let .value(value):
                if let storage = link.storage {
                    storage.set(value)
                } else {
                    link.storage = _PropertyStorage.make(value, core: core)
                }
            case .completed, .interrupted:
                core.send(.completed)
            }
        }
        guard let storage = link.storage else {
            _argumentFailure(
                "Property(initial:then:) and derived properties: the producer must send a value as soon as it starts")
        }
        let signal = Signal(source: .core(core))
        _value = { storage.value }
        self.producer = storage.producer(keeping: signal)
        self.signal = signal
        self.retained = storage
    }
}

/// How the run behind a derived property reaches its storage.
@usableFromInline
final class _DerivedStorageLink<Value>: @unchecked Sendable {
    // Written by the run's first value, which arrives during `start` on the initializer's
    // thread, before the initializer reads it; then read only by the run's deliveries, which
    // are serial.
    @usableFromInline var storage: _PropertyStorage<Value>?

    @usableFromInline init() {}
}

extension Property where Value: OptionalProtocol {
    /// A property that starts at `initial` and then takes each value of `values`.
    public convenience init(initial: Value, then values: SignalProducer<Value.Wrapped, Never>) {
        self.init(initial: initial, then: values.map(Value.init(reconstructing:)))
    }

    /// A property that starts at `initial` and then takes each value of `values`.
    public convenience init<Values: SignalProducerConvertible>(initial: Value, then values: Values)
    where Values.Value == Value.Wrapped, Values.Error == Never {
        self.init(initial: initial, then: values.producer)
    }
}

extension Property: @unchecked Sendable {}  // Immutable; the storage is thread safe.

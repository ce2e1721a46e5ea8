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
@propertyWrapper
public final class Property<Value>: PropertyProtocol {
    private let _value: () -> Value
    /// The current value, then every change; completes when the property's source goes away.
    public let producer: SignalProducer<Value, Never>
    /// Every change from now on; completes when the property's source goes away.
    public let signal: Signal<Value, Never>
    /// Keeps what this property was derived from running while it lives.
    private let disposable: (any Disposable)?
    /// The properties this one was derived from: a derived property keeps them alive.
    private let sources: [AnyObject]

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
        disposable = nil
        sources = []
    }

    /// A view of `property` that keeps it alive.
    public init<P: PropertyProtocol>(capturing property: P) where P.Value == Value {
        _value = { property.value }
        producer = property.producer
        signal = property.signal
        disposable = nil
        sources = [property]
    }

    /// A read-only view of `property`.
    public convenience init<P: PropertyProtocol>(_ property: P) where P.Value == Value {
        self.init(capturing: property)
    }

    /// A property that starts at `initial` and then takes each value of `values`.
    public convenience init(initial: Value, then values: SignalProducer<Value, Never>) {
        self.init(_unsafeProducer: values.prefix(value: initial), sources: [])
    }

    /// A property that starts at `initial` and then takes each value of `values`.
    public convenience init<Values: SignalProducerConvertible>(initial: Value, then values: Values)
    where Values.Value == Value, Values.Error == Never {
        self.init(initial: initial, then: values.producer)
    }

    /// A property holding the latest value of `producer`, which must send a value as soon as it
    /// starts. The producer runs until the property goes away; `sources` are kept alive with it.
    init(_unsafeProducer producer: SignalProducer<Value, Never>, sources: [AnyObject]) {
        var storage: _PropertyStorage<Value>?
        let disposable = producer.start { event in
            switch event {
            case let .value(value):
                if let storage { storage.set(value) } else { storage = _PropertyStorage(value) }
            case .completed, .interrupted:
                storage?.complete()
            }
        }
        guard let storage else {
            preconditionFailure(
                "Property(initial:then:) and derived properties: the producer must send a value as soon as it starts")
        }
        _value = { storage.value }
        self.producer = storage.producer
        self.signal = storage.signal
        self.disposable = disposable
        self.sources = sources
    }

    deinit { disposable?.dispose() }
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

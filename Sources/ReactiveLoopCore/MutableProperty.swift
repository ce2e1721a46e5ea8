import Synchronization

/// A property whose value can be set from any thread.
///
/// Every change is delivered to observers in the order the changes were made. Setting the
/// value from inside one of its own observers does not deadlock: the new value is stored at
/// once (reading `value` there returns it) and delivered right after the current delivery.
/// When the property goes away, `signal` and `producer` complete and `lifetime` ends.
@propertyWrapper
public final class MutableProperty<Value>: ComposableMutablePropertyProtocol {
    @usableFromInline let storage: _PropertyStorage<Value>

    /// Ends when the property goes away. The same object on every read.
    public var lifetime: Lifetime {
        if let made = madeLifetime.load() { return made }
        return madeLifetime.storeIfNil(Lifetime(_target: nil))
    }
    /// The lifetime, made on first read: a property nobody asks it of has none to keep.
    private let madeLifetime = AtomicLazyReference<Lifetime>()

    /// Every change from now on; completes when the property goes away.
    public let signal: Signal<Value, Never>

    /// The current value, then every change; completes when the property goes away.
    @inlinable
    public var producer: SignalProducer<Value, Never> { storage.producer(keeping: signal) }

    /// The current value. Setting it delivers the new value to every observer before returning
    /// (or, from inside a delivery, right after that delivery).
    @inlinable
    public var value: Value {
        get { storage.value }
        set { storage.set(newValue) }
    }

    /// The current value (property-wrapper form).
    public var wrappedValue: Value {
        get { value }
        set { value = newValue }
    }

    /// The property itself (property-wrapper form: `$name`).
    public var projectedValue: MutableProperty<Value> { self }

    /// A binding target that sets `value`, bound to the property's lifetime.
    ///
    /// It holds the property's storage rather than a weak reference to the property: a bound
    /// value costs no weak load, and the binding still ends when the property goes away.
    @inlinable
    public var bindingTarget: BindingTarget<Value> {
        BindingTarget(lifetime: lifetime) { [storage] value in storage.set(value) }
    }

    /// Creates a property with `initialValue`.
    public init(_ initialValue: Value) {
        storage = _PropertyStorage.make(initialValue)
        signal = Signal(source: .core(storage.core))
    }

    /// Creates a property with `wrappedValue` (property-wrapper form).
    public convenience init(wrappedValue: Value) {
        self.init(wrappedValue)
    }

    /// Completes `signal` and `producer` (even while a producer made from this property is
    /// still held), then ends `lifetime`.
    deinit {
        storage.complete()
        madeLifetime.load()?._end()
    }

    /// Sets a new value and returns the old one, atomically.
    @discardableResult
    @inlinable
    public func swap(_ newValue: Value) -> Value {
        storage.swap(newValue)
    }

    /// Changes the value in place, atomically, then delivers the new value.
    ///
    /// - Note: Do not set or modify this same property from inside `action`; use its result.
    @discardableResult
    @inlinable
    public func modify<Result>(_ action: (inout Value) throws -> Result) rethrows -> Result {
        try storage.modify(action)
    }

    /// Runs `action` with the current value while no change can be delivered.
    @discardableResult
    @inlinable
    public func withValue<Result>(_ action: (Value) throws -> Result) rethrows -> Result {
        try storage.withValue(action)
    }
}

extension MutableProperty: @unchecked Sendable {}  // The storage is thread safe.

// Operators on properties: each makes a new read-only Property from the source's producer.
// A derived property does not keep its sources alive; its streams live as long as the sources
// (see `Property`).

extension PropertyProtocol {
    /// A property whose value is `transform` applied to this property's value.
    @inlinable
    public func map<U>(_ transform: @escaping (Value) -> U) -> Property<U> {
        Property(_unsafeProducer: producer.map(transform))
    }

    /// A property that is always `value` but changes whenever this one does.
    @inlinable
    public func map<U>(value: U) -> Property<U> {
        map { _ in value }
    }

    /// A property whose value is the property at `keyPath` of this property's value.
    @inlinable
    public func map<U>(_ keyPath: KeyPath<Value, U>) -> Property<U> {
        map { $0[keyPath: keyPath] }
    }

    /// A property holding the newest value of this one and of `other`.
    @inlinable
    public func combineLatest<P: PropertyProtocol>(with other: P) -> Property<(Value, P.Value)> {
        Property(_unsafeProducer: producer.combineLatest(with: other.producer))
    }

    /// A property holding pairs of this one's and `other`'s values, paired in order of change.
    @inlinable
    public func zip<P: PropertyProtocol>(with other: P) -> Property<(Value, P.Value)> {
        Property(_unsafeProducer: producer.zip(with: other.producer))
    }

    /// A property that ignores changes `isEquivalent` finds equivalent to its current value.
    @inlinable
    public func skipRepeats(_ isEquivalent: @escaping (Value, Value) -> Bool) -> Property<Value> {
        Property(_unsafeProducer: producer.skipRepeats(isEquivalent))
    }

    /// A property holding the value of the property `transform` makes from this one's value,
    /// switching between them with `strategy`.
    @inlinable
    public func flatMap<P: PropertyProtocol>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> P
    ) -> Property<P.Value> {
        Property(_unsafeProducer: producer.flatMap(strategy) { transform($0).producer })
    }

    /// combineLatest over any number of properties, or `nil` if there are none.
    @inlinable
    public static func combineLatest<S: Sequence>(_ properties: S) -> Property<[S.Element.Value]>?
    where S.Element: PropertyProtocol {
        let properties = Array(properties)
        guard !properties.isEmpty else { return nil }
        return Property(_unsafeProducer: SignalProducer.combineLatest(properties.map(\.producer)))
    }

    /// combineLatest over any number of properties; `emptySentinel` if there are none.
    @inlinable
    public static func combineLatest<S: Sequence>(
        _ properties: S, emptySentinel: [S.Element.Value]
    ) -> Property<[S.Element.Value]> where S.Element: PropertyProtocol {
        combineLatest(properties) ?? Property(value: emptySentinel)
    }

    /// zip over any number of properties, or `nil` if there are none.
    @inlinable
    public static func zip<S: Sequence>(_ properties: S) -> Property<[S.Element.Value]>?
    where S.Element: PropertyProtocol {
        let properties = Array(properties)
        guard !properties.isEmpty else { return nil }
        return Property(_unsafeProducer: SignalProducer.zip(properties.map(\.producer)))
    }

    /// zip over any number of properties; `emptySentinel` if there are none.
    @inlinable
    public static func zip<S: Sequence>(
        _ properties: S, emptySentinel: [S.Element.Value]
    ) -> Property<[S.Element.Value]> where S.Element: PropertyProtocol {
        zip(properties) ?? Property(value: emptySentinel)
    }
}

extension PropertyProtocol where Value: Equatable {
    /// A property that ignores changes equal to its current value.
    @inlinable
    public func skipRepeats() -> Property<Value> {
        skipRepeats(==)
    }
}

extension PropertyProtocol where Value: PropertyProtocol {
    /// A property holding the value of the property this one holds, switching with `strategy`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> Property<Value.Value> {
        flatMap(strategy) { $0 }
    }
}

extension PropertyProtocol where Value == Bool {
    /// A property holding the opposite of this one's value.
    @inlinable
    public func negate() -> Property<Value> {
        map(!)
    }

    /// A property that is `true` when this one and `property` both are.
    @inlinable
    public func and<P: PropertyProtocol>(_ property: P) -> Property<Value> where P.Value == Bool {
        Property(_unsafeProducer: producer.combineLatest(with: property.producer).map { $0 && $1 })
    }

    /// A property that is `true` when this one or `property` is.
    @inlinable
    public func or<P: PropertyProtocol>(_ property: P) -> Property<Value> where P.Value == Bool {
        Property(_unsafeProducer: producer.combineLatest(with: property.producer).map { $0 || $1 })
    }

    /// A property that is `true` when every one of `properties` is (`true` when empty).
    @inlinable
    public static func all<P: PropertyProtocol, Properties: Collection>(_ properties: Properties) -> Property<Value>
    where P.Value == Bool, Properties.Element == P {
        combineLatest(properties, emptySentinel: []).map { $0.allSatisfy { $0 } }
    }

    /// A property that is `true` when every one of `properties` is.
    @inlinable
    public static func all<P: PropertyProtocol>(_ properties: P...) -> Property<Value> where P.Value == Bool {
        all(properties)
    }

    /// A property that is `true` when any of `properties` is (`false` when empty).
    @inlinable
    public static func any<P: PropertyProtocol, Properties: Collection>(_ properties: Properties) -> Property<Value>
    where P.Value == Bool, Properties.Element == P {
        combineLatest(properties, emptySentinel: []).map { $0.contains(true) }
    }

    /// A property that is `true` when any of `properties` is.
    @inlinable
    public static func any<P: PropertyProtocol>(_ properties: P...) -> Property<Value> where P.Value == Bool {
        any(properties)
    }
}

extension PropertyProtocol {
    /// A property that takes a value from this one only if it satisfies `predicate`; starts
    /// with `initial` if the current value does not.
    @inlinable
    public func filter(initial: Value, _ predicate: @escaping (Value) -> Bool) -> Property<Value> {
        Property(_unsafeProducer: producer.filter(predicate).prefix(value: initial))
    }
}

import Synchronization

/// A mutable property that validates each proposed value before committing it
/// (ReactiveSwift's `ValidatingProperty`).
///
/// Setting `value` runs the validator on the proposed value: a valid value is committed to the
/// inner property, a coerced one commits the validator's replacement, an invalid one commits
/// nothing. `result` holds the outcome of the latest proposal, or of the latest change made to
/// the inner property directly (which is validated too, but never rewritten). `value`,
/// `producer`, `signal` and `lifetime` are the inner property's.
///
/// With a dependency (`with: other`), a change of `other` revalidates the last proposed value.
///
/// - Note: Validation and commit happen while holding the inner property's delivery
///   ownership, so no other change can come in between.
public final class ValidatingProperty<Value, ValidationError: Swift.Error>: MutablePropertyProtocol {
    private let getter: () -> Value
    private let setter: (Value) -> Void

    /// The outcome of the latest validation.
    public let result: Property<Result>

    /// The inner property's value; setting it proposes a value for validation.
    public var value: Value {
        get { getter() }
        set { setter(newValue) }
    }

    /// The inner property's current value, then every committed change.
    public let producer: SignalProducer<Value, Never>

    /// Every committed change of the inner property.
    public let signal: Signal<Value, Never>

    /// The inner property's lifetime.
    public let lifetime: Lifetime

    /// A validating view of `inner`, which it keeps alive. `inner`'s current value is validated
    /// at once (it need not be valid) and so is every later change made to `inner` directly.
    public init<Inner: ComposableMutablePropertyProtocol>(
        _ inner: Inner, _ validator: @escaping (Value) -> Decision
    ) where Inner.Value == Value {
        getter = { inner.value }
        producer = inner.producer
        signal = inner.signal
        lifetime = inner.lifetime
        let results = MutableProperty(inner.withValue { Result($0, validator($0)) })
        result = Property(capturing: results)
        // The thread that is committing a validated value: its own commit is not revalidated
        // (a coerced replacement would otherwise turn into a valid result).
        let committing = Synchronization.Atomic<UInt>(0)
        inner.signal.take(during: results.lifetime).observeValues { value in
            guard committing.load(ordering: .acquiring) != _currentThreadID() else { return }
            results.value = Result(value, validator(value))
        }
        setter = { proposed in
            // Raised until `withValue` returns: the commit made inside it is delivered when
            // `withValue` gives the inner property's delivery ownership back, on this thread.
            committing.store(_currentThreadID(), ordering: .releasing)
            defer { committing.store(0, ordering: .releasing) }
            inner.withValue { _ in
                let outcome = Result(proposed, validator(proposed))
                results.value = outcome
                if let committed = outcome.value { inner.value = committed }
            }
        }
    }

    /// A validating property starting at `initial`, which need not be valid.
    public convenience init(_ initial: Value, _ validator: @escaping (Value) -> Decision) {
        self.init(MutableProperty(initial), validator)
    }

    /// A validating view of `inner` whose validator also reads `other`'s value; a change of
    /// `other` revalidates the last proposed value. `other` is not kept alive.
    public convenience init<Other: PropertyProtocol>(
        _ inner: MutableProperty<Value>, with other: Other, _ validator: @escaping (Value, Other.Value) -> Decision
    ) {
        let other = Property(other)
        self.init(inner) { validator($0, other.value) }
        revalidate(on: other.signal.map { _ in () })
    }

    /// A validating property starting at `initial`, whose validator also reads `other`'s value.
    public convenience init<Other: PropertyProtocol>(
        _ initial: Value, with other: Other, _ validator: @escaping (Value, Other.Value) -> Decision
    ) {
        self.init(MutableProperty(initial), with: other, validator)
    }

    /// A validating property starting at `initial`, whose validator also reads the last value
    /// proposed to `other`, whether or not it was valid; it revalidates when `other` does.
    public convenience init<U, E>(
        _ initial: Value, with other: ValidatingProperty<U, E>, _ validator: @escaping (Value, U) -> Decision
    ) {
        self.init(MutableProperty(initial), with: other, validator)
    }

    /// A validating view of `inner`, whose validator also reads the last value proposed to
    /// `other`, whether or not it was valid; it revalidates when `other` does. Only `other`'s
    /// `result` is kept alive.
    public convenience init<U, E>(
        _ inner: MutableProperty<Value>, with other: ValidatingProperty<U, E>,
        _ validator: @escaping (Value, U) -> Decision
    ) {
        let otherResult = other.result
        self.init(inner) { validator($0, otherResult.value.proposed) }
        revalidate(on: otherResult.signal.map { _ in () })
    }

    /// Proposes the last proposed value again whenever `trigger` fires, while this property lives.
    private func revalidate(on trigger: Signal<(), Never>) {
        trigger.take(during: lifetime).observeValues { [weak self] in
            guard let self else { return }
            self.value = self.result.value.proposed
        }
    }

    /// What a validator decides about a proposed value.
    public enum Decision {
        /// The proposed value is valid.
        case valid
        /// The proposed value is invalid, but the validator offers a valid replacement, with an
        /// optional error to show.
        case coerced(Value, ValidationError?)
        /// The proposed value is invalid.
        case invalid(ValidationError)
    }

    /// The outcome of a validation.
    public enum Result {
        /// The proposed value is valid and was committed.
        case valid(Value)
        /// The proposed value was replaced by a valid one, which was committed.
        case coerced(replacement: Value, proposed: Value, error: ValidationError?)
        /// The proposed value is invalid; nothing was committed.
        case invalid(Value, ValidationError)

        init(_ proposed: Value, _ decision: Decision) {
            switch decision {
            case .valid: self = .valid(proposed)
            case let .coerced(replacement, error):
                self = .coerced(replacement: replacement, proposed: proposed, error: error)
            case let .invalid(error): self = .invalid(proposed, error)
            }
        }

        /// Whether the proposed value was rejected.
        public var isInvalid: Bool {
            if case .invalid = self { return true }
            return false
        }

        /// The committed value: the proposed one if valid, the replacement if coerced, `nil` if
        /// invalid.
        public var value: Value? {
            switch self {
            case let .valid(value): value
            case let .coerced(replacement, _, _): replacement
            case .invalid: nil
            }
        }

        /// The validation error, if any (a coerced result may carry one).
        public var error: ValidationError? {
            switch self {
            case .valid: nil
            case let .coerced(_, _, error): error
            case let .invalid(_, error): error
            }
        }

        /// The value that was proposed, valid or not.
        var proposed: Value {
            switch self {
            case let .valid(value): value
            case let .coerced(_, proposed, _): proposed
            case let .invalid(value, _): value
            }
        }
    }
}

extension ValidatingProperty: @unchecked Sendable {}  // Immutable; the inner and result properties are thread safe.

precedencegroup BindingPrecedence {
    associativity: right
    higherThan: AssignmentPrecedence
}

/// Binds a source to a target: `target <~ source` sends every value of the source to the
/// target until the source terminates or the target's lifetime ends.
infix operator <~ : BindingPrecedence

/// A source of values for `<~`: a stream that cannot fail.
public protocol BindingSource<Value>: SignalProducerConvertible where Error == Never {}

extension Signal: BindingSource where Error == Never {}
extension SignalProducer: BindingSource where Error == Never {}

/// Something that can be the target of `<~`.
public protocol BindingTargetProvider<Value> {
    /// The type of values the target accepts.
    associatedtype Value
    /// The target that bindings deliver to.
    var bindingTarget: BindingTarget<Value> { get }
}

extension BindingTargetProvider {
    /// Sends every value of `source` to the target until `source` terminates or the target's
    /// lifetime ends.
    ///
    /// - Returns: A disposable that ends the binding, or `nil` if the target's lifetime has
    ///   already ended.
    @discardableResult
    @inlinable
    public static func <~ <Source: BindingSource>(provider: Self, source: Source) -> (any Disposable)?
    where Source.Value == Value {
        let target = provider.bindingTarget
        guard !target.lifetime.hasEnded else { return nil }
        let disposable = source.producer
            .take(during: target.lifetime)
            .startWithValues(target.action)
        return disposable
    }

    /// Binds a source of non-optional values to a target of optional values.
    @discardableResult
    @inlinable
    public static func <~ <Source: BindingSource>(provider: Self, source: Source) -> (any Disposable)?
    where Value == Source.Value? {
        provider <~ source.producer.map(Optional.some)
    }
}

/// Where a binding delivers its values, and how long it accepts them.
public struct BindingTarget<Value>: BindingTargetProvider {
    /// When this lifetime ends, every binding to the target ends.
    public let lifetime: Lifetime
    /// Receives each bound value.
    public let action: (Value) -> Void

    /// The target itself.
    public var bindingTarget: BindingTarget<Value> { self }

    /// Creates a target that runs `action` with each value on `scheduler`, for as long as
    /// `lifetime` lasts.
    public init(
        on scheduler: any Scheduler = ImmediateScheduler(), lifetime: Lifetime, action: @escaping (Value) -> Void
    ) {
        self.lifetime = lifetime
        if scheduler is ImmediateScheduler {
            self.action = action
        } else {
            self.action = { value in scheduler.schedule { action(value) } }
        }
    }

    /// Creates a target that writes each value to `object[keyPath:]` on `scheduler`, for as long
    /// as `lifetime` lasts. The object is not retained.
    @inlinable
    public init<Object: AnyObject>(
        on scheduler: any Scheduler = ImmediateScheduler(), lifetime: Lifetime, object: Object,
        keyPath: ReferenceWritableKeyPath<Object, Value>
    ) {
        self.init(on: scheduler, lifetime: lifetime) { [weak object] value in object?[keyPath: keyPath] = value }
    }
}

extension BindingTarget: @unchecked Sendable {}  // Immutable; thread safety is the action's contract.

extension Optional: BindingTargetProvider where Wrapped: BindingTargetProvider {
    /// The type of values the wrapped target accepts.
    public typealias Value = Wrapped.Value

    /// The wrapped target, or one that ignores values (with an ended lifetime) for `nil`.
    public var bindingTarget: BindingTarget<Wrapped.Value> {
        switch self {
        case let .some(wrapped): return wrapped.bindingTarget
        case .none: return BindingTarget(lifetime: .empty) { _ in }
        }
    }
}

extension Signal.Observer {
    /// Sends every value of `source` to `observer` until `source` terminates.
    @discardableResult
    @inlinable
    public static func <~ <Source: BindingSource>(
        observer: Signal<Value, Error>.Observer, source: Source
    ) -> any Disposable where Source.Value == Value {
        source.producer.startWithValues { observer.send(value: $0) }
    }
}

/// A namespace for reactive extensions of a type: `object.reactive.something`.
public struct Reactive<Base> {
    /// The extended value.
    public let base: Base

    /// Wraps `base` to reach its reactive extensions.
    public init(_ base: Base) {
        self.base = base
    }
}

/// A type that offers reactive extensions through `.reactive`.
public protocol ReactiveExtensionsProvider {}

extension ReactiveExtensionsProvider {
    /// The reactive extensions of this value.
    public var reactive: Reactive<Self> { Reactive(self) }

    /// The reactive extensions of this type.
    public static var reactive: Reactive<Self>.Type { Reactive<Self>.self }
}

extension Reactive where Base: AnyObject {
    /// A binding target that calls `action` with the object and each value, on `scheduler`.
    ///
    /// The object is not retained. Linux has no associated objects to attach a lifetime to an
    /// arbitrary object, so the target's lifetime ends at the first value that arrives after
    /// the object is gone; until then the binding costs only its subscription.
    public func makeBindingTarget<U>(
        on scheduler: any Scheduler = ImmediateScheduler(), _ action: @escaping (Base, U) -> Void
    ) -> BindingTarget<U> {
        let (lifetime, token) = Lifetime.make()
        return BindingTarget(on: scheduler, lifetime: lifetime) { [weak base] value in
            guard let base else { return token.dispose() }
            action(base, value)
        }
    }

    /// A binding target that writes each value to the object's property at `keyPath`:
    /// `label.reactive[\.text] <~ texts`. This replaces the UIKit targets on Linux.
    public subscript<Value>(keyPath: ReferenceWritableKeyPath<Base, Value>) -> BindingTarget<Value> {
        makeBindingTarget { base, value in base[keyPath: keyPath] = value }
    }
}

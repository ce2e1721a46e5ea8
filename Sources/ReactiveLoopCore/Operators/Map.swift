// Stateless value operators: map, mapError, filter, compactMap, skipNil.
//
// Each is one adapter (downstream observer -> upstream observer). On a Signal the adapter makes
// a view, so a chain of these costs one closure call per hop and no signal; on a producer it is
// applied per run, between the run's source core and the observer. All of them also give the
// upstream observer a value shortcut (`Observer.valueAction`): a value goes through a chain of
// them as a plain argument, never wrapped in an event and switched on.

@usableFromInline
enum _Stateless {
    @inlinable
    static func map<V, U, E>(_ transform: @escaping (V) -> U) -> (Signal<U, E>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            let forward = downstream.valueSink
            return Signal<V, E>.Observer(
                { event in downstream.action(event.map(transform)) },
                values: { value in forward(transform(value)) })
        }
    }

    @inlinable
    static func filter<V, E>(_ isIncluded: @escaping (V) -> Bool) -> (Signal<V, E>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            let forward = downstream.valueSink
            return Signal<V, E>.Observer(
                { event in
                    if case let .value(value) = event, !isIncluded(value) { return }
                    downstream.action(event)
                },
                values: { value in if isIncluded(value) { forward(value) } })
        }
    }

    @inlinable
    static func compactMap<V, U, E>(_ transform: @escaping (V) -> U?) -> (Signal<U, E>.Observer) ->
        Signal<V, E>.Observer
    {
        { downstream in
            let forward = downstream.valueSink
            return Signal<V, E>.Observer(
                { event in
                    switch event {
                    case let .value(value): if let mapped = transform(value) { downstream.action(.value(mapped)) }
                    case let .failed(error): downstream.action(.failed(error))
                    case .completed: downstream.action(.completed)
                    case .interrupted: downstream.action(.interrupted)
                    }
                },
                values: { value in if let mapped = transform(value) { forward(mapped) } })
        }
    }

    @inlinable
    static func mapError<V, E, F>(_ transform: @escaping (E) -> F) -> (Signal<V, F>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            // Values pass unchanged: the upstream's shortcut is the downstream's own.
            Signal<V, E>.Observer(
                { event in downstream.action(event.mapError(transform)) },
                values: downstream.valueSink)
        }
    }
}

extension Signal {
    /// Transforms each value with `transform`.
    ///
    /// The result is a view of this signal: `transform` runs once per value for each observer
    /// of the result, on the thread that delivers, so it should be free of side effects (use
    /// `on(value:)` for those).
    @inlinable
    public func map<U>(_ transform: @escaping (Value) -> U) -> Signal<U, Error> {
        _view(_Stateless.map(transform))
    }

    /// Replaces each value with `value`.
    @inlinable
    public func map<U>(value: U) -> Signal<U, Error> {
        map { _ in value }
    }

    /// Replaces each value with the property at `keyPath`.
    @inlinable
    public func map<U>(_ keyPath: KeyPath<Value, U>) -> Signal<U, Error> {
        map { $0[keyPath: keyPath] }
    }

    /// Transforms a failure's error with `transform`.
    @inlinable
    public func mapError<F>(_ transform: @escaping (Error) -> F) -> Signal<Value, F> {
        _view(_Stateless.mapError(transform))
    }

    /// Forwards only the values for which `isIncluded` returns `true`; terminal events pass.
    @inlinable
    public func filter(_ isIncluded: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _view(_Stateless.filter(isIncluded))
    }

    /// Transforms each value and forwards only the non-`nil` results.
    @inlinable
    public func compactMap<U>(_ transform: @escaping (Value) -> U?) -> Signal<U, Error> {
        _view(_Stateless.compactMap(transform))
    }

    /// Transforms each value and forwards only the non-`nil` results.
    @available(*, deprecated, renamed: "compactMap")
    @inlinable
    public func filterMap<U>(_ transform: @escaping (Value) -> U?) -> Signal<U, Error> {
        compactMap(transform)
    }
}

extension Signal where Value: OptionalProtocol {
    /// Forwards only the non-`nil` values, unwrapped.
    @inlinable
    public func skipNil() -> Signal<Value.Wrapped, Error> {
        compactMap { $0.optional }
    }
}

extension SignalProducer {
    /// Transforms each value with `transform`, once per value of each run.
    @inlinable
    public func map<U>(_ transform: @escaping (Value) -> U) -> SignalProducer<U, Error> {
        let adapter: (Signal<U, Error>.Observer) -> Signal<Value, Error>.Observer = _Stateless.map(transform)
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// Replaces each value with `value`.
    @inlinable
    public func map<U>(value: U) -> SignalProducer<U, Error> {
        map { _ in value }
    }

    /// Replaces each value with the property at `keyPath`.
    @inlinable
    public func map<U>(_ keyPath: KeyPath<Value, U>) -> SignalProducer<U, Error> {
        map { $0[keyPath: keyPath] }
    }

    /// Transforms a failure's error with `transform`.
    @inlinable
    public func mapError<F>(_ transform: @escaping (Error) -> F) -> SignalProducer<Value, F> {
        let adapter: (Signal<Value, F>.Observer) -> Signal<Value, Error>.Observer = _Stateless.mapError(transform)
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// Forwards only the values for which `isIncluded` returns `true`; terminal events pass.
    @inlinable
    public func filter(_ isIncluded: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        let adapter: (Signal<Value, Error>.Observer) -> Signal<Value, Error>.Observer = _Stateless.filter(isIncluded)
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// Transforms each value and forwards only the non-`nil` results.
    @inlinable
    public func compactMap<U>(_ transform: @escaping (Value) -> U?) -> SignalProducer<U, Error> {
        let adapter: (Signal<U, Error>.Observer) -> Signal<Value, Error>.Observer = _Stateless.compactMap(transform)
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// Transforms each value and forwards only the non-`nil` results.
    @available(*, deprecated, renamed: "compactMap")
    @inlinable
    public func filterMap<U>(_ transform: @escaping (Value) -> U?) -> SignalProducer<U, Error> {
        compactMap(transform)
    }
}

extension SignalProducer where Value: OptionalProtocol {
    /// Forwards only the non-`nil` values, unwrapped.
    @inlinable
    public func skipNil() -> SignalProducer<Value.Wrapped, Error> {
        compactMap { $0.optional }
    }
}

/// An `Optional`, as a constraint for operators such as `skipNil()`.
public protocol OptionalProtocol: ExpressibleByNilLiteral {
    /// The wrapped type.
    associatedtype Wrapped
    /// Creates the optional from a plain optional.
    init(reconstructing value: Wrapped?)
    /// The value as a plain optional.
    var optional: Wrapped? { get }
}

extension Optional: OptionalProtocol {
    /// The value itself.
    public var optional: Wrapped? { self }

    /// Creates the optional from a plain optional.
    public init(reconstructing value: Wrapped?) { self = value }
}

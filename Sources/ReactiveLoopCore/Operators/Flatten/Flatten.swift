// flatten(_:) and flatMap(_:_:) on Signal and SignalProducer, for every pairing of error types.

extension Signal where Value: SignalProducerConvertible, Error == Value.Error {
    /// Flattens a signal of streams into one signal of their values, running the inner streams
    /// as `strategy` says. See `FlattenStrategy` for completion, failure and interruption.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> Signal<Value.Value, Error> {
        Signal<Value.Value, Error>._serialized { sink, lifetime in
            let run = _FlattenRun(strategy, sink: sink, lifetime: lifetime)
            lifetime += self.observe { event in run.outer(event) }
        }
    }
}

extension Signal where Value: SignalProducerConvertible, Error == Never {
    /// Flattens a signal that cannot fail of streams that can; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> Signal<Value.Value, Value.Error> {
        _promoteError(Value.Error.self).flatten(strategy)
    }
}

extension Signal where Value: SignalProducerConvertible, Error == Never, Value.Error == Never {
    /// Flattens a signal of streams, none of which can fail; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> Signal<Value.Value, Value.Error> {
        Signal<Value.Value, Never>._serialized { sink, lifetime in
            let run = _FlattenRun(strategy, sink: sink, lifetime: lifetime)
            lifetime += self.observe { event in run.outer(event) }
        }
    }
}

extension Signal where Value: SignalProducerConvertible, Value.Error == Never {
    /// Flattens a signal of streams that cannot fail; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> Signal<Value.Value, Error> {
        map { $0.producer._promoteError(Error.self) }.flatten(strategy)
    }
}

extension SignalProducer where Value: SignalProducerConvertible, Error == Value.Error {
    /// Flattens each run's stream of streams into one stream of their values, running the
    /// inner streams as `strategy` says. See `FlattenStrategy` for the rules.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> SignalProducer<Value.Value, Error> {
        SignalProducer<Value.Value, Error>._serialized { sink, lifetime in
            let run = _FlattenRun(strategy, sink: sink, lifetime: lifetime)
            self._run(Signal.Observer { event in run.outer(event) }, lifetime)
        }
    }
}

extension SignalProducer where Value: SignalProducerConvertible, Error == Never {
    /// Flattens a producer that cannot fail of streams that can; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> SignalProducer<Value.Value, Value.Error> {
        _promoteError(Value.Error.self).flatten(strategy)
    }
}

extension SignalProducer where Value: SignalProducerConvertible, Error == Never, Value.Error == Never {
    /// Flattens a producer of streams, none of which can fail; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> SignalProducer<Value.Value, Value.Error> {
        SignalProducer<Value.Value, Never>._serialized { sink, lifetime in
            let run = _FlattenRun(strategy, sink: sink, lifetime: lifetime)
            self._run(Signal.Observer { event in run.outer(event) }, lifetime)
        }
    }
}

extension SignalProducer where Value: SignalProducerConvertible, Value.Error == Never {
    /// Flattens a producer of streams that cannot fail; see `flatten(_:)`.
    @inlinable
    public func flatten(_ strategy: FlattenStrategy) -> SignalProducer<Value.Value, Error> {
        map { $0.producer._promoteError(Error.self) }.flatten(strategy)
    }
}

// MARK: flatMap

extension Signal {
    /// Maps each value to a producer and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Error>
    ) -> Signal<U, Error> {
        map(transform).flatten(strategy)
    }

    /// Maps each value to a stream and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> Signal<Inner.Value, Error> where Inner.Error == Error {
        map { transform($0).producer }.flatten(strategy)
    }

    /// Maps each value to a producer that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Never>
    ) -> Signal<U, Error> {
        map { transform($0)._promoteError(Error.self) }.flatten(strategy)
    }

    /// Maps each value to a stream that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> Signal<Inner.Value, Error> where Inner.Error == Never {
        map { transform($0).producer._promoteError(Error.self) }.flatten(strategy)
    }
}

extension Signal where Error == Never {
    /// Maps each value to a producer that can fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U, F>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, F>
    ) -> Signal<U, F> {
        _promoteError(F.self).map(transform).flatten(strategy)
    }

    /// Maps each value to a stream that can fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> Signal<Inner.Value, Inner.Error> {
        _promoteError(Inner.Error.self).map { transform($0).producer }.flatten(strategy)
    }

    /// Maps each value to a producer that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Never>
    ) -> Signal<U, Never> {
        map(transform).flatten(strategy)
    }

    /// Maps each value to a stream that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> Signal<Inner.Value, Never> where Inner.Error == Never {
        map { transform($0).producer }.flatten(strategy)
    }
}

extension SignalProducer {
    /// Maps each value to a producer and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Error>
    ) -> SignalProducer<U, Error> {
        map(transform).flatten(strategy)
    }

    /// Maps each value to a stream and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> SignalProducer<Inner.Value, Error> where Inner.Error == Error {
        map { transform($0).producer }.flatten(strategy)
    }

    /// Maps each value to a producer that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Never>
    ) -> SignalProducer<U, Error> {
        map { transform($0)._promoteError(Error.self) }.flatten(strategy)
    }

    /// Maps each value to a stream that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> SignalProducer<Inner.Value, Error> where Inner.Error == Never {
        map { transform($0).producer._promoteError(Error.self) }.flatten(strategy)
    }
}

extension SignalProducer where Error == Never {
    /// Maps each value to a producer that can fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U, F>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, F>
    ) -> SignalProducer<U, F> {
        _promoteError(F.self).map(transform).flatten(strategy)
    }

    /// Maps each value to a stream that can fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> SignalProducer<Inner.Value, Inner.Error> {
        _promoteError(Inner.Error.self).map { transform($0).producer }.flatten(strategy)
    }

    /// Maps each value to a producer that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<U>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> SignalProducer<U, Never>
    ) -> SignalProducer<U, Never> {
        map(transform).flatten(strategy)
    }

    /// Maps each value to a stream that cannot fail and flattens them with `strategy`.
    @inlinable
    public func flatMap<Inner: SignalProducerConvertible>(
        _ strategy: FlattenStrategy, _ transform: @escaping (Value) -> Inner
    ) -> SignalProducer<Inner.Value, Never> where Inner.Error == Never {
        map { transform($0).producer }.flatten(strategy)
    }
}

// MARK: Error promotion used by the overloads above

@usableFromInline
enum _Promote {
    @inlinable
    static func error<V, F>() -> (Signal<V, F>.Observer) -> Signal<V, Never>.Observer {
        { downstream in
            Signal<V, Never>.Observer { event in
                switch event {
                case let .value(value): downstream.action(.value(value))
                case .completed: downstream.action(.completed)
                case .interrupted: downstream.action(.interrupted)
                }
            }
        }
    }
}

extension Signal where Error == Never {
    @inlinable
    func _promoteError<F>(_: F.Type) -> Signal<Value, F> {
        _view(_Promote.error())
    }
}

extension SignalProducer where Error == Never {
    @inlinable
    func _promoteError<F>(_: F.Type) -> SignalProducer<Value, F> {
        let adapter: (Signal<Value, F>.Observer) -> Signal<Value, Never>.Observer = _Promote.error()
        return _lift { downstream, _ in adapter(downstream) }
    }
}

// skip(first:), skip(while:), skip(until:), skipRepeats.

@usableFromInline
enum _Skip {
    @inlinable
    static func first<V, E>(_ count: Int) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var skipped = 0  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                if case .value = event, skipped < count {
                    skipped += 1
                    return
                }
                downstream.action(event)
            }
        }
    }

    @inlinable
    static func repeats<V, E>(
        _ isEquivalent: @escaping (V, V) -> Bool
    ) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var previous: V?  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                if case let .value(value) = event {
                    if let previous, isEquivalent(previous, value) { return }
                    previous = value
                }
                downstream.action(event)
            }
        }
    }
}

extension Signal {
    /// Drops the first `count` values, then forwards everything.
    ///
    /// - Precondition: `count >= 0`.
    public func skip(first count: Int) -> Signal<Value, Error> {
        _require(count >= 0, "skip(first:): count must be >= 0, got \(count)")
        guard count > 0 else { return self }
        return _lift(_Skip.first(count))
    }

    /// Drops each value that `isEquivalent` finds equivalent to the last forwarded value.
    public func skipRepeats(_ isEquivalent: @escaping (Value, Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Skip.repeats(isEquivalent))
    }
}

extension Signal where Value: Equatable {
    /// Drops each value equal to the last forwarded value.
    public func skipRepeats() -> Signal<Value, Error> {
        skipRepeats(==)
    }
}

extension SignalProducer {
    /// Drops the first `count` values of each run, then forwards everything.
    ///
    /// - Precondition: `count >= 0`.
    public func skip(first count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "skip(first:): count must be >= 0, got \(count)")
        guard count > 0 else { return self }
        return _lift(_Skip.first(count))
    }

    /// Drops each value that `isEquivalent` finds equivalent to the last forwarded value.
    public func skipRepeats(_ isEquivalent: @escaping (Value, Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Skip.repeats(isEquivalent))
    }
}

extension SignalProducer where Value: Equatable {
    /// Drops each value equal to the last forwarded value.
    public func skipRepeats() -> SignalProducer<Value, Error> {
        skipRepeats(==)
    }
}

extension _Skip {
    @inlinable
    static func skipWhile<V, E>(_ shouldContinue: @escaping (V) -> Bool) -> (Signal<V, E>.Observer, Lifetime) ->
        Signal<V, E>.Observer
    {
        { downstream, _ in
            var skipping = true  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                if skipping, case let .value(value) = event {
                    guard !shouldContinue(value) else { return }
                    skipping = false
                }
                downstream.send(event)
            }
        }
    }
}

extension Signal {
    /// Drops values while `shouldContinue` returns `true`; from the first value for which it
    /// returns `false` (included), forwards everything.
    public func skip(while shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Skip.skipWhile(shouldContinue))
    }
}

extension SignalProducer {
    /// Drops values while `shouldContinue` returns `true`; see `Signal.skip(while:)`.
    public func skip(while shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Skip.skipWhile(shouldContinue))
    }
}

extension Signal {
    /// Forwards nothing until `trigger` sends a value or completes; from then on forwards this
    /// signal.
    public func skip(until trigger: Signal<(), Never>) -> Signal<Value, Error> {
        Signal { observer, lifetime in
            let disposable = SerialDisposable()
            lifetime += disposable
            disposable.inner = trigger.observe { event in
                switch event {
                case .value, .completed: disposable.inner = self.observe(observer)
                case .interrupted: break
                }
            }
        }
    }
}

extension SignalProducer {
    public func skip(until trigger: SignalProducer<(), Never>) -> SignalProducer<Value, Error> {
        lift(Signal.skip(until:))(trigger)
    }

    /// Forwards nothing until `trigger` sends a value or completes.
    public func skip<Trigger: SignalProducerConvertible>(until trigger: Trigger) -> SignalProducer<Value, Error>
    where Trigger.Value == (), Trigger.Error == Never {
        skip(until: trigger.producer)
    }
}

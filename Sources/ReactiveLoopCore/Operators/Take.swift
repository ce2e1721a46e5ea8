// take(first:), take(last:), take(while:), take(until:) with a trigger or a predicate, take(during:),
// take(untilReplacement:).

@usableFromInline
enum _Take {
    @inlinable
    static func first<V, E>(_ count: Int) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var taken = 0  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                guard taken < count else { return }
                if case .value = event {
                    taken += 1
                    // Decided before the value goes on: a terminal event sent from inside its
                    // delivery ends the run itself, and must not be followed by this one.
                    let isLast = taken == count
                    downstream.action(event)
                    if isLast { downstream.action(.completed) }
                } else {
                    taken = count
                    downstream.action(event)
                }
            }
        }
    }

    @inlinable
    static func last<V, E>(_ count: Int) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var buffer: [V] = []  // Confined to the serial delivery of one run.
            buffer.reserveCapacity(Swift.min(count, 64))
            var start = 0  // Index of the oldest value once the ring is full.
            return Signal<V, E>.Observer { event in
                switch event {
                case let .value(value):
                    guard count > 0 else { return }
                    if buffer.count < count {
                        buffer.append(value)
                    } else {
                        buffer[start] = value
                        start = (start + 1) % count
                    }
                case .completed:
                    for offset in 0..<buffer.count { downstream.send(value: buffer[(start + offset) % buffer.count]) }
                    buffer = []
                    downstream.sendCompleted()
                case .failed, .interrupted:
                    buffer = []
                    downstream.action(event)
                }
            }
        }
    }
}

extension Signal {
    /// Forwards the first `count` values, then completes. Completes at once when `count` is 0.
    ///
    /// - Precondition: `count >= 0`.
    public func take(first count: Int) -> Signal<Value, Error> {
        _require(count >= 0, "take(first:): count must be >= 0, got \(count)")
        guard count > 0 else { return Signal { observer, _ in observer.sendCompleted() } }
        return _lift(_Take.first(count))
    }

    /// Waits for completion, then sends the last `count` values and completes. A failure or an
    /// interruption is forwarded and the buffered values are dropped.
    ///
    /// - Precondition: `count >= 0`.
    public func take(last count: Int) -> Signal<Value, Error> {
        _require(count >= 0, "take(last:): count must be >= 0, got \(count)")
        return _lift(_Take.last(count))
    }

    /// Forwards events until `trigger` sends a value or completes; then completes.
    public func take(until trigger: Signal<(), Never>) -> Signal<Value, Error> {
        Signal._serialized { sink, lifetime in
            lifetime._attachDisposing(
                trigger.observe { event in
                    switch event {
                    case .value, .completed: sink.send(.completed)
                    case .failed, .interrupted: break
                    }
                })
            lifetime._attachDisposing(self.observe(sink.input))
        }
    }

    /// Forwards events until `lifetime` ends; then completes (at once if it has ended).
    public func take(during lifetime: Lifetime) -> Signal<Value, Error> {
        Signal._serialized { sink, ownLifetime in
            ownLifetime += lifetime.observeEnded { sink.send(.completed) }
            if lifetime.hasEnded { return sink.send(.completed) }
            ownLifetime += self.observe(sink.input)
        }
    }
}

extension SignalProducer {
    /// Forwards the first `count` values of each run, then completes and ends the run.
    /// `take(first: 0)` does not start this producer: its runs end with `interrupted` at once.
    ///
    /// - Precondition: `count >= 0`.
    public func take(first count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "take(first:): count must be >= 0, got \(count)")
        // As in ReactiveSwift: taking nothing interrupts at once, without starting this producer.
        guard count > 0 else { return ._immediate { observer, _ in observer.sendInterrupted() } }
        return _lift(_Take.first(count))
    }

    /// Waits for completion, then sends the last `count` values and completes.
    ///
    /// - Precondition: `count >= 0`.
    public func take(last count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "take(last:): count must be >= 0, got \(count)")
        return _lift(_Take.last(count))
    }

    /// Forwards events until `trigger` (started first) sends a value or completes.
    public func take(until trigger: SignalProducer<(), Never>) -> SignalProducer<Value, Error> {
        ._serialized { sink, lifetime in
            lifetime += trigger.start { event in
                switch event {
                case .value, .completed: sink.send(.completed)
                case .failed, .interrupted: break
                }
            }
            guard !lifetime.hasEnded else { return }
            self._run(sink.input, lifetime)
        }
    }

    /// Forwards events until `trigger` sends a value or completes.
    public func take<Trigger: SignalProducerConvertible>(until trigger: Trigger) -> SignalProducer<Value, Error>
    where Trigger.Value == (), Trigger.Error == Never {
        take(until: trigger.producer)
    }

    /// Forwards events until `lifetime` ends; then completes.
    public func take(during lifetime: Lifetime) -> SignalProducer<Value, Error> {
        ._serialized { sink, runLifetime in
            runLifetime += lifetime.observeEnded { sink.send(.completed) }
            guard !runLifetime.hasEnded else { return }
            self._run(sink.input, runLifetime)
        }
    }
}

extension _Take {
    /// Forwards values while `shouldForward(value)` holds; `inclusive` decides whether the
    /// value that ends it is forwarded before completing.
    @inlinable
    static func takeWhile<V, E>(
        inclusive: Bool, _ shouldContinue: @escaping (V) -> Bool
    ) -> (Signal<V, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var done = false  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                guard !done else { return }
                if case let .value(value) = event, !shouldContinue(value) {
                    done = true
                    if inclusive { downstream.send(event) }
                    return downstream.sendCompleted()
                }
                if event.isTerminating { done = true }
                downstream.send(event)
            }
        }
    }
}

extension Signal {
    /// Forwards values while `shouldContinue` returns `true`; at the first `false` completes,
    /// without that value.
    public func take(while shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Take.takeWhile(inclusive: false, shouldContinue))
    }

    /// Forwards values until `shouldContinue` returns `false`; that value is forwarded, then
    /// the signal completes.
    public func take(until shouldContinue: @escaping (Value) -> Bool) -> Signal<Value, Error> {
        _lift(_Take.takeWhile(inclusive: true, shouldContinue))
    }
}

extension SignalProducer {
    /// Forwards values while `shouldContinue` returns `true`; see `Signal.take(while:)`.
    public func take(while shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Take.takeWhile(inclusive: false, shouldContinue))
    }

    /// Forwards values until `shouldContinue` returns `false`, that value included.
    public func take(until shouldContinue: @escaping (Value) -> Bool) -> SignalProducer<Value, Error> {
        _lift(_Take.takeWhile(inclusive: true, shouldContinue))
    }
}

extension Signal {
    /// Forwards this signal's values, failure and interruption (not its completion) until
    /// `replacement` sends any event; from then on forwards `replacement` only.
    public func take(untilReplacement replacement: Signal<Value, Error>) -> Signal<Value, Error> {
        Signal._serialized { sink, lifetime in
            let selfDisposable = self.observe { event in
                if case .completed = event { return }
                sink.send(event)
            }
            lifetime += selfDisposable
            lifetime += replacement.observe { event in
                selfDisposable?.dispose()
                sink.send(event)
            }
        }
    }
}

extension SignalProducer {
    /// Forwards each run until `replacement` (whose run starts first, as in ReactiveSwift)
    /// sends any event; see
    /// `Signal.take(untilReplacement:)`.
    public func take(untilReplacement replacement: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        lift(Signal.take(untilReplacement:))(replacement)
    }

    /// Forwards each run until `replacement` sends any event.
    public func take<Replacement: SignalProducerConvertible>(
        untilReplacement replacement: Replacement
    ) -> SignalProducer<Value, Error> where Replacement.Value == Value, Replacement.Error == Error {
        take(untilReplacement: replacement.producer)
    }

}

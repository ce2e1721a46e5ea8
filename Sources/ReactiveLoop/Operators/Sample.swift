// sample(with:), sample(on:), withLatest(from:), take(untilReplacement:), skip(until:).

extension Signal {
    /// Sends the latest value of this signal with each value of `sampler`; nothing before this
    /// signal has sent a value. Completes once both have completed; fails or interrupts as soon
    /// as this signal does, and interrupts if `sampler` is interrupted.
    public func sample<T>(with sampler: Signal<T, Never>) -> Signal<(Value, T), Error> {
        Signal<(Value, T), Error>._serialized { sink, lifetime in
            var latest: Value?  // Confined to the owner of the sink's delivery.
            var selfCompleted = false
            var samplerCompleted = false
            lifetime += self.observe { event in
                sink.send { () -> Signal<(Value, T), Error>.Event? in
                    switch event {
                    case let .value(value):
                        latest = value
                        return nil
                    case let .failed(error): return .failed(error)
                    case .completed:
                        selfCompleted = true
                        return samplerCompleted ? .completed : nil
                    case .interrupted: return .interrupted
                    }
                }
            }
            lifetime += sampler.observe { event in
                sink.send { () -> Signal<(Value, T), Error>.Event? in
                    switch event {
                    case let .value(samplerValue): return latest.map { .value(($0, samplerValue)) }
                    case .completed:
                        samplerCompleted = true
                        return selfCompleted ? .completed : nil
                    case .interrupted: return .interrupted
                    }
                }
            }
        }
    }

    /// Sends the latest value of this signal each time `sampler` fires; see `sample(with:)`.
    public func sample(on sampler: Signal<(), Never>) -> Signal<Value, Error> {
        sample(with: sampler).map { $0.0 }
    }

    /// Sends each value of this signal with the latest value of `samplee`; nothing before
    /// `samplee` has sent a value. Terminates with this signal; `samplee`'s terminal events are
    /// ignored.
    public func withLatest<U>(from samplee: Signal<U, Never>) -> Signal<(Value, U), Error> {
        Signal<(Value, U), Error>._serialized { sink, lifetime in
            var latest: U?  // Confined to the owner of the sink's delivery.
            lifetime += samplee.observeValues { value in
                sink.send {
                    latest = value; return nil
                }
            }
            lifetime += self.observe { event in
                sink.send { () -> Signal<(Value, U), Error>.Event? in
                    switch event {
                    case let .value(value): return latest.map { .value((value, $0)) }
                    case let .failed(error): return .failed(error)
                    case .completed: return .completed
                    case .interrupted: return .interrupted
                    }
                }
            }
        }
    }

    /// Starts `samplee` and sends each value of this signal with its latest value.
    public func withLatest<U>(from samplee: SignalProducer<U, Never>) -> Signal<(Value, U), Error> {
        Signal<(Value, U), Error> { observer, lifetime in
            samplee.startWithSignal { signal, disposable in
                lifetime += disposable
                lifetime += self.withLatest(from: signal).observe(observer)
            }
        }
    }

    /// Starts `samplee` and sends each value of this signal with its latest value.
    public func withLatest<Samplee: SignalProducerConvertible>(
        from samplee: Samplee
    ) -> Signal<(Value, Samplee.Value), Error> where Samplee.Error == Never {
        withLatest(from: samplee.producer)
    }

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
    /// Sends the latest value of each run with each value of `sampler`; see
    /// `Signal.sample(with:)`.
    public func sample<U>(with sampler: SignalProducer<U, Never>) -> SignalProducer<(Value, U), Error> {
        _liftLeft(Signal.sample(with:))(sampler)
    }

    /// Sends the latest value with each value of `sampler`.
    public func sample<Sampler: SignalProducerConvertible>(
        with sampler: Sampler
    ) -> SignalProducer<(Value, Sampler.Value), Error> where Sampler.Error == Never {
        sample(with: sampler.producer)
    }

    /// Sends the latest value each time `sampler` fires.
    public func sample(on sampler: SignalProducer<(), Never>) -> SignalProducer<Value, Error> {
        _liftLeft(Signal.sample(on:))(sampler)
    }

    /// Sends the latest value each time `sampler` fires.
    public func sample<Sampler: SignalProducerConvertible>(on sampler: Sampler) -> SignalProducer<Value, Error>
    where Sampler.Value == (), Sampler.Error == Never {
        sample(on: sampler.producer)
    }

    /// Sends each value with the latest value of `samplee`, which starts first.
    public func withLatest<U>(from samplee: SignalProducer<U, Never>) -> SignalProducer<(Value, U), Error> {
        lift { $0.withLatest(from: samplee) }
    }

    /// Sends each value with the latest value of `samplee`, which starts first.
    public func withLatest<Samplee: SignalProducerConvertible>(
        from samplee: Samplee
    ) -> SignalProducer<(Value, Samplee.Value), Error> where Samplee.Error == Never {
        withLatest(from: samplee.producer)
    }

    /// Forwards each run until `replacement` (started second) sends any event; see
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

    /// Forwards nothing until `trigger` sends a value or completes.
    public func skip(until trigger: SignalProducer<(), Never>) -> SignalProducer<Value, Error> {
        lift(Signal.skip(until:))(trigger)
    }

    /// Forwards nothing until `trigger` sends a value or completes.
    public func skip<Trigger: SignalProducerConvertible>(until trigger: Trigger) -> SignalProducer<Value, Error>
    where Trigger.Value == (), Trigger.Error == Never {
        skip(until: trigger.producer)
    }
}

// sample(with:), sample(on:), withLatest(from:).

extension Signal {
    /// Sends the latest value of this signal with each value of `sampler`; nothing before this
    /// signal has sent a value. Completes once both have completed; fails or interrupts as soon
    /// as this signal does, and interrupts if `sampler` is interrupted.
    public func sample<T>(with sampler: Signal<T, Never>) -> Signal<(Value, T), Error> {
        Signal<(Value, T), Error>._serialized { sink, lifetime in
            var latest: Value?  // Confined to the owner of the sink's delivery.
            var selfCompleted = false
            var samplerCompleted = false
            lifetime._attachDisposing(
                self.observe { event in
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
                })
            lifetime._attachDisposing(
                sampler.observe { event in
                    sink.send { () -> Signal<(Value, T), Error>.Event? in
                        switch event {
                        case let .value(samplerValue): return latest.map { .value(($0, samplerValue)) }
                        case .completed:
                            samplerCompleted = true
                            return selfCompleted ? .completed : nil
                        case .interrupted: return .interrupted
                        }
                    }
                })
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
            lifetime._attachDisposing(
                samplee.observeValues { value in
                    sink.send {
                        latest = value; return nil
                    }
                })
            lifetime._attachDisposing(
                self.observe { event in
                    sink.send { () -> Signal<(Value, U), Error>.Event? in
                        switch event {
                        case let .value(value): return latest.map { .value((value, $0)) }
                        case let .failed(error): return .failed(error)
                        case .completed: return .completed
                        case .interrupted: return .interrupted
                        }
                    }
                })
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
}

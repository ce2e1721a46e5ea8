// materialize / dematerialize and their Result forms: events as values, and back.

@usableFromInline
enum _Materialize {
    @inlinable
    static func events<V, E>() -> (Signal<Signal<V, E>.Event, Never>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            Signal<V, E>.Observer { event in
                downstream.send(value: event)
                switch event {
                case .value: break
                case .failed, .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }

    @inlinable
    static func results<V, E>() -> (Signal<Result<V, E>, Never>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            Signal<V, E>.Observer { event in
                switch event {
                case let .value(value): downstream.send(value: .success(value))
                case let .failed(error):
                    downstream.send(value: .failure(error))
                    downstream.sendCompleted()
                case .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }

    // The two below end their stream at the first terminal event they make and drop what
    // follows: the upstream's own terminal event after a materialized one (`materialize()`
    // then `dematerialize()` completes once), and anything sent after a terminal value. A
    // view or a producer adapter has no core to drop it. The flag is confined to the
    // observation's deliveries, which are serial.

    @inlinable
    static func dematerialize<Inner: EventProtocol>() -> (Signal<Inner.Value, Inner.Error>.Observer) ->
        Signal<Inner, Never>.Observer
    {
        { downstream in
            var ended = false
            return Signal<Inner, Never>.Observer { event in
                guard !ended else { return }
                let output: Signal<Inner.Value, Inner.Error>.Event
                switch event {
                case let .value(inner): output = inner.event
                case .completed: output = .completed
                case .interrupted: output = .interrupted
                }
                if output.isTerminating { ended = true }
                downstream.send(output)
            }
        }
    }

    @inlinable
    static func dematerializeResults<S, F>() -> (Signal<S, F>.Observer) -> Signal<Result<S, F>, Never>.Observer {
        { downstream in
            var ended = false
            return Signal<Result<S, F>, Never>.Observer { event in
                guard !ended else { return }
                switch event {
                case let .value(.success(value)): return downstream.send(value: value)
                case let .value(.failure(error)):
                    ended = true
                    downstream.send(error: error)
                case .completed:
                    ended = true
                    downstream.sendCompleted()
                case .interrupted:
                    ended = true
                    downstream.sendInterrupted()
                }
            }
        }
    }
}

extension Signal {
    /// Sends every event as a value. After the terminal event's value, completes (or is
    /// interrupted, for `interrupted`); the result never fails.
    public func materialize() -> Signal<Event, Never> {
        _view(_Materialize.events())
    }

    /// Sends values as `.success` and a failure as `.failure`, then completes; never fails.
    public func materializeResults() -> Signal<Result<Value, Error>, Never> {
        _view(_Materialize.results())
    }
}

extension Signal where Value: EventProtocol, Error == Never {
    /// Turns a signal of events back into their stream: values, then the terminal event.
    public func dematerialize() -> Signal<Value.Value, Value.Error> {
        _view(_Materialize.dematerialize())
    }
}

extension Signal where Error == Never {
    /// Turns a signal of results into a stream: `.success` as values, `.failure` as a failure.
    public func dematerializeResults<Success, Failure>() -> Signal<Success, Failure>
    where Value == Result<Success, Failure> {
        _view(_Materialize.dematerializeResults())
    }
}

extension SignalProducer {
    /// Sends every event of each run as a value; see `Signal.materialize()`.
    public func materialize() -> SignalProducer<ProducedSignal.Event, Never> {
        let adapter: (Signal<ProducedSignal.Event, Never>.Observer) -> Signal<Value, Error>.Observer =
            _Materialize.events()
        return _lift { downstream, _ in adapter(downstream) }
    }

    /// Sends values as `.success` and a failure as `.failure`; see `Signal.materializeResults()`.
    public func materializeResults() -> SignalProducer<Result<Value, Error>, Never> {
        let adapter: (Signal<Result<Value, Error>, Never>.Observer) -> Signal<Value, Error>.Observer =
            _Materialize.results()
        return _lift { downstream, _ in adapter(downstream) }
    }
}

extension SignalProducer where Value: EventProtocol, Error == Never {
    /// Turns a producer of events back into their stream; see `Signal.dematerialize()`.
    public func dematerialize() -> SignalProducer<Value.Value, Value.Error> {
        let adapter: (Signal<Value.Value, Value.Error>.Observer) -> Signal<Value, Never>.Observer =
            _Materialize.dematerialize()
        return _lift { downstream, _ in adapter(downstream) }
    }
}

extension SignalProducer where Error == Never {
    /// Turns a producer of results into a stream; see `Signal.dematerializeResults()`.
    public func dematerializeResults<Success, Failure>() -> SignalProducer<Success, Failure>
    where Value == Result<Success, Failure> {
        let adapter: (Signal<Success, Failure>.Observer) -> Signal<Value, Never>.Observer =
            _Materialize.dematerializeResults()
        return _lift { downstream, _ in adapter(downstream) }
    }
}

// lazyMap(on:transform:): the latest value transformed on a scheduler.

extension Signal {
    /// Defers `transform` to `scheduler`: when values arrive faster than the scheduler runs,
    /// only the latest is transformed and sent. Terminal events follow on the scheduler.
    public func lazyMap<U>(on scheduler: any Scheduler, transform: @escaping (Value) -> U) -> Signal<U, Error> {
        _timed { sink, lifetime in
            _LazyMapState(scheduler: scheduler, transform: transform, sink: sink, lifetime: lifetime).observer
        }
    }
}

extension SignalProducer {
    /// Defers `transform` to `scheduler`, transforming only the latest value; see
    /// `Signal.lazyMap(on:transform:)`.
    public func lazyMap<U>(on scheduler: any Scheduler, transform: @escaping (Value) -> U) -> SignalProducer<U, Error> {
        _timed(hopping: scheduler) { sink, lifetime in
            _LazyMapState(scheduler: scheduler, transform: transform, sink: sink, lifetime: lifetime).observer
        }
    }

}

/// lazyMap's state: the latest untransformed value, and whether a transform is scheduled.
final class _LazyMapState<Value, U, Error: Swift.Error>: @unchecked Sendable {  // Confined to the sink's owner.
    let scheduler: any Scheduler
    let transform: (Value) -> U
    let sink: _SerialSink<U, Error>
    let scheduled = SerialDisposable()
    // Confined to the owner of the sink's delivery.
    var latest: Value?

    init(scheduler: any Scheduler, transform: @escaping (Value) -> U, sink: _SerialSink<U, Error>, lifetime: Lifetime) {
        self.scheduler = scheduler
        self.transform = transform
        self.sink = sink
        lifetime += scheduled
    }

    var observer: Signal<Value, Error>.Observer {
        Signal<Value, Error>.Observer { [self] event in
            let terminal: Signal<U, Error>.Event
            switch event {
            case let .value(value):
                var schedule = false
                sink.send {
                    schedule = latest == nil
                    latest = value
                    return nil
                }
                if schedule { scheduled.inner = scheduler.schedule { [self] in run() } }
                return
            case let .failed(error): terminal = .failed(error)
            case .completed: terminal = .completed
            case .interrupted: terminal = .interrupted
            }
            // After any transform already scheduled: the scheduler runs actions in order.
            scheduler.schedule { [sink] in sink.send(terminal) }
        }
    }

    private func run() {
        var value: Value?
        sink.send {
            value = latest
            latest = nil
            return nil
        }
        if let value { sink.send(.value(transform(value))) }
    }
}

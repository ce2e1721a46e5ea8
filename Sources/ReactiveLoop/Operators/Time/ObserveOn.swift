import Foundation

extension Signal {
    /// Delivers every event on `scheduler`, in order.
    public func observe(on scheduler: any Scheduler) -> Signal<Value, Error> {
        _timed { sink, _ in Observer { event in scheduler.schedule { sink.send(event) } } }
    }

    /// Defers `transform` to `scheduler`: when values arrive faster than the scheduler runs,
    /// only the latest is transformed and sent. Terminal events follow on the scheduler.
    public func lazyMap<U>(on scheduler: any Scheduler, transform: @escaping (Value) -> U) -> Signal<U, Error> {
        _timed { sink, lifetime in
            _LazyMapState(scheduler: scheduler, transform: transform, sink: sink, lifetime: lifetime).observer
        }
    }
}

extension SignalProducer {
    /// Delivers every event of each run on `scheduler`, in order.
    public func observe(on scheduler: any Scheduler) -> SignalProducer<Value, Error> {
        _timed { sink, _ in Signal.Observer { event in scheduler.schedule { sink.send(event) } } }
    }

    /// Starts each run on `scheduler` (its start handler runs there).
    public func start(on scheduler: any Scheduler) -> SignalProducer<Value, Error> {
        SignalProducer { observer, lifetime in
            lifetime += scheduler.schedule {
                guard !lifetime.hasEnded else { return }
                self._run(observer, lifetime)
            }
        }
    }

    /// Defers `transform` to `scheduler`, transforming only the latest value; see
    /// `Signal.lazyMap(on:transform:)`.
    public func lazyMap<U>(on scheduler: any Scheduler, transform: @escaping (Value) -> U) -> SignalProducer<U, Error> {
        _timed { sink, lifetime in
            _LazyMapState(scheduler: scheduler, transform: transform, sink: sink, lifetime: lifetime).observer
        }
    }

    /// Starts the producer again `interval` seconds after a failure, up to `count` more times.
    ///
    /// - Precondition: `count >= 0` and `interval >= 0`.
    public func retry(upTo count: Int, interval: TimeInterval, on scheduler: any DateScheduler) -> SignalProducer<
        Value, Error
    > {
        _require(count >= 0, "retry(upTo:interval:on:): count must be >= 0, got \(count)")
        _checkInterval(interval, "retry(upTo:interval:on:)")
        guard count > 0 else { return self }
        return flatMapError { _ in
            SignalProducer<(), Error>(value: ()).delay(interval, on: scheduler)
                .then(self.retry(upTo: count - 1, interval: interval, on: scheduler))
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

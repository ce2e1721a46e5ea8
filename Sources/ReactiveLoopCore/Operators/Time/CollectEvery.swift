#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

@usableFromInline
final class _CollectEveryState<Value, Error: Swift.Error>: @unchecked Sendable {  // Confined to the sink's owner.
    let skipEmpty: Bool
    let discardWhenCompleted: Bool
    let scheduler: any DateScheduler
    let sink: _SerialSink<[Value], Error>
    let timer = SerialDisposable()
    // Confined to the owner of the sink's delivery.
    var buffer: [Value] = []
    // Confined to the owner of the sink's delivery. Completed, waiting for the next tick.
    var completing = false

    init(
        interval: DispatchTimeInterval, scheduler: any DateScheduler, skipEmpty: Bool, discardWhenCompleted: Bool,
        sink: _SerialSink<[Value], Error>, lifetime: Lifetime
    ) {
        self.skipEmpty = skipEmpty
        self.discardWhenCompleted = discardWhenCompleted
        self.scheduler = scheduler
        self.sink = sink
        lifetime += timer
        timer.inner = scheduler.schedule(
            after: interval, interval: interval, leeway: .nanoseconds(interval.nanoseconds / 10)
        ) { [weak self] in
            self?.tick()
        }
    }

    /// The operator for one run: builds the state and returns the observer of the input.
    static func adapter(
        _ interval: DispatchTimeInterval, _ scheduler: any DateScheduler, _ skipEmpty: Bool,
        _ discardWhenCompleted: Bool
    ) -> (_SerialSink<[Value], Error>, Lifetime) -> Signal<Value, Error>.Observer {
        _checkInterval(interval, "collect(every:on:skipEmpty:discardWhenCompleted:)", .positive)
        return { sink, lifetime in
            Signal.Observer(
                _CollectEveryState(
                    interval: interval, scheduler: scheduler, skipEmpty: skipEmpty,
                    discardWhenCompleted: discardWhenCompleted, sink: sink, lifetime: lifetime
                ).receive)
        }
    }

    /// Sends what was collected (if anything, or always unless `skipEmpty`); after a
    /// completion that keeps its values, completes too.
    private func tick() {
        var complete = false
        sink.send {
            complete = completing
            guard !buffer.isEmpty || !skipEmpty else { return nil }
            defer { buffer.removeAll(keepingCapacity: true) }
            return .value(buffer)
        }
        if complete {
            timer.dispose()
            sink.send(.completed)
        }
    }

    func receive(_ event: Signal<Value, Error>.Event) {
        switch event {
        case let .value(value):
            sink.send {
                buffer.append(value)
                return nil
            }
        case .completed where !discardWhenCompleted:
            sink.send {
                completing = true
                return nil
            }
        case .completed, .failed, .interrupted:
            timer.dispose()
            let terminal: Signal<[Value], Error>.Event =
                switch event {
                case let .failed(error): .failed(error)
                case .interrupted: .interrupted
                default: .completed
                }
            scheduler.schedule { [sink] in sink.send(terminal) }
        }
    }
}

extension Signal {
    /// Sends the values collected during each `interval`, as an array, on `scheduler`.
    ///
    /// - Parameters:
    ///   - skipEmpty: Whether to skip intervals in which nothing arrived (default: send `[]`).
    ///   - discardWhenCompleted: Whether values collected since the last send are dropped at
    ///     completion (the default) or sent before it.
    /// - Precondition: `interval` is positive and finite (not `.never`).
    public func collect(
        every interval: DispatchTimeInterval, on scheduler: any DateScheduler, skipEmpty: Bool = false,
        discardWhenCompleted: Bool = true
    ) -> Signal<[Value], Error> {
        _timed(_CollectEveryState.adapter(interval, scheduler, skipEmpty, discardWhenCompleted))
    }
}

extension SignalProducer {
    /// Sends the values collected during each `interval`; see `Signal.collect(every:on:skipEmpty:discardWhenCompleted:)`.
    public func collect(
        every interval: DispatchTimeInterval, on scheduler: any DateScheduler, skipEmpty: Bool = false,
        discardWhenCompleted: Bool = true
    ) -> SignalProducer<[Value], Error> {
        _timed(hopping: scheduler, _CollectEveryState.adapter(interval, scheduler, skipEmpty, discardWhenCompleted))
    }
}

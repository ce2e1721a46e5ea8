import Foundation

@usableFromInline
final class _CollectEveryState<Value, Error: Swift.Error>: @unchecked Sendable {  // Confined to the sink's owner.
    let skipEmpty: Bool
    let discardWhenCompleted: Bool
    let sink: _SerialSink<[Value], Error>
    // Confined to the owner of the sink's delivery.
    var buffer: [Value] = []

    init(
        interval: DispatchTimeInterval, scheduler: any DateScheduler, skipEmpty: Bool, discardWhenCompleted: Bool,
        sink: _SerialSink<[Value], Error>, lifetime: Lifetime
    ) {
        self.skipEmpty = skipEmpty
        self.discardWhenCompleted = discardWhenCompleted
        self.sink = sink
        lifetime += scheduler.schedule(after: interval, interval: interval, leeway: .seconds(0)) { [weak self] in
            self?.tick()
        }
    }

    private func tick() {
        sink.send {
            guard !buffer.isEmpty || !skipEmpty else { return nil }
            defer { buffer.removeAll(keepingCapacity: true) }
            return .value(buffer)
        }
    }

    /// The operator for one run: builds the state and returns the observer of the input.
    static func adapter(
        _ interval: DispatchTimeInterval, _ scheduler: any DateScheduler, _ skipEmpty: Bool,
        _ discardWhenCompleted: Bool
    ) -> (_SerialSink<[Value], Error>, Lifetime) -> Signal<Value, Error>.Observer {
        precondition(
            interval.nanoseconds > 0,
            "collect(every:on:skipEmpty:discardWhenCompleted:): interval must be positive, got \(interval)")
        return { sink, lifetime in
            Signal.Observer(
                _CollectEveryState(
                    interval: interval, scheduler: scheduler, skipEmpty: skipEmpty,
                    discardWhenCompleted: discardWhenCompleted, sink: sink, lifetime: lifetime
                ).receive)
        }
    }

    func receive(_ event: Signal<Value, Error>.Event) {
        switch event {
        case let .value(value):
            sink.send {
                buffer.append(value)
                return nil
            }
        case .completed:
            var flush = false
            sink.send {
                flush = !discardWhenCompleted && !buffer.isEmpty
                return flush ? .value(buffer) : nil
            }
            sink.send(.completed)
        case let .failed(error): sink.send(.failed(error))
        case .interrupted: sink.send(.interrupted)
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
        _timed(_CollectEveryState.adapter(interval, scheduler, skipEmpty, discardWhenCompleted))
    }
}

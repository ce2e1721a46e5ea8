// replayLazily(upTo:): one shared run, replayed to every consumer.

import Synchronization

/// The shared run behind `replayLazily`: a signal core that multicasts the underlying run,
/// and the last values it sent. A new consumer reads the buffer and registers while holding
/// the core's delivery ownership, so it sees every value exactly once: replayed if it was sent
/// before, delivered live otherwise.
final class _ReplayState<Value, Error: Swift.Error>: @unchecked Sendable {  // See the field comments.
    let core = _SignalCore<Value, Error>()
    let input: Signal<Value, Error>.Observer
    let capacity: Int
    // Confined to the owner of core's delivery.
    var buffer: [Value] = []
    // Confined to the owner of core's delivery.
    var terminal: Signal<Value, Error>.Event?
    let started = Synchronization.Atomic<Bool>(false)

    init(capacity: Int) {
        self.capacity = capacity
        input = core.makeInput()
        // The first observer keeps the buffer: it runs before any consumer sees the event.
        _ = core.observe(Signal.Observer { [weak self] event in self?.record(event) })
    }

    private func record(_ event: Signal<Value, Error>.Event) {
        guard case let .value(value) = event else { return terminal = event }
        guard capacity > 0 else { return }
        if buffer.count == capacity { buffer.removeFirst() }
        buffer.append(value)
    }

    /// Replays the buffer (and terminal event) to `observer` and registers it for what follows.
    func attach(_ observer: Signal<Value, Error>.Observer) -> (any Disposable)? {
        let owned = core.beginExclusive()
        defer { core.endExclusive(delivering: nil, owned: owned) }
        for value in buffer { observer.send(value: value) }
        if let terminal {
            observer.send(terminal)
            return nil
        }
        return core.observe(observer)
    }
}

extension SignalProducer {
    /// Shares one run of this producer between all consumers, replaying up to `capacity` of
    /// its latest values (and its terminal event) to each consumer that starts later.
    ///
    /// The run starts with the first consumer. It goes on while this replaying producer or any
    /// of its consumers' runs exist, and is interrupted once none does.
    ///
    /// - Precondition: `capacity >= 0`.
    public func replayLazily(upTo capacity: Int) -> SignalProducer<Value, Error> {
        _require(capacity >= 0, "replayLazily(upTo:): capacity must be >= 0, got \(capacity)")
        let state = _ReplayState<Value, Error>(capacity: capacity)
        // Released with the last copy of the returned producer and the last consumer's run.
        let (sharedLifetime, token) = Lifetime.make()
        return SignalProducer { observer, lifetime in
            lifetime.observeEnded { _ = token }
            lifetime += state.attach(observer)
            if state.started.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
                self.take(during: sharedLifetime).start(state.input)
            }
        }
    }
}

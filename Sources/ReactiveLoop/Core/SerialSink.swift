/// The input of a signal core for operators with state: `send(computing:)` runs its body while
/// holding the core's delivery ownership, so the body's state changes happen in the same order
/// as the deliveries they produce, with no lock of their own.
///
/// The state an operator keeps for a sink is confined to "whoever owns delivery", which is one
/// thread at a time; a body that runs reentrantly (on the delivering thread) runs at once and
/// its event is queued behind the current one.
@usableFromInline
final class _SerialSink<Value, Error: Swift.Error> {
    @usableFromInline let core: _SignalCore<Value, Error>
    /// The core's input observer: it keeps the run alive, and interrupts it if released.
    @usableFromInline let input: Signal<Value, Error>.Observer

    @usableFromInline
    init(core: _SignalCore<Value, Error>) {
        self.core = core
        self.input = core.makeInput()
    }

    /// Runs `body` with delivery ownership and delivers the event it returns, if any.
    @inlinable
    func send(computing body: () -> Signal<Value, Error>.Event?) {
        let owned = core.beginExclusive()
        let event = body()
        core.endExclusive(delivering: event, owned: owned)
    }

    /// Sends an event with no state change.
    @inlinable
    func send(_ event: Signal<Value, Error>.Event) {
        core.send(event)
    }
}

extension _SerialSink: @unchecked Sendable {}  // Immutable; the core is thread safe.

extension Signal {
    /// A signal whose generator gets a serializing sink instead of a plain observer.
    @inlinable
    static func _serialized(_ generator: (_SerialSink<Value, Error>, Lifetime) -> Void) -> Signal {
        let core = _SignalCore<Value, Error>()
        let signal = Signal(source: .core(core))
        let (lifetime, token) = Lifetime.make()
        core.setResources(AnyDisposable(token.dispose))
        generator(_SerialSink(core: core), lifetime)
        return signal
    }
}

extension SignalProducer {
    /// A producer whose runs get a serializing sink: one core per run, at the source, delivering
    /// to the downstream observer.
    @inlinable
    static func _serialized(_ body: @escaping (_SerialSink<Value, Error>, Lifetime) -> Void) -> SignalProducer {
        SignalProducer(.run) { downstream, lifetime in
            let core = _SignalCore<Value, Error>()
            core.attachSole(downstream)
            let sink = _SerialSink(core: core)
            // Strong: the run keeps itself alive until it terminates or is disposed, whether or
            // not the start handler keeps its observer. The cycle (lifetime -> input -> core ->
            // downstream -> lifetime's token) is broken when the lifetime ends, which `_start`
            // does on the terminal event and the run's disposable does on disposal.
            let input = sink.input
            lifetime.observeEnded { input.sendInterrupted() }
            body(sink, lifetime)
        }
    }
}

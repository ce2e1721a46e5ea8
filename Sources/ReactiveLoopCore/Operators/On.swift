// on(...): side effects at points of a stream's life, without changing its events.

@usableFromInline
enum _On {
    /// Runs the hooks for `event` in ReactiveSwift's order (event, the kind's hook, terminated),
    /// then forwards it.
    @inlinable
    static func adapter<V, E>(
        event: ((Signal<V, E>.Event) -> Void)?,
        failed: ((E) -> Void)?,
        completed: (() -> Void)?,
        interrupted: (() -> Void)?,
        terminated: (() -> Void)?,
        value: ((V) -> Void)?
    ) -> (Signal<V, E>.Observer) -> Signal<V, E>.Observer {
        { downstream in
            Signal<V, E>.Observer { received in
                event?(received)
                switch received {
                case let .value(v): value?(v)
                case let .failed(error): failed?(error)
                case .completed: completed?()
                case .interrupted: interrupted?()
                }
                if received.isTerminating { terminated?() }
                downstream.action(received)
            }
        }
    }
}

extension Signal {
    /// Runs side effects as events pass, before they reach observers.
    ///
    /// Each hook runs once per event (not once per observer). `terminated` runs after the
    /// terminal event's own hook; `disposed` runs when the resulting signal ends.
    ///
    /// - Returns: A signal with the same events.
    public func on(
        event: ((Event) -> Void)? = nil,
        failed: ((Error) -> Void)? = nil,
        completed: (() -> Void)? = nil,
        interrupted: (() -> Void)? = nil,
        terminated: (() -> Void)? = nil,
        disposed: (() -> Void)? = nil,
        value: ((Value) -> Void)? = nil
    ) -> Signal<Value, Error> {
        let adapter = _On.adapter(
            event: event, failed: failed, completed: completed, interrupted: interrupted, terminated: terminated,
            value: value)
        return _lift { output, lifetime in
            if let disposed { lifetime.observeEnded(disposed) }
            return adapter(output)
        }
    }
}

extension SignalProducer {
    /// Runs side effects at points of each run's life, without changing its events.
    ///
    /// - Parameters:
    ///   - starting: Runs before the run starts.
    ///   - started: Runs right after the run started (after its start handler returned).
    ///   - event, failed, completed, interrupted, value: Run as the event passes, before it
    ///     reaches the observer.
    ///   - terminated: Runs after the terminal event's own hook.
    ///   - disposed: Runs when the run's lifetime ends (after termination or disposal).
    public func on(
        starting: (() -> Void)? = nil,
        started: (() -> Void)? = nil,
        event: ((ProducedSignal.Event) -> Void)? = nil,
        failed: ((Error) -> Void)? = nil,
        completed: (() -> Void)? = nil,
        interrupted: (() -> Void)? = nil,
        terminated: (() -> Void)? = nil,
        disposed: (() -> Void)? = nil,
        value: ((Value) -> Void)? = nil
    ) -> SignalProducer<Value, Error> {
        let adapter = _On.adapter(
            event: event, failed: failed, completed: completed, interrupted: interrupted, terminated: terminated,
            value: value)
        return SignalProducer(.run) { downstream, lifetime in
            starting?()
            self._run(adapter(downstream), lifetime)
            // Added after the run's own lifetime hooks, so it runs after the terminal event.
            if let disposed { lifetime.observeEnded(disposed) }
            started?()
        }
    }
}

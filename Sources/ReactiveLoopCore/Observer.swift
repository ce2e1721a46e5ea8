extension Signal {
    /// Receives the events of a signal. An observer is also the input side of a pipe: sending to
    /// the input observer of `Signal.pipe()` delivers the event to every observer of its output.
    ///
    /// - Note: An input observer made by `Signal.init(_:)` or `Signal.pipe()` sends
    ///   `interrupted` when it is released without having terminated its signal, so that a
    ///   forgotten input never leaves observers waiting forever. The observer a producer's start
    ///   handler gets does not: a run ends by its own terminal event or by disposal (see
    ///   "Where ReactiveLoop differs from ReactiveSwift on purpose" in docs/APIContracts.md).
    public final class Observer {
        /// The function that receives each event.
        public typealias Action = (Signal<Value, Error>.Event) -> Void

        @usableFromInline let action: Action
        /// A shortcut for values, if the observer has one: calling it with `value` does what
        /// `action(.value(value))` does, with one closure call less. A signal core calls it for
        /// each value; every other event goes to `action`.
        @usableFromInline let valueAction: ((Value) -> Void)?
        /// The signal core this observer is the input of, if any: `send` calls it directly,
        /// saving an indirect call per event. Such an input interrupts its signal when released.
        /// `action` holds the core strongly; this reference is unowned so that a send does not
        /// retain the core (whose refcount goes through a side table, as it is weakly referenced).
        @usableFromInline let core: Unmanaged<_SignalCore<Value, Error>>?

        /// Creates an observer that calls `action` with every event it is sent.
        @inlinable
        public init(_ action: @escaping Action) {
            self.action = action
            self.valueAction = nil
            self.core = nil
        }

        /// The input observer of `core`.
        @inlinable
        init(inputOf core: _SignalCore<Value, Error>) {
            self.action = { [core] event in core.send(event) }
            self.valueAction = nil
            self.core = Unmanaged.passUnretained(core)
        }

        /// Creates an observer from one optional closure per kind of event.
        @inlinable
        public convenience init(
            value: ((Value) -> Void)? = nil,
            failed: ((Error) -> Void)? = nil,
            completed: (() -> Void)? = nil,
            interrupted: (() -> Void)? = nil
        ) {
            let action: Action = { event in
                switch event {
                case let .value(v): value?(v)
                case let .failed(error): failed?(error)
                case .completed: completed?()
                case .interrupted: interrupted?()
                }
            }
            if let value {
                self.init(action, values: value)
            } else {
                self.init(action)
            }
        }

        /// An observer that calls `action` with each value and ignores the other events. A
        /// signal core calls `action` itself for each value (it is the value shortcut).
        @inlinable
        convenience init(values action: @escaping (Value) -> Void) {
            self.init(
                { event in
                    if case let .value(value) = event { action(value) }
                },
                values: action)
        }

        /// An observer whose values take the shortcut `valueAction`, which must do what
        /// `action(.value(value))` does.
        @inlinable
        init(_ action: @escaping Action, values valueAction: @escaping (Value) -> Void) {
            self.action = action
            self.valueAction = valueAction
            self.core = nil
        }

        /// The closure that sends one value to this observer the shortest way.
        @inlinable
        var valueSink: (Value) -> Void {
            if let valueAction { return valueAction }
            let action = self.action
            return { value in action(.value(value)) }
        }

        deinit {
            core?._withUnsafeGuaranteedRef { $0.send(.interrupted) }
        }

        /// Sends an event to this observer.
        @inlinable
        public func send(_ event: Signal<Value, Error>.Event) {
            if let core {
                core._withUnsafeGuaranteedRef { $0.send(event) }
            } else {
                action(event)
            }
        }

        /// Sends a `value` event: through the observer's value shortcut when it has one (an
        /// operator's adapter), so that a value crosses a chain of operators as a plain argument.
        @inlinable
        public func send(value: Value) {
            // Called through the optional in place: binding it to a constant would copy the
            // closure, a retain and a release on every value.
            guard valueAction != nil else { return send(.value(value)) }
            valueAction?(value)
        }

        /// Sends a `failed` event, which ends the stream.
        @inlinable
        public func send(error: Error) {
            send(.failed(error))
        }

        /// Sends a `completed` event, which ends the stream.
        @inlinable
        public func sendCompleted() {
            send(.completed)
        }

        /// Sends an `interrupted` event, which ends the stream.
        @inlinable
        public func sendInterrupted() {
            send(.interrupted)
        }
    }
}

// Immutable; thread safety is the action's (a signal core's) contract.
extension Signal.Observer: @unchecked Sendable {}

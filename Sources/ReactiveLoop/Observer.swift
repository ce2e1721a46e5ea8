extension Signal {
    /// Receives the events of a signal. An observer is also the input side of a pipe: sending to
    /// the input observer of `Signal.pipe()` delivers the event to every observer of its output.
    ///
    /// - Note: An input observer made by `Signal.init(_:)`, `Signal.pipe()` or a producer start
    ///   sends `interrupted` when it is released without having terminated its signal, so that a
    ///   forgotten input never leaves observers waiting forever.
    public final class Observer {
        /// The function that receives each event.
        public typealias Action = (Signal<Value, Error>.Event) -> Void

        @usableFromInline let action: Action
        @usableFromInline let interruptsOnDeinit: Bool

        /// Creates an observer that calls `action` with every event it is sent.
        public init(_ action: @escaping Action) {
            self.action = action
            self.interruptsOnDeinit = false
        }

        @usableFromInline
        init(action: @escaping Action, interruptsOnDeinit: Bool) {
            self.action = action
            self.interruptsOnDeinit = interruptsOnDeinit
        }

        /// Creates an observer from one optional closure per kind of event.
        public convenience init(
            value: ((Value) -> Void)? = nil,
            failed: ((Error) -> Void)? = nil,
            completed: (() -> Void)? = nil,
            interrupted: (() -> Void)? = nil
        ) {
            self.init { event in
                switch event {
                case let .value(v): value?(v)
                case let .failed(error): failed?(error)
                case .completed: completed?()
                case .interrupted: interrupted?()
                }
            }
        }

        deinit {
            if interruptsOnDeinit { action(.interrupted) }
        }

        /// Sends an event to this observer.
        @inlinable
        public func send(_ event: Signal<Value, Error>.Event) {
            action(event)
        }

        /// Sends a `value` event.
        @inlinable
        public func send(value: Value) {
            action(.value(value))
        }

        /// Sends a `failed` event, which ends the stream.
        @inlinable
        public func send(error: Error) {
            action(.failed(error))
        }

        /// Sends a `completed` event, which ends the stream.
        @inlinable
        public func sendCompleted() {
            action(.completed)
        }

        /// Sends an `interrupted` event, which ends the stream.
        @inlinable
        public func sendInterrupted() {
            action(.interrupted)
        }
    }
}

extension Signal.Observer: @unchecked Sendable {}  // Immutable; thread safety is the action's (a signal core's) contract.

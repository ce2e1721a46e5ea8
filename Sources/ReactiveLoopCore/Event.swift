extension Signal {
    /// One event of a signal: any number of `value`s, then at most one terminal event
    /// (`failed`, `completed` or `interrupted`), after which nothing else is delivered.
    @frozen
    public enum Event {
        /// A value produced by the stream.
        case value(Value)
        /// The stream failed with an error. Terminal.
        case failed(Error)
        /// The stream finished successfully. Terminal.
        case completed
        /// The stream was cancelled before it could finish. Terminal.
        case interrupted

        /// Whether this is `.completed`.
        @inlinable
        public var isCompleted: Bool {
            if case .completed = self { return true }
            return false
        }

        /// Whether this event ends the stream (`failed`, `completed` or `interrupted`).
        @inlinable
        public var isTerminating: Bool {
            if case .value = self { return false }
            return true
        }

        /// The value carried by a `.value` event, otherwise `nil`.
        @inlinable
        public var value: Value? {
            if case let .value(value) = self { return value }
            return nil
        }

        /// The error carried by a `.failed` event, otherwise `nil`.
        @inlinable
        public var error: Error? {
            if case let .failed(error) = self { return error }
            return nil
        }

        /// The same event with its value transformed; terminal events pass unchanged.
        @inlinable
        public func map<U>(_ f: (Value) -> U) -> Signal<U, Error>.Event {
            switch self {
            case let .value(value): return .value(f(value))
            case let .failed(error): return .failed(error)
            case .completed: return .completed
            case .interrupted: return .interrupted
            }
        }

        /// The same event with its error transformed; other events pass unchanged.
        @inlinable
        public func mapError<F>(_ f: (Error) -> F) -> Signal<Value, F>.Event {
            switch self {
            case let .value(value): return .value(value)
            case let .failed(error): return .failed(f(error))
            case .completed: return .completed
            case .interrupted: return .interrupted
            }
        }
    }
}

extension Signal.Event: CustomStringConvertible {
    /// A description such as `VALUE 1`, `FAILED someError`, `COMPLETED` or `INTERRUPTED`.
    public var description: String {
        switch self {
        case let .value(value): return "VALUE \(value)"
        case let .failed(error): return "FAILED \(error)"
        case .completed: return "COMPLETED"
        case .interrupted: return "INTERRUPTED"
        }
    }
}

extension Signal.Event: Equatable where Value: Equatable, Error: Equatable {}

extension Signal.Event: @unchecked Sendable {}  // Events are handed between threads by design, like their values.

/// A type that represents an event of a `Signal`, so that constraints can name one.
public protocol EventProtocol<Value, Error> {
    /// The type of values in the event.
    associatedtype Value
    /// The type of error in the event.
    associatedtype Error: Swift.Error
    /// The event itself.
    var event: Signal<Value, Error>.Event { get }
}

extension Signal.Event: EventProtocol {
    /// The event itself.
    public var event: Signal<Value, Error>.Event { self }
}

/// How a stream ended, without the values.
public enum Termination<Error: Swift.Error> {
    /// The stream failed with an error.
    case failed(Error)
    /// The stream finished successfully.
    case completed
    /// The stream was cancelled.
    case interrupted
}

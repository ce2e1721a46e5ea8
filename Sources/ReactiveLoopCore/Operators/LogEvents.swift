// logEvents: print (or hand to a logger) the events of a stream as they pass.

/// Receives one log line's parts: the identifier, the event (`"value 1"`, `"completed"`, …),
/// and where `logEvents` was called.
public typealias EventLogger = (
    _ identifier: String, _ event: String, _ fileName: String, _ functionName: String, _ lineNumber: Int
) -> Void

/// The default `EventLogger`: prints `[identifier] event fileName: …, functionName: …, lineNumber: …`.
public func defaultEventLog(identifier: String, event: String, fileName: String, functionName: String, lineNumber: Int)
{
    print("[\(identifier)] \(event) fileName: \(fileName), functionName: \(functionName), lineNumber: \(lineNumber)")
}

/// The kinds of events `logEvents` can log.
public enum LoggingEvent {
    /// The events of a signal.
    public enum Signal: String, CaseIterable {
        /// A value.
        case value
        /// Completion.
        case completed
        /// Failure.
        case failed
        /// Any terminal event.
        case terminated
        /// The end of the signal's lifetime.
        case disposed
        /// Interruption.
        case interrupted

        /// Every kind.
        @available(*, deprecated, message: "Use `Set(LoggingEvent.Signal.allCases)` instead.")
        public static var allEvents: Set<Signal> { Set(allCases) }
    }

    /// The events of a producer's run.
    public enum SignalProducer: String, CaseIterable {
        /// Before the run starts.
        case starting
        /// After the run started.
        case started
        /// A value.
        case value
        /// Completion.
        case completed
        /// Failure.
        case failed
        /// Any terminal event.
        case terminated
        /// The end of the run's lifetime.
        case disposed
        /// Interruption.
        case interrupted

        /// Every kind.
        @available(*, deprecated, message: "Use `Set(LoggingEvent.SignalProducer.allCases)` instead.")
        public static var allEvents: Set<SignalProducer> { Set(allCases) }
    }
}

/// Builds the hooks that log the selected kinds of events.
struct _EventLog<Kind: RawRepresentable & Hashable> where Kind.RawValue == String {
    let events: Set<Kind>
    let identifier: String
    let fileName: String
    let functionName: String
    let lineNumber: Int
    let logger: EventLogger

    /// A hook for `kind` that logs its argument, or `nil` if `kind` is not selected.
    func hook<T>(_ kind: Kind) -> ((T) -> Void)? {
        guard events.contains(kind) else { return nil }
        return { argument in
            let event = argument is Void ? kind.rawValue : "\(kind.rawValue) \(argument)"
            logger(identifier, event, fileName, functionName, lineNumber)
        }
    }

    func hook(_ kind: Kind) -> (() -> Void)? {
        let log: ((()) -> Void)? = hook(kind)
        return log.map { log in { log(()) } }
    }
}

extension Signal {
    /// Logs the selected events as they pass, through `logger`.
    ///
    /// - Parameters:
    ///   - identifier: Tells this signal's lines apart from others.
    ///   - events: The kinds of events to log; all by default.
    ///   - logger: Receives each line; prints by default.
    public func logEvents(
        identifier: String = "",
        events: Set<LoggingEvent.Signal> = Set(LoggingEvent.Signal.allCases),
        fileName: String = #file, functionName: String = #function, lineNumber: Int = #line,
        logger: @escaping EventLogger = defaultEventLog
    ) -> Signal<Value, Error> {
        let log = _EventLog(
            events: events, identifier: identifier, fileName: fileName, functionName: functionName,
            lineNumber: lineNumber, logger: logger)
        return on(
            failed: log.hook(.failed), completed: log.hook(.completed), interrupted: log.hook(.interrupted),
            terminated: log.hook(.terminated), disposed: log.hook(.disposed), value: log.hook(.value))
    }
}

extension SignalProducer {
    /// Logs the selected events of each run as they pass, through `logger`.
    public func logEvents(
        identifier: String = "",
        events: Set<LoggingEvent.SignalProducer> = Set(LoggingEvent.SignalProducer.allCases),
        fileName: String = #file, functionName: String = #function, lineNumber: Int = #line,
        logger: @escaping EventLogger = defaultEventLog
    ) -> SignalProducer<Value, Error> {
        let log = _EventLog(
            events: events, identifier: identifier, fileName: fileName, functionName: functionName,
            lineNumber: lineNumber, logger: logger)
        return on(
            starting: log.hook(.starting), started: log.hook(.started), failed: log.hook(.failed),
            completed: log.hook(.completed), interrupted: log.hook(.interrupted), terminated: log.hook(.terminated),
            disposed: log.hook(.disposed), value: log.hook(.value))
    }
}

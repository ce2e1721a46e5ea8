// Producers made from async code, and async forms of first(), last(), single() and wait().
//
// The async forms have their own names (`firstResult()` …): Swift prefers an async overload in
// an async function, so an async `first()` would stop ported code that calls the blocking
// `first()` there from compiling.

extension SignalProducer {
    /// A producer that runs `operation` in a new task when started, then sends its result and
    /// completes, or fails with what it throws.
    ///
    /// Disposing the run cancels the task; the producer sends nothing after that (the run has
    /// been interrupted), whatever the task does once it notices.
    ///
    /// ```swift
    /// let profile = SignalProducer { () async throws(APIError) -> Profile in try await api.profile() }
    /// ```
    public init(_ operation: @escaping @Sendable () async throws(Error) -> Value) {
        self.init { observer, lifetime in
            let task = Task {
                do throws(Error) {
                    let value = try await operation()
                    observer.send(value: value)
                    observer.sendCompleted()
                } catch {
                    observer.send(error: error)
                }
            }
            lifetime.observeEnded { task.cancel() }
        }
    }

    /// A producer that iterates `sequence` in a new task when started: each element is a value,
    /// the end of the sequence completes the run, and what it throws fails it.
    ///
    /// Disposing the run cancels the task: the iteration asks for no element after that, and a
    /// sequence that handles cancellation (such as `AsyncStream`) ends its pending wait at once.
    public init<S: AsyncSequence & Sendable>(_ sequence: S) where S.Element == Value, S.Failure == Error {
        self.init { observer, lifetime in
            let task = Task {
                do throws(Error) {
                    var iterator = sequence.makeAsyncIterator()
                    while !Task.isCancelled, let value = try await iterator.next(isolation: nil) {
                        observer.send(value: value)
                    }
                    observer.sendCompleted()
                } catch {
                    observer.send(error: error)
                }
            }
            lifetime.observeEnded { task.cancel() }
        }
    }

    /// Starts the producer and suspends until its first value or failure; the run is disposed
    /// once it has one. The async form of the blocking `first()`.
    ///
    /// - Returns: The first value, the failure, or `nil` if the run ended without either.
    public func firstResult() async -> Result<Value, Error>? {
        await take(first: 1).singleResult()
    }

    /// Starts the producer and suspends until it terminates. The async form of the blocking
    /// `single()`.
    ///
    /// - Returns: The only value, or the failure; `nil` if the run sent no value or more than
    ///   one, or was interrupted.
    public func singleResult() async -> Result<Value, Error>? {
        var first: Value?
        var count = 0
        for await event in take(first: 2).materialize().values {
            switch event {
            case let .value(value):
                count += 1
                first = value
            case let .failed(error):
                return .failure(error)
            case .completed:
                return count == 1 ? first.map { .success($0) } : nil
            case .interrupted:
                return nil
            }
        }
        return nil
    }

    /// Starts the producer and suspends until it terminates. The async form of the blocking
    /// `last()`.
    ///
    /// - Returns: The last value, or the failure; `nil` if it sent no value.
    public func lastResult() async -> Result<Value, Error>? {
        await take(last: 1).singleResult()
    }

    /// Starts the producer and suspends until it terminates, keeping every value.
    ///
    /// - Returns: The values in order, or the failure; `nil` if the run was interrupted.
    public func allValues() async -> Result<[Value], Error>? {
        var values: [Value] = []
        for await event in materialize().values {
            switch event {
            case let .value(value): values.append(value)
            case let .failed(error): return .failure(error)
            case .completed: return .success(values)
            case .interrupted: return nil
            }
        }
        return nil
    }

    /// Starts the producer and suspends until it terminates. The async form of the blocking
    /// `wait()`.
    ///
    /// - Returns: `.success` on completion (or interruption), `.failure` on failure.
    public func completion() async -> Result<(), Error> {
        for await event in materialize().values {
            if case let .failed(error) = event { return .failure(error) }
        }
        return .success(())
    }
}

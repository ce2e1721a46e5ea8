// first(), last(), single(), wait(): start a producer and block the caller for its outcome.

extension SignalProducer {
    /// Starts the producer and blocks until its first value or failure.
    ///
    /// - Returns: The first value, the failure, or `nil` if the run ended without either.
    /// - Note: Blocks the calling thread; the run must make progress on another thread or
    ///   complete synchronously.
    public func first() -> Result<Value, Error>? {
        take(first: 1).single()
    }

    /// Starts the producer and blocks until it terminates.
    ///
    /// - Returns: The only value, or the failure; `nil` if the run sent no value or more than
    ///   one, or was interrupted.
    public func single() -> Result<Value, Error>? {
        let done = _Lock.make()
        var finished = false  // Protected by done.
        var result: Result<Value, Error>?  // Protected by done.
        var count = 0  // Protected by done.
        take(first: 2).start { event in
            done.withLock {
                switch event {
                case let .value(value):
                    count += 1
                    result = count == 1 ? .success(value) : nil
                case let .failed(error):
                    result = .failure(error)
                    finished = true
                case .completed, .interrupted:
                    if case .interrupted = event { result = nil }
                    finished = true
                }
                if finished { done.broadcast() }
            }
        }
        return done.withLock {
            while !finished { done.wait() }
            return result
        }
    }

    /// Starts the producer and blocks until it terminates.
    ///
    /// - Returns: The last value, or the failure; `nil` if it sent no value.
    public func last() -> Result<Value, Error>? {
        take(last: 1).single()
    }

    /// Starts the producer and blocks until it terminates.
    ///
    /// - Returns: `.success` on completion (or interruption), `.failure` on failure.
    public func wait() -> Result<(), Error> {
        then(SignalProducer<(), Error>(value: ())).last() ?? .success(())
    }
}

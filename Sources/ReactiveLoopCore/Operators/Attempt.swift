// attempt and attemptMap: per-value work that may fail the stream.

@usableFromInline
enum _Attempt {
    /// Maps each value with `transform`; a `.failure` fails the stream and ends it.
    @inlinable
    static func map<V, E, U>(
        _ transform: @escaping (V) -> Result<U, E>
    ) -> (Signal<U, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var failed = false  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                guard !failed else { return }
                switch event {
                case let .value(value):
                    switch transform(value) {
                    case let .success(output): downstream.send(value: output)
                    case let .failure(error):
                        failed = true
                        downstream.send(error: error)
                    }
                case let .failed(error): downstream.send(error: error)
                case .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }
}

extension Signal {
    /// Runs `action` with each value; a `.failure` fails the signal, otherwise the value passes.
    public func attempt(_ action: @escaping (Value) -> Result<(), Error>) -> Signal<Value, Error> {
        attemptMap { value in action(value).map { value } }
    }

    /// Maps each value with `transform`; a `.failure` fails the signal.
    public func attemptMap<U>(_ transform: @escaping (Value) -> Result<U, Error>) -> Signal<U, Error> {
        _lift(_Attempt.map(transform))
    }
}

extension Signal where Error == Never {
    /// Runs the throwing `action` with each value; a thrown error fails the result.
    public func attempt(_ action: @escaping (Value) throws -> Void) -> Signal<Value, any Swift.Error> {
        _promoteError((any Swift.Error).self).attempt(action)
    }

    /// Maps each value with the throwing `transform`; a thrown error fails the result.
    public func attemptMap<U>(_ transform: @escaping (Value) throws -> U) -> Signal<U, any Swift.Error> {
        _promoteError((any Swift.Error).self).attemptMap(transform)
    }
}

extension Signal where Error == any Swift.Error {
    /// Runs the throwing `action` with each value; a thrown error fails the signal.
    public func attempt(_ action: @escaping (Value) throws -> Void) -> Signal<Value, any Swift.Error> {
        attemptMap { value in
            try action(value)
            return value
        }
    }

    /// Maps each value with the throwing `transform`; a thrown error fails the signal.
    public func attemptMap<U>(_ transform: @escaping (Value) throws -> U) -> Signal<U, any Swift.Error> {
        attemptMap { value in Result { try transform(value) } }
    }
}

extension SignalProducer {
    /// Runs `action` with each value; a `.failure` fails the run.
    public func attempt(_ action: @escaping (Value) -> Result<(), Error>) -> SignalProducer<Value, Error> {
        attemptMap { value in action(value).map { value } }
    }

    /// Maps each value with `action`; a `.failure` fails the run.
    public func attemptMap<U>(_ action: @escaping (Value) -> Result<U, Error>) -> SignalProducer<U, Error> {
        _lift(_Attempt.map(action))
    }
}

extension SignalProducer where Error == Never {
    /// Runs the throwing `action` with each value; a thrown error fails the run.
    public func attempt(_ action: @escaping (Value) throws -> Void) -> SignalProducer<Value, any Swift.Error> {
        _promoteError((any Swift.Error).self).attempt(action)
    }

    /// Maps each value with the throwing `action`; a thrown error fails the run.
    public func attemptMap<U>(_ action: @escaping (Value) throws -> U) -> SignalProducer<U, any Swift.Error> {
        _promoteError((any Swift.Error).self).attemptMap(action)
    }
}

extension SignalProducer where Error == any Swift.Error {
    /// Runs the throwing `action` with each value; a thrown error fails the run.
    public func attempt(_ action: @escaping (Value) throws -> Void) -> SignalProducer<Value, any Swift.Error> {
        attemptMap { value in
            try action(value)
            return value
        }
    }

    /// Maps each value with the throwing `transform`; a thrown error fails the run.
    public func attemptMap<U>(_ transform: @escaping (Value) throws -> U) -> SignalProducer<U, any Swift.Error> {
        attemptMap { value in Result { try transform(value) } }
    }
}

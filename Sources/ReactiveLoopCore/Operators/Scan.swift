// scan, scanMap and reduce: accumulate values into a result.

@usableFromInline
enum _Scan {
    /// Sends `next`'s output for each value, carrying `State` from one value to the next.
    @inlinable
    static func map<V, E, State, U>(
        into initial: State, _ next: @escaping (inout State, V) -> U
    ) -> (Signal<U, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var state = initial  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                switch event {
                case let .value(value): downstream.send(value: next(&state, value))
                case let .failed(error): downstream.send(error: error)
                case .completed: downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }

    /// Accumulates silently; on completion sends the result, then completes.
    @inlinable
    static func reduce<V, E, U>(
        into initial: U, _ next: @escaping (inout U, V) -> Void
    ) -> (Signal<U, E>.Observer, Lifetime) -> Signal<V, E>.Observer {
        { downstream, _ in
            var result = initial  // Confined to the serial delivery of one run.
            return Signal<V, E>.Observer { event in
                switch event {
                case let .value(value): next(&result, value)
                case let .failed(error): downstream.send(error: error)
                case .completed:
                    downstream.send(value: result)
                    downstream.sendCompleted()
                case .interrupted: downstream.sendInterrupted()
                }
            }
        }
    }
}

extension Signal {
    /// Sends each partial result of combining the values with `nextPartialResult`, starting
    /// from `initialResult`.
    public func scan<U>(_ initialResult: U, _ nextPartialResult: @escaping (U, Value) -> U) -> Signal<U, Error> {
        scan(into: initialResult) { result, value in result = nextPartialResult(result, value) }
    }

    /// Sends each partial result of combining the values in place with `nextPartialResult`.
    public func scan<U>(into initialResult: U, _ nextPartialResult: @escaping (inout U, Value) -> Void) -> Signal<
        U, Error
    > {
        _lift(
            _Scan.map(into: initialResult) { result, value in
                nextPartialResult(&result, value)
                return result
            })
    }

    /// Carries a state from value to value and sends what `next` makes of each.
    public func scanMap<State, U>(_ initialState: State, _ next: @escaping (State, Value) -> (State, U)) -> Signal<
        U, Error
    > {
        scanMap(into: initialState) { state, value in
            let (newState, output) = next(state, value)
            state = newState
            return output
        }
    }

    /// Carries a state, changed in place, from value to value and sends what `next` returns.
    public func scanMap<State, U>(into initialState: State, _ next: @escaping (inout State, Value) -> U) -> Signal<
        U, Error
    > {
        _lift(_Scan.map(into: initialState, next))
    }

    /// Sends only the final result of combining every value, when the signal completes (the
    /// initial result if there were no values). A failure or interruption sends no result.
    public func reduce<U>(_ initialResult: U, _ nextPartialResult: @escaping (U, Value) -> U) -> Signal<U, Error> {
        reduce(into: initialResult) { result, value in result = nextPartialResult(result, value) }
    }

    /// Sends only the final result of combining every value in place, on completion.
    public func reduce<U>(into initialResult: U, _ nextPartialResult: @escaping (inout U, Value) -> Void) -> Signal<
        U, Error
    > {
        _lift(_Scan.reduce(into: initialResult, nextPartialResult))
    }
}

extension SignalProducer {
    /// Sends each partial result of combining the values with `nextPartialResult`.
    public func scan<U>(_ initialResult: U, _ nextPartialResult: @escaping (U, Value) -> U) -> SignalProducer<U, Error>
    {
        scan(into: initialResult) { result, value in result = nextPartialResult(result, value) }
    }

    /// Sends each partial result of combining the values in place with `nextPartialResult`.
    public func scan<U>(
        into initialResult: U, _ nextPartialResult: @escaping (inout U, Value) -> Void
    ) -> SignalProducer<U, Error> {
        _lift(
            _Scan.map(into: initialResult) { result, value in
                nextPartialResult(&result, value)
                return result
            })
    }

    /// Carries a state from value to value and sends what `next` makes of each.
    public func scanMap<State, U>(
        _ initialState: State, _ next: @escaping (State, Value) -> (State, U)
    ) -> SignalProducer<U, Error> {
        scanMap(into: initialState) { state, value in
            let (newState, output) = next(state, value)
            state = newState
            return output
        }
    }

    /// Carries a state, changed in place, from value to value and sends what `next` returns.
    public func scanMap<State, U>(
        into initialState: State, _ next: @escaping (inout State, Value) -> U
    ) -> SignalProducer<U, Error> {
        _lift(_Scan.map(into: initialState, next))
    }

    /// Sends only the final result of combining every value, on completion.
    public func reduce<U>(_ initialResult: U, _ nextPartialResult: @escaping (U, Value) -> U) -> SignalProducer<
        U, Error
    > {
        reduce(into: initialResult) { result, value in result = nextPartialResult(result, value) }
    }

    /// Sends only the final result of combining every value in place, on completion.
    public func reduce<U>(
        into initialResult: U, _ nextPartialResult: @escaping (inout U, Value) -> Void
    ) -> SignalProducer<U, Error> {
        _lift(_Scan.reduce(into: initialResult, nextPartialResult))
    }
}

// then, flatMapError, repeat and retry: runs that follow other runs.

extension SignalProducer {
    /// Waits for this producer to complete, ignoring its values, then runs `replacement`.
    /// A failure of this producer fails the run; `replacement` is not started.
    public func then<U>(_ replacement: SignalProducer<U, Error>) -> SignalProducer<U, Error> {
        _then(replacement)
    }

    /// The one implementation behind every `then` overload. With equal value types it makes
    /// one chain (see `_ConcatChain`), so long `then` chains start in constant stack.
    func _then<U>(_ replacement: SignalProducer<U, Error>) -> SignalProducer<U, Error> {
        if let sameType = replacement as? SignalProducer<Value, Error> {
            let chain = _ConcatChain.pair(
                _ConcatChain(node: .ignoringValues(_ConcatChain(self))), _ConcatChain(sameType))
            return SignalProducer(chain: chain) as! SignalProducer<U, Error>
        }
        return compactMap { _ -> U? in nil }.concat(replacement)
    }

    /// Runs `replacement` after this producer completes; see `then(_:)`.
    public func then<Replacement: SignalProducerConvertible>(_ replacement: Replacement) -> SignalProducer<
        Replacement.Value, Error
    >
    where Replacement.Error == Error {
        _then(replacement.producer)
    }

    /// Runs a `replacement` that cannot fail after this producer completes.
    public func then<U>(_ replacement: SignalProducer<U, Never>) -> SignalProducer<U, Error> {
        _then(replacement._promoteError(Error.self))
    }

    /// Runs a `replacement` that cannot fail after this producer completes.
    public func then<Replacement: SignalProducerConvertible>(_ replacement: Replacement) -> SignalProducer<
        Replacement.Value, Error
    >
    where Replacement.Error == Never {
        _then(replacement.producer._promoteError(Error.self))
    }

    /// Runs `replacement` after this producer completes.
    public func then(_ replacement: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        _then(replacement)
    }

    /// Runs `replacement` after this producer completes.
    public func then<Replacement: SignalProducerConvertible>(_ replacement: Replacement) -> SignalProducer<Value, Error>
    where Replacement.Value == Value, Replacement.Error == Error {
        _then(replacement.producer)
    }

    /// Replaces a failure with the run of the producer `transform` makes from the error.
    public func flatMapError<F>(_ transform: @escaping (Error) -> SignalProducer<Value, F>) -> SignalProducer<Value, F>
    {
        SignalProducer<Value, F>._serialized { sink, lifetime in
            let replacement = SerialDisposable()
            lifetime += replacement
            self._run(
                Signal<Value, Error>.Observer { event in
                    switch event {
                    case let .value(value): sink.send(.value(value))
                    case let .failed(error): replacement.inner = transform(error).start(sink.input)
                    case .completed: sink.send(.completed)
                    case .interrupted: sink.send(.interrupted)
                    }
                }, lifetime)
        }
    }

    /// Replaces a failure with the run of the stream `transform` makes from the error.
    public func flatMapError<Inner: SignalProducerConvertible>(
        _ transform: @escaping (Error) -> Inner
    ) -> SignalProducer<Value, Inner.Error> where Inner.Value == Value {
        flatMapError { transform($0).producer }
    }

    /// Runs the producer `count` times in a row, each after the previous one completed. A
    /// failure or interruption ends the whole. `repeat(0)` completes at once.
    ///
    /// Each run starts when the previous one completes: starting costs the same for any
    /// `count`, and so does memory.
    ///
    /// - Precondition: `count >= 0`.
    public func `repeat`(_ count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "repeat(_:): count must be >= 0, got \(count)")
        guard count > 0 else { return .empty }
        guard count > 1 else { return self }
        return _restarting {
            var remaining = count - 1
            return { event in
                guard case .completed = event, remaining > 0 else { return false }
                remaining -= 1
                return true
            }
        }
    }

    /// Starts the producer again after a failure, up to `count` more times; the last failure
    /// is forwarded.
    ///
    /// - Precondition: `count >= 0`.
    public func retry(upTo count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "retry(upTo:): count must be >= 0, got \(count)")
        guard count > 0 else { return self }
        return _restarting {
            var remaining = count
            return { event in
                guard case .failed = event, remaining > 0 else { return false }
                remaining -= 1
                return true
            }
        }
    }

    /// Runs this producer again after each terminal event for which the run's decision (made
    /// fresh by `makeDecision` for every start) says so; other events are forwarded.
    ///
    /// A run that ends synchronously asks for its successor from inside its own start: the
    /// trampoline starts the successor after that start returns, so any number of synchronous
    /// runs take constant stack.
    func _restarting(
        _ makeDecision: @escaping () -> (Signal<Value, Error>.Event) -> Bool
    ) -> SignalProducer<Value, Error> {
        SignalProducer(.run) { downstream, lifetime in
            let restartsAfter = makeDecision()  // Runs are sequential: confined to the current one.
            let current = SerialDisposable()
            lifetime += current
            let loop = _RestartLoop()
            func attempt() {
                guard !lifetime.hasEnded else { return downstream.sendInterrupted() }
                current.inner = self.start(
                    Signal.Observer { event in
                        if event.isTerminating && !lifetime.hasEnded && restartsAfter(event) {
                            _Trampoline.run(owner: loop, attempt)
                        } else {
                            downstream.send(event)
                        }
                    })
            }
            _Trampoline.run(owner: loop, attempt)
        }
    }
}

/// The identity of one run of `_restarting`, for its trampoline.
final class _RestartLoop {}

extension SignalProducer where Error == Never {
    /// Runs `replacement`, which can fail, after this producer completes.
    public func then<U, F>(_ replacement: SignalProducer<U, F>) -> SignalProducer<U, F> {
        _promoteError(F.self)._then(replacement)
    }

    /// Runs `replacement`, which can fail, after this producer completes.
    public func then<Replacement: SignalProducerConvertible>(
        _ replacement: Replacement
    ) -> SignalProducer<Replacement.Value, Replacement.Error> {
        _promoteError(Replacement.Error.self)._then(replacement.producer)
    }

    /// Runs `replacement` after this producer completes.
    public func then<U>(_ replacement: SignalProducer<U, Never>) -> SignalProducer<U, Never> {
        _then(replacement)
    }

    /// Runs `replacement` after this producer completes.
    public func then<Replacement: SignalProducerConvertible>(_ replacement: Replacement) -> SignalProducer<
        Replacement.Value, Never
    >
    where Replacement.Error == Never {
        _then(replacement.producer)
    }

    /// Runs `replacement` after this producer completes.
    public func then(_ replacement: SignalProducer<Value, Never>) -> SignalProducer<Value, Never> {
        _then(replacement)
    }

    /// Runs `replacement` after this producer completes.
    public func then<Replacement: SignalProducerConvertible>(_ replacement: Replacement) -> SignalProducer<Value, Never>
    where Replacement.Value == Value, Replacement.Error == Never {
        _then(replacement.producer)
    }
}

extension Signal {
    /// Replaces a failure with the run of the producer `transform` makes from the error.
    public func flatMapError<F>(_ transform: @escaping (Error) -> SignalProducer<Value, F>) -> Signal<Value, F> {
        SignalProducer(self).flatMapError(transform)._startAsSignal()
    }

    /// Replaces a failure with the run of the stream `transform` makes from the error.
    public func flatMapError<Inner: SignalProducerConvertible>(
        _ transform: @escaping (Error) -> Inner
    ) -> Signal<Value, Inner.Error> where Inner.Value == Value {
        flatMapError { transform($0).producer }
    }
}

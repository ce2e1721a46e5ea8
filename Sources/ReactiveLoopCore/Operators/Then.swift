// then: a run after another one completes, its values ignored.

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
}

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

// Compile-time guards against observing what cannot happen, as in ReactiveSwift: observing
// only values of a stream that can fail is an error (its failure would go unnoticed), and
// observing the failure of a stream that cannot fail, or the values of one that cannot send
// any, is a warning. None of these bodies can run: they exist for their diagnostics.

extension Signal {
    /// Unavailable: this signal can fail, and a values-only observer would miss the failure.
    @available(*, unavailable, message: "Transform the error to `Never` beforehand, or use `observeResult` instead")
    @discardableResult
    public func observeValues(_ action: @escaping (Value) -> Void) -> (any Disposable)? {
        _argumentFailure("observeValues(_:) on a signal that can fail is unavailable")
    }
}

extension SignalProducer {
    /// Unavailable: this producer can fail, and a values-only observer would miss the failure.
    @available(*, unavailable, message: "Transform the error to `Never` beforehand, or use `startWithResult` instead")
    @discardableResult
    public func startWithValues(_ action: @escaping (Value) -> Void) -> any Disposable {
        _argumentFailure("startWithValues(_:) on a producer that can fail is unavailable")
    }
}

extension Signal where Error == Never {
    /// Never called: a signal of error type `Never` cannot fail.
    @available(*, deprecated, message: "Observer is never invoked - error type `Never` is uninstantiable")
    @discardableResult
    public func observeFailed(_ action: @escaping (Error) -> Void) -> (any Disposable)? {
        observe(Observer(failed: action))
    }
}

extension SignalProducer where Error == Never {
    /// Never called: a producer of error type `Never` cannot fail.
    @available(*, deprecated, message: "Observer is never invoked - error type `Never` is uninstantiable")
    @discardableResult
    public func startWithFailed(_ action: @escaping (Error) -> Void) -> any Disposable {
        start(Signal.Observer(failed: action))
    }
}

extension Signal where Value == Never, Error == Never {
    /// Never called: a signal of value type `Never` cannot send values.
    @available(*, deprecated, message: "Observer is never invoked - value type `Never` is uninstantiable")
    @discardableResult
    public func observeValues(_ action: @escaping (Value) -> Void) -> (any Disposable)? {
        observe(Observer(values: action))
    }
}

extension SignalProducer where Value == Never, Error == Never {
    /// Never called: a producer of value type `Never` cannot send values.
    @available(*, deprecated, message: "Observer is never invoked - value type `Never` is uninstantiable")
    @discardableResult
    public func startWithValues(_ action: @escaping (Value) -> Void) -> any Disposable {
        start(Signal.Observer(values: action))
    }
}

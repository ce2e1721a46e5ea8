/// A hot stream of events: values over time, then at most one terminal event. Every observer
/// sees the same events, from the moment it starts observing.
///
/// A signal stays alive until its input sends a terminal event, or until it has no observers
/// and nothing else refers to it; then the resources of its generator are released.
///
/// - Note: See `docs/APIContracts.md` for the delivery guarantees: events are serial, a
///   reentrant send is queued instead of deadlocking, and a terminal event comes exactly once.
public final class Signal<Value, Error: Swift.Error> {
    @usableFromInline
    enum Source {
        /// A signal with its own observers.
        case core(_SignalCore<Value, Error>)
        /// A signal with the reference core (tests and benchmarks; see `_SignalCoreKind`).
        case locked(_LockedSignalCore<Value, Error>)
        /// A stateless view of another signal: observing it observes the upstream signal
        /// through an adapter, so a chain of `map`/`filter` costs no signal per hop.
        case view((Observer) -> (any Disposable)?)
    }

    @usableFromInline let source: Source

    @usableFromInline
    init(source: Source) {
        self.source = source
    }

    /// Creates a signal and runs `generator` at once with its input observer and a lifetime
    /// that ends when the signal terminates (or is released with no observers).
    ///
    /// - Parameter generator: Sets up what sends events to the observer; attach its resources to
    ///   the lifetime so they are released when the signal ends.
    @inlinable
    public convenience init(_ generator: (Observer, Lifetime) -> Void) {
        let (lifetime, token) = Lifetime.make()
        let (source, input) = Self.makeCore(resources: AnyDisposable(token.dispose))
        self.init(source: source)
        generator(input, lifetime)
    }

    /// A new core (of the kind `_SignalCoreKind.current` selects) and its input observer;
    /// `resources` are disposed when the signal terminates.
    @inlinable
    static func makeCore(resources: (any Disposable)?) -> (Source, Observer) {
        if _slowPath(_SignalCoreKindUsesLocks()) {
            let core = _LockedSignalCore<Value, Error>()
            if let resources { core.setResources(resources) }
            return (.locked(core), core.makeInput())
        }
        let core = _SignalCore<Value, Error>()
        if let resources { core.setResources(resources) }
        return (.core(core), core.makeInput())
    }

    deinit {
        switch source {
        case let .core(core): core.signalReleased()
        case let .locked(core): core.signalReleased()
        case .view: break
        }
    }

    /// Creates a signal and the observer that sends its events.
    ///
    /// - Parameter disposable: Disposed when the signal terminates.
    /// - Returns: The signal (`output`) and its input observer (`input`). Releasing `input`
    ///   without terminating the signal interrupts it.
    @inlinable
    public static func pipe(disposable: (any Disposable)? = nil) -> (output: Signal, input: Observer) {
        let (source, input) = makeCore(resources: disposable)
        return (Signal(source: source), input)
    }

    /// A signal that never sends anything.
    public static var never: Signal {
        Signal { observer, lifetime in lifetime.observeEnded { _ = observer } }
    }

    /// A signal that has already completed: observers receive `interrupted` at once, like any
    /// observer of a terminated signal.
    public static var empty: Signal {
        Signal { observer, _ in observer.sendCompleted() }
    }

    // MARK: Observing

    /// Observes the signal with `observer`.
    ///
    /// - Returns: A disposable that stops the observation, or `nil` if the signal has already
    ///   terminated, in which case `observer` has just received `interrupted`.
    @discardableResult
    @inlinable
    public func observe(_ observer: Observer) -> (any Disposable)? {
        switch source {
        case let .core(core): return core.observe(observer)
        case let .locked(core): return core.observe(observer)
        case let .view(attach): return attach(observer)
        }
    }

    /// Observes the signal with a closure that receives every event; see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observe(_ action: @escaping Observer.Action) -> (any Disposable)? {
        // A signal with its own core registers the closure itself: no observer object.
        if case let .core(core) = source { return core.observe(events: action) }
        return observe(Observer(action))
    }

    /// Observes values as `.success` and a failure as `.failure`; see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observeResult(_ action: @escaping (Result<Value, Error>) -> Void) -> (any Disposable)? {
        observe(Observer(value: { action(.success($0)) }, failed: { action(.failure($0)) }))
    }

    /// Observes the `completed` event only; see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observeCompleted(_ action: @escaping () -> Void) -> (any Disposable)? {
        observe(Observer(completed: action))
    }

    /// Observes the `failed` event only; see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observeFailed(_ action: @escaping (Error) -> Void) -> (any Disposable)? {
        observe(Observer(failed: action))
    }

    /// Observes the `interrupted` event only. A terminated signal delivers `interrupted` at
    /// once; see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observeInterrupted(_ action: @escaping () -> Void) -> (any Disposable)? {
        observe(Observer(interrupted: action))
    }
}

extension Signal where Error == Never {
    /// Observes values only (the signal cannot fail); see `observe(_:)`.
    @discardableResult
    @inlinable
    public func observeValues(_ action: @escaping (Value) -> Void) -> (any Disposable)? {
        if case let .core(core) = source { return core.observe(values: action) }
        return observe(Observer(values: action))
    }
}

extension Signal: @unchecked Sendable {}  // Immutable; the core is thread safe (see _SignalCore).

// MARK: Building operators

extension Signal {
    /// A stateless operator: observing the result observes `self` through `adapter`, which turns
    /// each downstream observer into an upstream one. Nothing is subscribed until then, and no
    /// intermediate signal exists.
    @inlinable
    func _view<U, F>(_ adapter: @escaping (Signal<U, F>.Observer) -> Observer) -> Signal<U, F> {
        Signal<U, F>(source: .view { [self] downstream in self.observe(adapter(downstream)) })
    }

    /// A stateful operator with ReactiveSwift's semantics: it observes `self` now, once, and all
    /// its observers share its state. `adapter` gets the output's input observer and lifetime.
    @inlinable
    func _lift<U, F>(_ adapter: @escaping (Signal<U, F>.Observer, Lifetime) -> Observer) -> Signal<U, F> {
        Signal<U, F> { output, lifetime in
            lifetime._attachDisposing(self.observe(adapter(output, lifetime)))
        }
    }
}

/// A type that provides a signal (used to constrain generic code).
public protocol SignalProtocol<Value, Error>: AnyObject {
    /// The type of values.
    associatedtype Value
    /// The type of error.
    associatedtype Error: Swift.Error
    /// The signal itself.
    var signal: Signal<Value, Error> { get }
}

extension Signal: SignalProtocol {
    /// The signal itself.
    public var signal: Signal<Value, Error> { self }
}

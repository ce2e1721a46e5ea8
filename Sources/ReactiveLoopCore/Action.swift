import Synchronization

/// A failure of an `Action` run.
public enum ActionError<Error: Swift.Error>: Swift.Error {
    /// The action was disabled, or already executing, when it was applied.
    case disabled
    /// The action's producer failed.
    case producerFailed(Error)
}

extension ActionError: Equatable where Error: Equatable {}
extension ActionError: @unchecked Sendable {}  // Errors are handed between threads by design.

/// A repeatable piece of work that runs one execution at a time.
///
/// `apply(_:)` returns a producer; starting it runs the work if the action is enabled and not
/// executing, and fails with `ActionError.disabled` otherwise. Every execution's events are also
/// sent to `events`, `values`, `errors` and `completed`.
public final class Action<Input, Output, Error: Swift.Error> {
    /// Makes an execution's producer from the state's value (a `_ActionValue<State.Value>`).
    @usableFromInline let execute: (AnyObject, Input) -> SignalProducer<Output, Error>
    /// The state, without a property around it: only `isExecuting` and `isEnabled` observe it.
    @usableFromInline let state: _PropertyStorage<_ActionState>
    @usableFromInline let eventsInput: Signal<Signal<Output, Error>.Event, Never>.Observer
    @usableFromInline let disabledErrorsInput: Signal<(), Never>.Observer
    /// The observer of the run whose execution is running, or nil: an action runs one execution
    /// at a time, so it keeps that run's observer itself, and an execution needs no object of
    /// its own.
    ///
    /// Set by `_execute` inside the state lock that marks the action executing, and cleared by
    /// the execution's terminal event inside the lock that marks it idle: the next execution's
    /// write follows that lock, and the running execution's events, which are serial, read it
    /// in between. This relies on a producer sending nothing after its terminal event, which
    /// every producer and operator of the module ensures: an event after it would reach the
    /// next execution's run.
    @usableFromInline @exclusivity(unchecked) var _executionObserver: Signal<Output, ActionError<Error>>.Observer?
    /// Whether `isExecuting` and `isEnabled` exist, and so observe the state: until then a change
    /// of the state by an apply or an execution's end delivers nothing. Set once, while owning the
    /// state's delivery; read by those changes while they own it (or, reentrant, inside one of
    /// its deliveries, which only happen once it is set).
    @usableFromInline @exclusivity(unchecked) var _stateObserved = false
    /// The property the action was created with: the action keeps it alive, as in ReactiveSwift.
    private let userState: AnyObject
    /// `isExecuting` and `isEnabled`, made the first time either is asked for: until then a
    /// change of the state updates nothing else.
    private let derived = AtomicLazyReference<_ActionDerivedState>()

    /// Ends when the action goes away.
    public let lifetime: Lifetime
    /// Every event of every execution.
    public let events: Signal<Signal<Output, Error>.Event, Never>
    /// Every value of every execution.
    public let values: Signal<Output, Never>
    /// Every failure of every execution.
    public let errors: Signal<Error, Never>
    /// A value each time the action is applied while disabled or executing.
    public let disabledErrors: Signal<(), Never>
    /// A value each time an execution completes.
    public let completed: Signal<(), Never>

    /// Whether an execution is running.
    ///
    /// The same property on every read. It sends a value only when the answer changes.
    public var isExecuting: Property<Bool> { derivedState.isExecuting }

    /// Whether applying the action now would run it: enabled by its condition and not executing.
    ///
    /// The same property on every read. It sends a value only when the answer changes.
    public var isEnabled: Property<Bool> { derivedState.isEnabled }

    /// Creates an action whose enabledness and work depend on the value of `state`.
    ///
    /// - Parameters:
    ///   - state: A property the work reads; the action keeps it alive.
    ///   - isEnabled: Whether the action is enabled for a value of `state`.
    ///   - execute: Makes the producer of one execution from the state's value and the input.
    public init<State: PropertyProtocol>(
        state: State, enabledIf isEnabled: @escaping (State.Value) -> Bool,
        execute: @escaping (State.Value, Input) -> SignalProducer<Output, Error>
    ) {
        self.userState = state
        lifetime = Lifetime(_target: nil)  // Ended by this object's deinit: no token needed.
        let initial = state.value
        // The state's value is always boxed as `_ActionValue<State.Value>`: no dynamic cast.
        self.execute = { value, input in
            execute(unsafeDowncast(value, to: _ActionValue<State.Value>.self).value, input)
        }
        self.state = _PropertyStorage.make(
            _ActionState(isUserEnabled: isEnabled(initial), value: _ActionValue(initial)))
        (events, eventsInput) = Signal.pipe()
        (disabledErrors, disabledErrorsInput) = Signal.pipe()
        values = events.compactMap { $0.value }
        errors = events.compactMap { $0.error }
        completed = events.compactMap { $0.isCompleted ? () : nil }
        // Held strongly: the observation ends with the action's lifetime.
        state.signal.take(during: lifetime).observeValues { [storage = self.state] value in
            storage.modify { state in
                state.value = _ActionValue(value)
                state.isUserEnabled = isEnabled(value)
            }
        }
    }

    /// Creates an action whose work depends on the value of `state`; it is always enabled when
    /// not executing.
    public convenience init<P: PropertyProtocol>(
        state: P, execute: @escaping (P.Value, Input) -> SignalProducer<Output, Error>
    ) {
        self.init(state: state, enabledIf: { _ in true }, execute: execute)
    }

    /// Creates an action that is enabled while `isEnabled` is `true` and it is not executing.
    public convenience init<P: PropertyProtocol>(
        enabledIf isEnabled: P, execute: @escaping (Input) -> SignalProducer<Output, Error>
    ) where P.Value == Bool {
        self.init(state: isEnabled, enabledIf: { $0 }, execute: { _, input in execute(input) })
    }

    /// Creates an action that is enabled while `state` holds a value (and it is not executing);
    /// the work gets the unwrapped value.
    public convenience init<P: PropertyProtocol, T>(
        unwrapping state: P, execute: @escaping (T, Input) -> SignalProducer<Output, Error>
    ) where P.Value == T? {
        self.init(state: state, enabledIf: { $0 != nil }) { value, input in execute(value!, input) }
    }

    /// Creates an action that is enabled while `state` holds a valid (or coerced) value; the
    /// work gets that value.
    public convenience init<T, E>(
        validated state: ValidatingProperty<T, E>, execute: @escaping (T, Input) -> SignalProducer<Output, Error>
    ) {
        self.init(unwrapping: state.result.map { $0.value }, execute: execute)
    }

    /// Creates an action that is enabled whenever it is not executing.
    public convenience init(execute: @escaping (Input) -> SignalProducer<Output, Error>) {
        self.init(enabledIf: Property(value: true), execute: execute)
    }

    deinit {
        derived.load()?.complete()
        lifetime._end()
        eventsInput.sendCompleted()
        disabledErrorsInput.sendCompleted()
    }

    /// A producer that, when started, runs one execution with `input`.
    ///
    /// If the action is disabled or executing at that moment, the run fails at once with
    /// `ActionError.disabled` and `disabledErrors` sends a value. Otherwise `isExecuting` becomes
    /// `true` until the execution terminates; disposing the run interrupts the execution.
    ///
    /// As in ReactiveSwift, the producer holds the action, and so does a running execution: an
    /// action stays alive while a producer of its applies is kept or one of its executions runs.
    ///
    /// Inlinable, so that the run specializes for the action's types in the caller.
    @inlinable
    public func apply(_ input: Input) -> SignalProducer<Output, ActionError<Error>> {
        // The run is the execution's run: its events are serial, as every producer's are, and
        // it ends with the same lifetime, so the apply needs no serializing sink of its own.
        SignalProducer(.run) { [self] observer, lifetime in _execute(input, observer, lifetime) }
    }

    /// Starts one execution for a run of `apply(input)`, or fails the run if the action is
    /// disabled or executing.
    @inlinable
    func _execute(_ input: Input, _ observer: Signal<Output, ActionError<Error>>.Observer, _ lifetime: Lifetime) {
        // A change is delivered only once `isExecuting` or `isEnabled` observes the state: built
        // and delivered to no observer, the two changes of a round trip cost about 45 of its
        // 3,460 instructions.
        let value: AnyObject? = state.modify(delivering: { _stateObserved }) { state in
            guard state.isEnabled else { return nil }
            state.isExecuting = true
            _executionObserver = observer
            return state.value
        }
        guard let value else {
            observer.send(error: .disabled)
            disabledErrorsInput.send(value: ())
            return
        }
        // The execution's observer holds the action, as ReactiveSwift's does, so that all of its
        // events reach `events`.
        execute(value, input)._run(
            Signal<Output, Error>.Observer(
                { [self] event in _executionReceive(event) }, values: { [self] value in _executionReceive(value) }),
            lifetime)
    }

    /// Forwards a value of the running execution to its run and to `events`.
    @inlinable
    func _executionReceive(_ value: Output) {
        _executionObserver?.send(value: value)
        eventsInput.send(value: .value(value))
    }

    /// Forwards an event of the running execution to its run and to `events`. A terminal event
    /// marks the action idle before the run sees it, so that a completion handler can apply the
    /// action once more.
    @inlinable
    func _executionReceive(_ event: Signal<Output, Error>.Event) {
        guard event.isTerminating else {
            _executionObserver?.send(event.mapError(ActionError.producerFailed))
            return eventsInput.send(value: event)
        }
        guard let observer = _executionObserver else { return }
        state.modify(delivering: { _stateObserved }) { state in
            _executionObserver = nil
            state.isExecuting = false
        }
        observer.send(event.mapError(ActionError.producerFailed))
        eventsInput.send(value: event)
    }

    /// `isExecuting` and `isEnabled`, made on first use from the state's current value.
    ///
    /// Made while owning the state's delivery, so that no change is missed or seen twice: a
    /// change made before is in the initial values, one made after is delivered to the new
    /// observer.
    private var derivedState: _ActionDerivedState {
        if let made = derived.load() { return made }
        let owned = state.core.beginExclusive()
        defer { state.core.endExclusive(delivering: nil, owned: owned) }
        if let made = derived.load() { return made }
        let made = _ActionDerivedState(state.value)
        let observer = Signal<_ActionState, Never>.Observer(values: { [made] state in made.update(state) })
        _ = state.core.observe(observer, ifTerminated: .completed)
        _stateObserved = true
        return derived.storeIfNil(made)
    }

    /// A binding target that applies and starts the action with each value.
    public var bindingTarget: BindingTarget<Input> {
        BindingTarget(lifetime: lifetime) { [weak self] input in self?.apply(input).start() }
    }
}

extension Action: BindingTargetProvider {}

/// The state of an action: whether its condition allows it, whether it is executing, and the
/// value of the property it was made with. Not generic, so that the property holding it and
/// the properties derived from it are specialized in this module.
@usableFromInline
struct _ActionState {
    @usableFromInline var isUserEnabled: Bool
    @usableFromInline var isExecuting = false
    /// The state property's value, as an `_ActionValue` of its type.
    @usableFromInline var value: AnyObject

    @usableFromInline
    init(isUserEnabled: Bool, value: AnyObject) {
        self.isUserEnabled = isUserEnabled
        self.value = value
    }

    @inlinable
    var isEnabled: Bool { isUserEnabled && !isExecuting }
}

/// A value of an action's state property, boxed once per change of that property, so that an
/// apply reads it back with a pointer cast instead of a dynamic one.
@usableFromInline
final class _ActionValue<Value> {
    @usableFromInline let value: Value

    @usableFromInline
    init(_ value: Value) { self.value = value }
}

/// An action's `isExecuting` and `isEnabled`: one observer of the action's state sets each,
/// only when it changes. The state's core calls it serially, in the order of the changes.
final class _ActionDerivedState {
    let executing: _PropertyStorage<Bool>
    let enabled: _PropertyStorage<Bool>
    let isExecuting: Property<Bool>
    let isEnabled: Property<Bool>
    // Confined to the state's serial delivery.
    @exclusivity(unchecked) private var wasExecuting: Bool
    @exclusivity(unchecked) private var wasEnabled: Bool

    init(_ state: _ActionState) {
        wasExecuting = state.isExecuting
        wasEnabled = state.isEnabled
        executing = _PropertyStorage.make(wasExecuting)
        enabled = _PropertyStorage.make(wasEnabled)
        isExecuting = Property(_storage: executing)
        isEnabled = Property(_storage: enabled)
    }

    func update(_ state: _ActionState) {
        if state.isExecuting != wasExecuting {
            wasExecuting = state.isExecuting
            executing.set(wasExecuting)
        }
        if state.isEnabled != wasEnabled {
            wasEnabled = state.isEnabled
            enabled.set(wasEnabled)
        }
    }

    /// Completes both properties' streams: the action is going away.
    func complete() {
        executing.complete()
        enabled.complete()
    }
}

extension _ActionDerivedState: @unchecked Sendable {}  // See the type's documentation.

extension Action where Input == Void {
    /// A producer that, when started, runs one execution; see `apply(_:)`.
    public func apply() -> SignalProducer<Output, ActionError<Error>> {
        apply(())
    }

    /// Creates an action whose work depends on the value of `state`.
    public convenience init<P: PropertyProtocol, T>(state: P, execute: @escaping (T) -> SignalProducer<Output, Error>)
    where T == P.Value {
        self.init(state: state) { value, _ in execute(value) }
    }

    /// Creates an action that is enabled while `state` holds a value; see
    /// `init(unwrapping:execute:)`.
    public convenience init<P: PropertyProtocol, T>(
        unwrapping state: P, execute: @escaping (T) -> SignalProducer<Output, Error>
    ) where P.Value == T? {
        self.init(unwrapping: state) { value, _ in execute(value) }
    }

    /// Creates an action that is enabled while `state` holds a valid value; see
    /// `init(validated:execute:)`.
    public convenience init<T, E>(
        validated state: ValidatingProperty<T, E>, execute: @escaping (T) -> SignalProducer<Output, Error>
    ) {
        self.init(validated: state) { value, _ in execute(value) }
    }
}

// Its properties and pipes are thread safe; `_executionObserver` is handed over by the state lock.
extension Action: @unchecked Sendable {}

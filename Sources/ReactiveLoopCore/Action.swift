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
    @usableFromInline let execute: (Any, Input) -> SignalProducer<Output, Error>
    @usableFromInline let state: MutableProperty<_ActionState>
    /// The property the action was created with: the action keeps it alive, as in ReactiveSwift.
    private let userState: AnyObject
    @usableFromInline let eventsInput: Signal<Signal<Output, Error>.Event, Never>.Observer
    @usableFromInline let disabledErrorsInput: Signal<(), Never>.Observer
    private let token: Lifetime.Token
    /// The storages of `isExecuting` and `isEnabled`, completed when the action goes away.
    private let derivedStorages: (_PropertyStorage<Bool>, _PropertyStorage<Bool>)

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
    public let isExecuting: Property<Bool>
    /// Whether applying the action now would run it: enabled by its condition and not executing.
    public let isEnabled: Property<Bool>

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
        self.execute = { value, input in execute(value as! State.Value, input) }
        self.userState = state
        (lifetime, token) = Lifetime.make()
        let initial = state.value
        self.state = MutableProperty(_ActionState(isUserEnabled: isEnabled(initial), value: initial))
        (events, eventsInput) = Signal.pipe()
        (disabledErrors, disabledErrorsInput) = Signal.pipe()
        values = events.compactMap { $0.value }
        errors = events.compactMap { $0.error }
        completed = events.compactMap { $0.isCompleted ? () : nil }
        // `isExecuting` and `isEnabled` are set by one observer of the state, which the state's
        // core calls serially in the order of the changes; each is set only when it changes.
        let executing = _PropertyStorage(false)
        let enabled = _PropertyStorage(self.state.value.isEnabled)
        isExecuting = Property(_storage: executing)
        self.isEnabled = Property(_storage: enabled)
        derivedStorages = (executing, enabled)
        var wasExecuting = false
        var wasEnabled = enabled.value
        self.state.signal.observeValues { state in
            if state.isExecuting != wasExecuting {
                wasExecuting = state.isExecuting
                executing.set(wasExecuting)
            }
            if state.isEnabled != wasEnabled {
                wasEnabled = state.isEnabled
                enabled.set(wasEnabled)
            }
        }
        state.signal.take(during: lifetime).observeValues { [weak storage = self.state] value in
            storage?.modify { state in
                state.value = value
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
        derivedStorages.0.complete()
        derivedStorages.1.complete()
        token.dispose()
        eventsInput.sendCompleted()
        disabledErrorsInput.sendCompleted()
    }

    /// A producer that, when started, runs one execution with `input`.
    ///
    /// If the action is disabled or executing at that moment, the run fails at once with
    /// `ActionError.disabled` and `disabledErrors` sends a value. Otherwise `isExecuting` becomes
    /// `true` until the execution terminates; disposing the run interrupts the execution.
    ///
    /// Inlinable, so that the run specializes for the action's types in the caller.
    @inlinable
    public func apply(_ input: Input) -> SignalProducer<Output, ActionError<Error>> {
        SignalProducer { [weak self] observer, lifetime in
            guard let self else { return observer.send(error: .disabled) }
            let value: Any? = self.state.modify { state in
                guard state.isEnabled else { return nil }
                state.isExecuting = true
                return state.value
            }
            guard let value else {
                observer.send(error: .disabled)
                self.disabledErrorsInput.send(value: ())
                return
            }
            let eventsInput = self.eventsInput
            let state = self.state
            lifetime += self.execute(value, input).start { event in
                // Enabled again before the terminal event is seen, so that a completion handler
                // can apply the action once more.
                if event.isTerminating { state.modify { $0.isExecuting = false } }
                observer.send(event.mapError(ActionError.producerFailed))
                eventsInput.send(value: event)
            }
        }
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
    @usableFromInline var value: Any

    @usableFromInline
    init(isUserEnabled: Bool, value: Any) {
        self.isUserEnabled = isUserEnabled
        self.value = value
    }

    @inlinable
    var isEnabled: Bool { isUserEnabled && !isExecuting }
}

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

extension Action: @unchecked Sendable {}  // Immutable; its properties and pipes are thread safe.

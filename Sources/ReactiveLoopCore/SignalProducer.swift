import Synchronization

/// A cold stream: a recipe that creates a new run of events each time it is started.
///
/// Operators on a producer do not create a signal per operator: a start creates one serializing
/// core at the source, and the operators' adapters sit between it and the observer.
public struct SignalProducer<Value, Error: Swift.Error> {
    /// The signal type this producer's runs deliver.
    public typealias ProducedSignal = Signal<Value, Error>

    /// Runs the producer once: deliver events to the observer, one at a time, until the
    /// lifetime ends; when it ends before a terminal event, deliver `interrupted`.
    @usableFromInline
    let _run: (Signal<Value, Error>.Observer, Lifetime) -> Void

    /// What operators and starts may know about this producer beyond its runs, or `nil`.
    @usableFromInline
    let _shape: _ProducerShape?

    /// Marks the internal initializer, so that a trailing closure never picks it.
    @usableFromInline
    enum _Raw { case run }

    @inlinable
    init(_ raw: _Raw, _ run: @escaping (Signal<Value, Error>.Observer, Lifetime) -> Void) {
        self._run = run
        self._shape = nil
    }

    /// `producer`'s runs, known to have `shape` (whose object, if any, is of the type its case
    /// names for this producer's `Value` and `Error`).
    @inlinable
    init(_ producer: SignalProducer, shape: _ProducerShape) {
        self._run = producer._run
        self._shape = shape
    }

    /// A producer that runs the parts of `chain` one after another.
    init(chain: _ConcatChain<Value, Error>) {
        self._run = { observer, lifetime in
            SignalProducer<SignalProducer<Value, Error>, Error>(chain.parts()).flatten(.concat)._run(observer, lifetime)
        }
        self._shape = .chain(chain)
    }

    /// The parts, if this producer is a chain of `concat`/`prefix`/`then`.
    @inlinable
    var _chain: _ConcatChain<Value, Error>? {
        guard case let .chain(chain)? = _shape else { return nil }
        return unsafeDowncast(chain, to: _ConcatChain<Value, Error>.self)
    }

    /// Whether this producer's run ends inside its start (see `_ProducerShape.immediate`).
    @inlinable
    var _isImmediate: Bool {
        guard case .immediate? = _shape else { return false }
        return true
    }

    /// Creates a producer that runs `startHandler` on every start, with a fresh input observer
    /// and a lifetime that ends when the run terminates or is disposed.
    ///
    /// The observer may be used from any thread: its events are serialized, and a send from
    /// inside an observer of the same run is queued, never deadlocked.
    @inlinable
    public init(_ startHandler: @escaping (Signal<Value, Error>.Observer, Lifetime) -> Void) {
        self = ._serialized { sink, lifetime in startHandler(sink.input, lifetime) }
    }

    /// Creates a producer whose runs forward the events of `signal` from the moment of start.
    public init(_ signal: Signal<Value, Error>) {
        self.init { observer, lifetime in
            lifetime._attachDisposing(signal.observe(observer))
        }
    }

    /// Creates a producer from anything that can be turned into one.
    public init<T: SignalProducerConvertible>(_ base: T) where T.Value == Value, T.Error == Error {
        self = base.producer
    }

    /// A producer of events that run synchronously in the caller's start: nothing else can
    /// send to the observer, so the run needs no serializing core.
    @inlinable
    static func _synchronous(_ body: @escaping (Signal<Value, Error>.Observer, Lifetime) -> Void) -> Self {
        Self(.run, body)
    }

    /// A `_synchronous` producer whose run also ends inside the start: `body` sends every
    /// event before it returns, and keeps neither the observer nor the lifetime (see
    /// `_ProducerShape.immediate`).
    @inlinable
    static func _immediate(_ body: @escaping (Signal<Value, Error>.Observer, Lifetime) -> Void) -> Self {
        Self(Self(.run, body), shape: .immediate)
    }

    /// A producer that sends `value`, then completes.
    @inlinable
    public init(value: Value) {
        self = ._immediate { observer, lifetime in
            observer.send(value: value)
            if lifetime.hasEnded { return observer.sendInterrupted() }
            observer.sendCompleted()
        }
    }

    /// A producer that calls `action` on each start, sends its result and completes.
    @inlinable
    public init(_ action: @escaping () -> Value) {
        self = ._immediate { observer, lifetime in
            observer.send(value: action())
            if lifetime.hasEnded { return observer.sendInterrupted() }
            observer.sendCompleted()
        }
    }

    /// A producer that calls `action` on each start: a success is sent and completes, a
    /// failure fails the run.
    @inlinable
    public init(_ action: @escaping () -> Result<Value, Error>) {
        self = ._immediate { observer, lifetime in
            Self._send(action(), to: observer, lifetime)
        }
    }

    /// A producer that fails with `error` at once.
    @inlinable
    public init(error: Error) {
        self = ._immediate { observer, _ in observer.send(error: error) }
    }

    /// A producer that sends the success value and completes, or fails with the failure.
    @inlinable
    public init(result: Result<Value, Error>) {
        self = ._immediate { observer, lifetime in Self._send(result, to: observer, lifetime) }
    }

    @inlinable
    static func _send(_ result: Result<Value, Error>, to observer: Signal<Value, Error>.Observer, _ lifetime: Lifetime)
    {
        switch result {
        case let .success(value):
            observer.send(value: value)
            if lifetime.hasEnded { return observer.sendInterrupted() }
            observer.sendCompleted()
        case let .failure(error):
            observer.send(error: error)
        }
    }

    /// A producer that sends the elements of `values` in order, then completes. A run that is
    /// disposed part way stops iterating.
    @inlinable
    public init<S: Sequence>(_ values: S) where S.Element == Value {
        self = ._immediate { observer, lifetime in
            for value in values {
                observer.send(value: value)
                if lifetime.hasEnded { return observer.sendInterrupted() }
            }
            observer.sendCompleted()
        }
    }

    /// A producer that sends the given values in order, then completes.
    @inlinable
    public init(values first: Value, _ second: Value, _ tail: Value...) {
        self.init([first, second] + tail)
    }

    /// A producer that completes at once.
    public static var empty: SignalProducer {
        ._immediate { observer, _ in observer.sendCompleted() }
    }

    /// A producer that never sends anything; its runs end only when disposed (`interrupted`).
    public static var never: SignalProducer {
        ._synchronous { observer, lifetime in
            lifetime.observeEnded { observer.sendInterrupted() }
        }
    }
}

extension SignalProducer where Error == Never {
    /// A producer that sends `value`, then completes.
    @inlinable
    public init(value: Value) {
        self = ._immediate { observer, lifetime in
            observer.send(value: value)
            if lifetime.hasEnded { return observer.sendInterrupted() }
            observer.sendCompleted()
        }
    }

    /// A producer that sends the elements of `values` in order, then completes.
    @inlinable
    public init<S: Sequence>(_ values: S) where S.Element == Value {
        self = ._immediate { observer, lifetime in
            for value in values {
                observer.send(value: value)
                if lifetime.hasEnded { return observer.sendInterrupted() }
            }
            observer.sendCompleted()
        }
    }

    /// A producer that sends the given values in order, then completes.
    @inlinable
    public init(values first: Value, _ second: Value, _ tail: Value...) {
        self.init([first, second] + tail)
    }
}

extension SignalProducer where Error == any Swift.Error {
    /// A producer that calls `action` on each start: its result is sent and completes; a
    /// thrown error fails the run.
    @inlinable
    public init(_ action: @escaping () throws -> Value) {
        self.init { () -> Result<Value, any Swift.Error> in Result { try action() } }
    }
}

/// What a producer can be known to be, besides a recipe for runs. Not generic: one layout for
/// every producer type. Each case's object is of the type it names, for the producer's `Value`
/// and `Error`.
@usableFromInline
enum _ProducerShape {
    /// A chain of `concat`/`prefix`/`then` (a `_ConcatChain`): the parts, so that chaining
    /// onto it makes one longer chain instead of nesting.
    case chain(AnyObject)
    /// A property's producer (a `_PropertySource`; the error type is then `Never`):
    /// `startWithValues` registers its closure on the property's signal core directly, and
    /// so do `start(_:)` with a closure or an observer that keeps no signal core, and the
    /// other convenience starts, through a `_PropertyRun`; none of them calls `_run`. Only
    /// `_PropertyStorage.producer(keeping:)` makes one, with the runs of the same source; an
    /// operator never passes a shape on to its result.
    case property(AnyObject)
    /// A producer whose run ends inside `_run`: every event is sent before `_run` returns, and
    /// neither the observer nor the lifetime is kept past it, nor anything attached to the
    /// lifetime (`SignalProducer(value:)` and the like). `flatten` starts such a producer with
    /// an observer and an inner run that it reuses for the next such inner, so that a kept
    /// lifetime or a late event would reach another inner (debug builds assert the observer
    /// and the lifetime are let go of).
    case immediate
}

extension SignalProducer: @unchecked Sendable {}  // Immutable; starting is thread safe.

/// A run's lifetime that is also the disposable ending it: a producer run, or an inner run of
/// flatten.
@usableFromInline
class _RunLifetime: Lifetime, Disposable {
    /// Set by `dispose()` only: a run that terminated by itself was not disposed.
    @usableFromInline let disposed = Synchronization.Atomic<Bool>(false)
    /// The second inline slot (see `Lifetime._attachFirst`): a run's serializing sink takes the
    /// first, and the observation of the signal that feeds the run (a property's, or the one
    /// `SignalProducer(_: Signal)` forwards) takes this one, where it would make the list of
    /// attachments and an entry.
    @usableFromInline let _second = Synchronization.Atomic<UInt>(0)

    @inlinable
    init() {
        super.init(_target: nil)
    }

    @usableFromInline
    override func _fillSecondSlot(_ bits: UInt) -> Bool {
        guard _second.compareExchange(expected: 0, desired: bits, ordering: .sequentiallyConsistent).exchanged
        else { return false }
        // Ended meanwhile: `_end` may have looked at the slot before we filled it.
        if _state.load(ordering: .sequentiallyConsistent) & 1 != 0 { Lifetime._runSlot(_second) }
        return true
    }

    @usableFromInline
    override func _runSecondSlot() {
        Lifetime._runSlot(_second)
    }

    // Never inlined into a subclass's deinitializer: there, Swift 6.3.1's optimizer ends the
    // borrow of `self` before `disposed` is destroyed and crashes release builds of client
    // modules ("Found ownership error").
    //
    // A run released before it ended ends here, while its second slot is still a field of
    // this object (`Lifetime`'s deinitializer, which would end it otherwise, runs after this
    // class's fields are gone).
    @inline(never)
    deinit { _end() }

    /// Whether `dispose()` was called.
    @inlinable
    final var isDisposed: Bool { disposed.load(ordering: .acquiring) }

    /// Ends the run's lifetime, which interrupts it unless it has terminated.
    @inlinable
    final func dispose() {
        disposed.store(true, ordering: .releasing)
        _end()
    }
}

extension _RunLifetime: @unchecked Sendable {}  // The flag is atomic; the lifetime is thread safe.

/// One run of a producer: its lifetime, the disposable `start` returns, and the guard between
/// the producer's events and the observer, in one object.
///
/// The events of a run are serial (a start handler's observer goes through a serializing sink,
/// and operators forward serially), so the receiving closures need no lock. The terminal event
/// ends the lifetime right after it is delivered; disposing ends it without an event (the
/// producer observes its lifetime to send `interrupted`).
///
/// The run receives with closures, not an observer: `startWithValues` and the other
/// convenience starts hand it the caller's closures with no observer object around them (on
/// a property's producer they register on the property's signal core instead, and make no
/// run). It
/// lets go of them once the terminal event is delivered, so a disposable kept after the run
/// ended does not keep them, or what they capture, alive.
@usableFromInline
final class _ProducerRun<Value, Error: Swift.Error>: _RunLifetime {
    // Confined to the run's serial delivery. `events` receives every event that `values` does
    // not; both are `nil` once the terminal event was delivered.
    @usableFromInline @exclusivity(unchecked) var events: ((Signal<Value, Error>.Event) -> Void)?
    @usableFromInline @exclusivity(unchecked) var values: ((Value) -> Void)?

    /// A run that delivers values to `values` and every other event to `events`.
    @inlinable
    init(values: ((Value) -> Void)?, events: @escaping (Signal<Value, Error>.Event) -> Void) {
        self.events = events
        self.values = values
        super.init()
    }

    /// A run that delivers to `observer`: to its closures themselves, unless it is a signal's
    /// input (which the run holds, so that its release follows the run's end).
    @inlinable
    convenience init(_ observer: Signal<Value, Error>.Observer) {
        if observer.core == nil {
            self.init(values: observer.valueAction, events: observer.action)
        } else {
            self.init(values: nil, events: { [observer] event in observer.send(event) })
        }
    }

    /// Runs `producer` as this run: its events go through `receive(_:)`, its lifetime is this.
    @inlinable
    func begin(_ producer: SignalProducer<Value, Error>) {
        producer._run(
            Signal<Value, Error>.Observer(
                { [self] event in receive(event) }, values: { [self] value in receive(value) }),
            self)
    }

    /// Delivers one value of the run, unless it has terminated.
    @inlinable
    func receive(_ value: Value) {
        if let values {
            values(value)
        } else if let events {
            events(.value(value))
        }
    }

    /// Delivers one event of the run; after a terminal event, ends the lifetime and ignores
    /// anything else.
    @inlinable
    func receive(_ event: Signal<Value, Error>.Event) {
        guard let events else { return }
        guard _slowPath(event.isTerminating) else {
            if let values, case let .value(value) = event { return values(value) }
            return events(event)
        }
        self.events = nil
        self.values = nil
        events(event)
        _end()
    }
}

extension _ProducerRun: @unchecked Sendable {}  // `events` and `values` are confined to serial delivery.

// MARK: Starting

extension SignalProducer {
    /// Starts a run that delivers to `observer`.
    ///
    /// - Returns: A disposable that interrupts the run: `observer` receives `interrupted`
    ///   unless the run already terminated, and the run's resources are released. Dropping the
    ///   disposable does not stop the run.
    @discardableResult
    @inlinable
    public func start(_ observer: Signal<Value, Error>.Observer = .init()) -> any Disposable {
        // A property's producer: the observer's closure goes on the property's signal core
        // itself. An observer that keeps a signal core (a lock-free pipe's input, which
        // interrupts its signal when released) is kept by a run, whose end releases it.
        if case let .property(source)? = _shape, observer.core == nil {
            return unsafeDowncast(source, to: _PropertySource<Value>.self).startEvents(observer.action)
        }
        return _start(observer) { _ in }
    }

    /// Starts a run; `beforeRun` receives the run's disposable before any event is sent, so
    /// that a synchronous run can be stopped part way.
    @inlinable
    func _start(
        _ observer: Signal<Value, Error>.Observer, beforeRun: (any Disposable) -> Void
    ) -> any Disposable {
        _start(_ProducerRun(observer), beforeRun: beforeRun)
    }

    /// Starts a run that delivers values to `values` (when given) and every other event to
    /// `events`: a convenience start's closures, with no observer object.
    @inlinable
    func _start(
        values: ((Value) -> Void)? = nil, events: @escaping (Signal<Value, Error>.Event) -> Void
    ) -> any Disposable {
        // A property's producer: `events` goes on the property's signal core itself.
        if values == nil, case let .property(source)? = _shape {
            return unsafeDowncast(source, to: _PropertySource<Value>.self).startEvents(events)
        }
        return _start(_ProducerRun(values: values, events: events)) { _ in }
    }

    @inlinable
    func _start(_ run: _ProducerRun<Value, Error>, beforeRun: (any Disposable) -> Void) -> any Disposable {
        beforeRun(run)
        run.begin(self)
        return run
    }

    /// Starts a run with a closure that receives every event; see `start(_:)`.
    @discardableResult
    @inlinable
    public func start(_ action: @escaping Signal<Value, Error>.Observer.Action) -> any Disposable {
        _start(events: action)
    }

    /// Starts a run, receiving values as `.success` and a failure as `.failure`.
    @discardableResult
    @inlinable
    public func startWithResult(_ action: @escaping (Result<Value, Error>) -> Void) -> any Disposable {
        // One closure for every kind of event, and no observer object: a start makes one
        // closure context, where an observer of one closure per kind makes five objects.
        _start { event in
            switch event {
            case let .value(value): action(.success(value))
            case let .failed(error): action(.failure(error))
            case .completed, .interrupted: break
            }
        }
    }

    /// Starts a run, receiving the `completed` event only.
    @discardableResult
    @inlinable
    public func startWithCompleted(_ action: @escaping () -> Void) -> any Disposable {
        _start { event in
            if case .completed = event { action() }
        }
    }

    /// Starts a run, receiving the `failed` event only.
    @discardableResult
    @inlinable
    public func startWithFailed(_ action: @escaping (Error) -> Void) -> any Disposable {
        _start { event in
            if case let .failed(error) = event { action(error) }
        }
    }

    /// Starts a run, receiving the `interrupted` event only.
    @discardableResult
    @inlinable
    public func startWithInterrupted(_ action: @escaping () -> Void) -> any Disposable {
        _start { event in
            if case .interrupted = event { action() }
        }
    }

    /// Creates the signal of a run and hands it to `setup` before the run starts, so that
    /// observers attached in `setup` see every event.
    ///
    /// - Parameter setup: Receives the run's signal and a disposable that interrupts the run.
    ///   Disposing it disposes the run, which ends the way any disposed run ends: the signal
    ///   receives `interrupted` from the producer's last operator (at once for most, on its
    ///   scheduler for one that delivers on a scheduler, such as `observe(on:)`). If `setup`
    ///   disposes it, the run is never started (the start handler does not run) and the
    ///   signal is interrupted at once.
    /// - Returns: Whatever `setup` returns.
    @discardableResult
    public func startWithSignal<Result>(_ setup: (Signal<Value, Error>, any Disposable) -> Result) -> Result {
        // The run ends when its signal terminates: by the run's own terminal event, by the
        // setup's disposable, or by the signal being released with no observers.
        let run = SerialDisposable()
        let (signal, input) = Signal<Value, Error>.pipe(disposable: run)
        let interrupter = AnyDisposable { [run] in
            // Not started yet: there is no run to end, so the signal itself is interrupted.
            let started = run.inner != nil
            run.dispose()
            if !started { input.sendInterrupted() }
        }
        let result = setup(signal, interrupter)
        if !interrupter.isDisposed {
            _ = _start(input) { run.inner = $0 }
        }
        return result
    }

    /// Applies a signal operator to every run of this producer.
    public func lift<U, F>(_ transform: @escaping (Signal<Value, Error>) -> Signal<U, F>) -> SignalProducer<U, F> {
        SignalProducer<U, F> { observer, lifetime in
            self.startWithSignal { signal, interrupter in
                lifetime += interrupter
                lifetime += transform(signal).observe(observer)
            }
        }
    }

    /// Applies a binary signal operator to runs of this producer and another; `other`'s run
    /// starts first (ReactiveSwift's `liftRight`).
    public func lift<U, F, V, G>(
        _ transform: @escaping (Signal<Value, Error>) -> (Signal<U, F>) -> Signal<V, G>
    ) -> (SignalProducer<U, F>) -> SignalProducer<V, G> {
        _liftBinary(transform, startingSelfFirst: false)
    }

    /// Applies a binary signal operator to runs of this producer and another, starting this
    /// producer's run first (ReactiveSwift's `liftLeft`).
    func _liftLeft<U, F, V, G>(
        _ transform: @escaping (Signal<Value, Error>) -> (Signal<U, F>) -> Signal<V, G>
    ) -> (SignalProducer<U, F>) -> SignalProducer<V, G> {
        _liftBinary(transform, startingSelfFirst: true)
    }

    /// Both runs' signals are made, and observed through `transform`, before either run starts;
    /// a run starts when its `startWithSignal` setup returns, so the outer one starts last.
    private func _liftBinary<U, F, V, G>(
        _ transform: @escaping (Signal<Value, Error>) -> (Signal<U, F>) -> Signal<V, G>, startingSelfFirst: Bool
    ) -> (SignalProducer<U, F>) -> SignalProducer<V, G> {
        { other in
            SignalProducer<V, G> { observer, lifetime in
                func withSignals(_ body: (Signal<Value, Error>, Signal<U, F>) -> Void) {
                    if startingSelfFirst {
                        other.startWithSignal { otherSignal, otherInterrupter in
                            lifetime += otherInterrupter
                            self.startWithSignal { signal, interrupter in
                                lifetime += interrupter
                                body(signal, otherSignal)
                            }
                        }
                    } else {
                        self.startWithSignal { signal, interrupter in
                            lifetime += interrupter
                            other.startWithSignal { otherSignal, otherInterrupter in
                                lifetime += otherInterrupter
                                body(signal, otherSignal)
                            }
                        }
                    }
                }
                withSignals { signal, otherSignal in lifetime += transform(signal)(otherSignal).observe(observer) }
            }
        }
    }

    /// An operator on each run: `adapter` turns the downstream observer into the observer this
    /// producer's run delivers to. It is called once per start, so state made inside it belongs
    /// to one run.
    @inlinable
    func _lift<U, F>(
        _ adapter: @escaping (Signal<U, F>.Observer, Lifetime) -> Signal<Value, Error>.Observer
    ) -> SignalProducer<U, F> {
        SignalProducer<U, F>(
            .run,
            { downstream, lifetime in
                self._run(adapter(downstream, lifetime), lifetime)
            })
    }
}

extension SignalProducer where Error == Never {
    /// Starts a run, receiving values only (the producer cannot fail).
    @discardableResult
    @inlinable
    public func startWithValues(_ action: @escaping (Value) -> Void) -> any Disposable {
        // A property's producer: the closure goes on the property's signal core itself.
        if case let .property(source)? = _shape {
            return unsafeDowncast(source, to: _PropertySource<Value>.self).startValues(action)
        }
        return _start(values: action) { _ in }
    }
}

// MARK: Conversions

/// A type that can be turned into a `SignalProducer`.
public protocol SignalProducerConvertible<Value, Error> {
    /// The type of values.
    associatedtype Value
    /// The type of error.
    associatedtype Error: Swift.Error
    /// The producer.
    var producer: SignalProducer<Value, Error> { get }
}

/// A type that is a `SignalProducer` (used to constrain generic code).
public protocol SignalProducerProtocol<Value, Error> {
    /// The type of values.
    associatedtype Value
    /// The type of error.
    associatedtype Error: Swift.Error
    /// The producer.
    var producer: SignalProducer<Value, Error> { get }
}

extension SignalProducer: SignalProducerConvertible, SignalProducerProtocol {
    /// The producer itself.
    public var producer: SignalProducer<Value, Error> { self }
}

extension Signal: SignalProducerConvertible {
    /// A producer whose runs forward this signal's events from the moment of start.
    public var producer: SignalProducer<Value, Error> { SignalProducer(self) }
}

extension Result: SignalProducerConvertible where Failure: Swift.Error {
    /// A producer that sends the success value and completes, or fails.
    public var producer: SignalProducer<Success, Failure> { SignalProducer(result: self) }
}

// RxSwift's traits in ReactiveLoop's idiom: Single, Maybe and Completable are producers with a
// promise about how many values they send; Driver is a producer for view models. See
// docs/Traits.md.

import Synchronization

/// The failure a trait reports when the producer it wraps breaks the trait's promise.
///
/// In debug builds a broken promise stops the program with a message naming the trait. In
/// release builds the run ends with this error when the trait's error type can hold it (it is
/// `any Error`); with any other error type the run ends with `interrupted`, the event that
/// says "no outcome".
public struct TraitViolation: Swift.Error, Equatable, Sendable, CustomStringConvertible {
    /// What the producer did.
    public enum Reason: Sendable, Equatable {
        /// It completed without a value (`Single`).
        case noValue
        /// It sent a second value (`Single`, `Maybe`).
        case secondValue
    }

    /// The trait whose promise was broken: `"Single"` or `"Maybe"`.
    public let trait: String
    /// What the producer did.
    public let reason: Reason

    /// The message the debug-build trap prints: the trait and what the producer did.
    public var description: String {
        switch reason {
        case .noValue: return "\(trait): the producer completed without a value"
        case .secondValue: return "\(trait): the producer sent a second value"
        }
    }
}

/// Whether a broken trait promise stops the program: `true` in debug builds. Tests of the
/// release behaviour turn it off.
@_spi(Testing) public let _traitViolationsTrap = Synchronization.Atomic<Bool>(_isDebugAssertConfiguration())

extension SignalProducer {
    /// This producer, checked against a trait's promise: at most `maxValues` values, and at
    /// least one before completion when `requiresValue`.
    fileprivate func checked(as trait: String, requiresValue: Bool) -> SignalProducer {
        SignalProducer { observer, lifetime in
            var sent = false  // Confined to the run's serial deliveries.
            let violated = { (reason: TraitViolation.Reason) in
                let violation = TraitViolation(trait: trait, reason: reason)
                if _traitViolationsTrap.load(ordering: .relaxed) { _argumentFailure(violation.description) }
                if let error = violation as? Error { observer.send(error: error) } else { observer.sendInterrupted() }
            }
            lifetime += self.start { event in
                switch event {
                case let .value(value):
                    guard !sent else { return violated(.secondValue) }
                    sent = true
                    observer.send(value: value)
                case .completed:
                    if requiresValue && !sent { return violated(.noValue) }
                    observer.sendCompleted()
                default:
                    observer.send(event)
                }
            }
        }
    }
}

// MARK: - Single

/// A producer of exactly one value, or a failure: a request, a computation, a lookup.
///
/// Made from a producer (`producer.asSingle()` or `Single(producer)`), it checks the promise:
/// a second value or a completion without a value is a `TraitViolation`. It sends its value as
/// soon as the producer does, and completes when the producer completes.
public struct Single<Value, Error: Swift.Error>: SignalProducerConvertible {
    /// The checked producer: one value then completion, or a failure.
    public let producer: SignalProducer<Value, Error>

    /// Wraps `producer`, which promises exactly one value or a failure.
    public init(_ producer: SignalProducer<Value, Error>) {
        self.producer = producer.checked(as: "Single", requiresValue: true)
    }

    /// A single that sends `value`.
    public init(value: Value) {
        producer = SignalProducer(value: value)
    }

    /// A single that fails with `error`.
    public init(error: Error) {
        producer = SignalProducer(error: error)
    }

    /// A single with the outcome of `result`.
    public init(result: Result<Value, Error>) {
        producer = SignalProducer(result: result)
    }

    /// Starts the single; exactly one of `success` and `failure` is called (neither if the run
    /// is disposed first).
    @discardableResult
    public func start(
        success: @escaping (Value) -> Void, failure: @escaping (Error) -> Void = { _ in }
    ) -> any Disposable {
        producer.start { event in
            switch event {
            case let .value(value): success(value)
            case let .failed(error): failure(error)
            case .completed, .interrupted: break
            }
        }
    }

    /// A single of `transform` applied to the value.
    public func map<U>(_ transform: @escaping (Value) -> U) -> Single<U, Error> {
        Single<U, Error>(unchecked: producer.map(transform))
    }

    /// A single whose failure is `transform` applied to this one's failure.
    public func mapError<F>(_ transform: @escaping (Error) -> F) -> Single<Value, F> {
        Single<Value, F>(unchecked: producer.mapError(transform))
    }

    /// A single that runs the single `transform` makes from this one's value.
    public func flatMap<U>(_ transform: @escaping (Value) -> Single<U, Error>) -> Single<U, Error> {
        Single<U, Error>(unchecked: producer.flatMap(.concat) { transform($0).producer })
    }

    /// A single that recovers from a failure with the single `transform` makes from it (the
    /// trait form of `flatMapError`; RxSwift's `catch`).
    public func flatMapError<F>(_ transform: @escaping (Error) -> Single<Value, F>) -> Single<Value, F> {
        Single<Value, F>(unchecked: producer.flatMapError { transform($0).producer })
    }

    /// A single of the pair of this one's value and `other`'s; fails with the first failure.
    public func zip<U>(with other: Single<U, Error>) -> Single<(Value, U), Error> {
        Single<(Value, U), Error>(unchecked: producer.zip(with: other.producer))
    }

    /// This single as a maybe (which then always has a value).
    public func asMaybe() -> Maybe<Value, Error> {
        Maybe(unchecked: producer)
    }

    /// This single's outcome without its value.
    public func asCompletable() -> Completable<Error> {
        Completable(producer)
    }

    /// A single over a producer known to keep the promise (built from checked parts).
    init(unchecked producer: SignalProducer<Value, Error>) {
        self.producer = producer
    }
}

extension Single: @unchecked Sendable {}  // Immutable; the producer is thread safe.

// MARK: - Maybe

/// A producer of at most one value, or a failure: a cache lookup, an optional step.
///
/// Made from a producer (`producer.asMaybe()` or `Maybe(producer)`), it checks the promise: a
/// second value is a `TraitViolation`.
public struct Maybe<Value, Error: Swift.Error>: SignalProducerConvertible {
    /// The checked producer: at most one value, then completion; or a failure.
    public let producer: SignalProducer<Value, Error>

    /// Wraps `producer`, which promises at most one value.
    public init(_ producer: SignalProducer<Value, Error>) {
        self.producer = producer.checked(as: "Maybe", requiresValue: false)
    }

    /// A maybe that sends `value`.
    public init(value: Value) {
        producer = SignalProducer(value: value)
    }

    /// A maybe that completes without a value.
    public static var empty: Maybe {
        Maybe(unchecked: .empty)
    }

    /// A maybe that fails with `error`.
    public init(error: Error) {
        producer = SignalProducer(error: error)
    }

    /// Starts the maybe; exactly one of `success`, `empty` and `failure` is called (none if the
    /// run is disposed first).
    @discardableResult
    public func start(
        success: @escaping (Value) -> Void, empty: @escaping () -> Void = {},
        failure: @escaping (Error) -> Void = { _ in }
    ) -> any Disposable {
        var hadValue = false  // Confined to the run's serial deliveries.
        return producer.start { event in
            switch event {
            case let .value(value):
                hadValue = true
                success(value)
            case let .failed(error): failure(error)
            case .completed: if !hadValue { empty() }
            case .interrupted: break
            }
        }
    }

    /// A maybe of `transform` applied to the value, if any.
    public func map<U>(_ transform: @escaping (Value) -> U) -> Maybe<U, Error> {
        Maybe<U, Error>(unchecked: producer.map(transform))
    }

    /// A maybe whose failure is `transform` applied to this one's failure.
    public func mapError<F>(_ transform: @escaping (Error) -> F) -> Maybe<Value, F> {
        Maybe<Value, F>(unchecked: producer.mapError(transform))
    }

    /// A maybe that runs the maybe `transform` makes from this one's value; empty if this one
    /// is.
    public func flatMap<U>(_ transform: @escaping (Value) -> Maybe<U, Error>) -> Maybe<U, Error> {
        Maybe<U, Error>(unchecked: producer.flatMap(.concat) { transform($0).producer })
    }

    /// A maybe that recovers from a failure with the maybe `transform` makes from it.
    public func flatMapError<F>(_ transform: @escaping (Error) -> Maybe<Value, F>) -> Maybe<Value, F> {
        Maybe<Value, F>(unchecked: producer.flatMapError { transform($0).producer })
    }

    /// A maybe of the pair of this one's value and `other`'s: empty if either is empty.
    public func zip<U>(with other: Maybe<U, Error>) -> Maybe<(Value, U), Error> {
        Maybe<(Value, U), Error>(unchecked: producer.zip(with: other.producer))
    }

    /// A single with this maybe's value, or `defaultValue` when it is empty.
    public func asSingle(ifEmpty defaultValue: Value) -> Single<Value, Error> {
        Single(unchecked: producer.concat(value: defaultValue).take(first: 1))
    }

    /// This maybe's outcome without its value.
    public func asCompletable() -> Completable<Error> {
        Completable(producer)
    }

    init(unchecked producer: SignalProducer<Value, Error>) {
        self.producer = producer
    }
}

extension Maybe: @unchecked Sendable {}  // Immutable; the producer is thread safe.

// MARK: - Completable

/// A producer of an outcome without a value: completion or a failure (a write, a flush, a
/// shutdown).
///
/// Its producer's value type is `Never`, so it cannot break its promise; made from a producer
/// with values, it ignores them (as RxSwift's `asCompletable()` does).
public struct Completable<Error: Swift.Error>: SignalProducerConvertible {
    /// The producer: completion, or a failure.
    public let producer: SignalProducer<Never, Error>

    /// The outcome of `producer`, whose values are ignored.
    public init<Value>(_ producer: SignalProducer<Value, Error>) {
        self.producer = SignalProducer<Never, Error> { observer, lifetime in
            lifetime += producer.start { event in
                switch event {
                case .value: break
                case let .failed(error): observer.send(error: error)
                case .completed: observer.sendCompleted()
                case .interrupted: observer.sendInterrupted()
                }
            }
        }
    }

    /// A completable that completes at once.
    public static var completed: Completable {
        Completable(SignalProducer<Never, Error>.empty)
    }

    /// A completable that fails with `error`.
    public init(error: Error) {
        self.init(SignalProducer<Never, Error>(error: error))
    }

    /// Starts the completable; exactly one of `completed` and `failure` is called (neither if
    /// the run is disposed first).
    @discardableResult
    public func start(
        completed: @escaping () -> Void, failure: @escaping (Error) -> Void = { _ in }
    ) -> any Disposable {
        producer.start { event in
            switch event {
            case .failed(let error): failure(error)
            case .completed: completed()
            case .value, .interrupted: break
            }
        }
    }

    /// A completable whose failure is `transform` applied to this one's failure.
    public func mapError<F>(_ transform: @escaping (Error) -> F) -> Completable<F> {
        Completable<F>(producer.mapError(transform))
    }

    /// A completable that recovers from a failure with the completable `transform` makes.
    public func flatMapError<F>(_ transform: @escaping (Error) -> Completable<F>) -> Completable<F> {
        Completable<F>(producer.flatMapError { transform($0).producer })
    }

    /// This completable, then `next` once it completes (RxSwift's `andThen`).
    public func then(_ next: Completable) -> Completable {
        Completable(producer.then(next.producer))
    }

    /// This completable, then the single `next` once it completes.
    public func then<Value>(_ next: Single<Value, Error>) -> Single<Value, Error> {
        Single(unchecked: producer.then(next.producer))
    }

    /// A completable that completes when both this one and `other` have; fails with the first
    /// failure.
    public func zip(with other: Completable) -> Completable {
        Completable(SignalProducer.merge(producer, other.producer))
    }
}

extension Completable: @unchecked Sendable {}  // Immutable; the producer is thread safe.

// MARK: - Conversions

extension SignalProducer {
    /// This producer as a `Single`: it promises exactly one value or a failure.
    public func asSingle() -> Single<Value, Error> {
        Single(self)
    }

    /// This producer as a `Maybe`: it promises at most one value.
    public func asMaybe() -> Maybe<Value, Error> {
        Maybe(self)
    }

    /// This producer's outcome, its values ignored.
    public func asCompletable() -> Completable<Error> {
        Completable(self)
    }
}

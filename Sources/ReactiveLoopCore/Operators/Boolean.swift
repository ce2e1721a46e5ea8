// negate, and, or, all, any on streams of Bool.

extension Signal where Value == Bool {
    /// Sends the opposite of each value.
    public func negate() -> Signal<Value, Error> {
        map(!)
    }

    /// Sends `true` when the latest values of this signal and `signal` are both `true`.
    public func and(_ signal: Signal<Value, Error>) -> Signal<Value, Error> {
        Self.all([self, signal])
    }

    /// Sends `true` when the latest value of this signal or of `signal` is `true`.
    public func or(_ signal: Signal<Value, Error>) -> Signal<Value, Error> {
        Self.any([self, signal])
    }

    /// Sends whether the latest values of all `booleans` are `true`, once each has sent one.
    public static func all<BooleansCollection: Collection>(_ booleans: BooleansCollection) -> Signal<Value, Error>
    where BooleansCollection.Element == Signal<Bool, Error> {
        Signal<Bool, Error>.combineLatest(booleans).map { $0.allSatisfy { $0 } }
    }

    /// Sends whether the latest values of all `booleans` are `true`.
    public static func all(_ booleans: Signal<Value, Error>...) -> Signal<Value, Error> {
        all(booleans)
    }

    /// Sends whether the latest value of any of `booleans` is `true`, once each has sent one.
    public static func any<BooleansCollection: Collection>(_ booleans: BooleansCollection) -> Signal<Value, Error>
    where BooleansCollection.Element == Signal<Bool, Error> {
        Signal<Bool, Error>.combineLatest(booleans).map { $0.contains(true) }
    }

    /// Sends whether the latest value of any of `booleans` is `true`.
    public static func any(_ booleans: Signal<Value, Error>...) -> Signal<Value, Error> {
        any(booleans)
    }
}

extension SignalProducer where Value == Bool {
    /// Sends the opposite of each value.
    public func negate() -> SignalProducer<Value, Error> {
        map(!)
    }

    /// Sends `true` when the latest values of this producer and `booleans` are both `true`.
    public func and(_ booleans: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        Self.all([self, booleans])
    }

    /// Sends `true` when the latest values of this producer and `booleans` are both `true`.
    public func and<Booleans: SignalProducerConvertible>(_ booleans: Booleans) -> SignalProducer<Value, Error>
    where Booleans.Value == Bool, Booleans.Error == Error {
        and(booleans.producer)
    }

    /// Sends `true` when the latest value of this producer or of `booleans` is `true`.
    public func or(_ booleans: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        Self.any([self, booleans])
    }

    /// Sends `true` when the latest value of this producer or of `booleans` is `true`.
    public func or<Booleans: SignalProducerConvertible>(_ booleans: Booleans) -> SignalProducer<Value, Error>
    where Booleans.Value == Bool, Booleans.Error == Error {
        or(booleans.producer)
    }

    /// Sends whether the latest values of all `booleans` are `true`; `true` for none.
    public static func all<BooleansCollection: Collection>(_ booleans: BooleansCollection) -> SignalProducer<
        Value, Error
    >
    where BooleansCollection.Element == SignalProducer<Bool, Error> {
        SignalProducer<Bool, Error>.combineLatest(booleans, emptySentinel: []).map { $0.allSatisfy { $0 } }
    }

    /// Sends whether the latest values of all `booleans` are `true`.
    public static func all(_ booleans: SignalProducer<Value, Error>...) -> SignalProducer<Value, Error> {
        all(booleans)
    }

    /// Sends whether the latest values of all `booleans` are `true`.
    public static func all<Booleans: SignalProducerConvertible, BooleansCollection: Collection>(
        _ booleans: BooleansCollection
    ) -> SignalProducer<Value, Error>
    where Booleans.Value == Bool, Booleans.Error == Error, BooleansCollection.Element == Booleans {
        all(booleans.map(\.producer))
    }

    /// Sends whether the latest value of any of `booleans` is `true`; `false` for none.
    public static func any<BooleansCollection: Collection>(_ booleans: BooleansCollection) -> SignalProducer<
        Value, Error
    >
    where BooleansCollection.Element == SignalProducer<Bool, Error> {
        SignalProducer<Bool, Error>.combineLatest(booleans, emptySentinel: []).map { $0.contains(true) }
    }

    /// Sends whether the latest value of any of `booleans` is `true`.
    public static func any(_ booleans: SignalProducer<Value, Error>...) -> SignalProducer<Value, Error> {
        any(booleans)
    }

    /// Sends whether the latest value of any of `booleans` is `true`.
    public static func any<Booleans: SignalProducerConvertible, BooleansCollection: Collection>(
        _ booleans: BooleansCollection
    ) -> SignalProducer<Value, Error>
    where Booleans.Value == Bool, Booleans.Error == Error, BooleansCollection.Element == Booleans {
        any(booleans.map(\.producer))
    }
}

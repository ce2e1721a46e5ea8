// combineLatest: the newest value of each source, once every source has sent one. The run is
// _AggregateRun (AggregateRun.swift); the fixed arities are generated (CombineLatest+Arities.swift).

extension Signal {
    /// Combines each value with the newest value of `other`, once both have sent one. Completes
    /// when both complete; fails or interrupts as soon as either does.
    @inlinable
    public func combineLatest<U>(with other: Signal<U, Error>) -> Signal<(Value, U), Error> {
        Signal.combineLatest(self, other)
    }

    /// combineLatest over any number of signals, as arrays; an empty sequence never sends.
    @inlinable
    public static func combineLatest<S: Sequence>(_ signals: S) -> Signal<[Value], Error>
    where S.Element == Signal<Value, Error> {
        Signal<[Value], Error>._aggregate(.combineLatest, signals.map(_AggregateSource.init)) {
            $0.map { _AggregateSlotOf<Value>.of($0).first }
        }
    }
}

extension SignalProducer {
    /// Combines each value with the newest value of `other`; see `Signal.combineLatest(with:)`.
    @inlinable
    public func combineLatest<U>(with other: SignalProducer<U, Error>) -> SignalProducer<(Value, U), Error> {
        SignalProducer.combineLatest(self, other)
    }

    /// Combines each value with the newest value of `other`; see `Signal.combineLatest(with:)`.
    public func combineLatest<Other: SignalProducerConvertible>(
        with other: Other
    ) -> SignalProducer<(Value, Other.Value), Error> where Other.Error == Error {
        SignalProducer.combineLatest(self, other.producer)
    }

    /// combineLatest over any number of producers, as arrays; an empty sequence completes.
    public static func combineLatest<S: Sequence>(_ producers: S) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        SignalProducer<[Value], Error>._aggregate(.combineLatest, producers.map { _AggregateSource($0.producer) }) {
            $0.map { _AggregateSlotOf<Value>.of($0).first }
        }
    }

    /// combineLatest over any number of producers; an empty sequence sends `emptySentinel`
    /// and completes.
    public static func combineLatest<S: Sequence>(
        _ producers: S, emptySentinel: [S.Element.Value]
    ) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        let sources = Array(producers)
        return sources.isEmpty ? SignalProducer<[Value], Error>(value: emptySentinel) : combineLatest(sources)
    }
}

// zip: the n-th values of the sources, paired. The run is _AggregateRun (AggregateRun.swift); the
// fixed arities are generated (Zip+Arities.swift).

extension Signal {
    /// Pairs the n-th value of this signal with the n-th value of `other`. Completes when both
    /// complete, or when one completed and has no unpaired value left.
    @inlinable
    public func zip<U>(with other: Signal<U, Error>) -> Signal<(Value, U), Error> {
        Signal.zip(self, other)
    }

    /// zip over any number of signals, as arrays; an empty sequence never sends.
    @inlinable
    public static func zip<S: Sequence>(_ signals: S) -> Signal<[Value], Error>
    where S.Element == Signal<Value, Error> {
        Signal<[Value], Error>._aggregate(.zip, signals.map(_AggregateSource.init)) {
            $0.map { _AggregateSlotOf<Value>.of($0).first }
        }
    }
}

extension SignalProducer {
    /// Pairs values in order with those of `other`; see `Signal.zip(with:)`.
    @inlinable
    public func zip<U>(with other: SignalProducer<U, Error>) -> SignalProducer<(Value, U), Error> {
        SignalProducer.zip(self, other)
    }

    /// Pairs values in order with those of `other`; see `Signal.zip(with:)`.
    public func zip<Other: SignalProducerConvertible>(
        with other: Other
    ) -> SignalProducer<(Value, Other.Value), Error> where Other.Error == Error {
        SignalProducer.zip(self, other.producer)
    }

    /// zip over any number of producers, as arrays; an empty sequence completes.
    public static func zip<S: Sequence>(_ producers: S) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        SignalProducer<[Value], Error>._aggregate(.zip, producers.map { _AggregateSource($0.producer) }) {
            $0.map { _AggregateSlotOf<Value>.of($0).first }
        }
    }

    /// zip over any number of producers; an empty sequence sends `emptySentinel` and completes.
    public static func zip<S: Sequence>(
        _ producers: S, emptySentinel: [S.Element.Value]
    ) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        let sources = Array(producers)
        return sources.isEmpty ? SignalProducer<[Value], Error>(value: emptySentinel) : zip(sources)
    }
}

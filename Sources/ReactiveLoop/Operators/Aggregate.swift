// combineLatest and zip: one run that aggregates the values of N sources.

/// How an aggregate pairs up the values of its sources.
@usableFromInline
enum _AggregateMode: Sendable {
    /// Emit the newest value of every source whenever any source sends, once each has sent one.
    /// Completes when every source has completed.
    case combineLatest
    /// Emit the oldest unpaired value of every source once each has one. Completes when every
    /// source has completed, or when a completed source has no unpaired value left.
    case zip
}

/// One run of combineLatest or zip. State changes happen inside `sink.send(computing:)`, under
/// the output core's delivery ownership, so emissions are ordered with the values that caused
/// them even when the sources send from different threads.
@usableFromInline
final class _AggregateRun<Value, Error: Swift.Error> {
    let mode: _AggregateMode
    let sink: _SerialSink<Value, Error>
    let transform: (ContiguousArray<Any>) -> Value

    // Confined to the owner of the sink's delivery. combineLatest: newest value per source.
    var latest: ContiguousArray<Any?>
    // Confined to the owner of the sink's delivery. Sources that have sent at least one value.
    var sourcesWithValues = 0
    // Confined to the owner of the sink's delivery. zip: unpaired values per source, oldest first.
    var queues: [ContiguousArray<Any>]
    // Confined to the owner of the sink's delivery.
    var completed: [Bool]
    // Confined to the owner of the sink's delivery.
    var completedCount = 0
    // Confined to the owner of the sink's delivery.
    var done = false

    @usableFromInline
    init(
        _ mode: _AggregateMode, count: Int, sink: _SerialSink<Value, Error>,
        transform: @escaping (ContiguousArray<Any>) -> Value
    ) {
        self.mode = mode
        self.sink = sink
        self.transform = transform
        latest = ContiguousArray(repeating: nil, count: count)
        queues = Array(repeating: [], count: count)
        completed = Array(repeating: false, count: count)
    }

    /// An event of the source at `index`.
    @usableFromInline
    func receive(_ index: Int, _ event: Signal<Any, Error>.Event) {
        var completesAfterValue = false
        sink.send {
            guard !done else { return nil }
            switch event {
            case let .value(value):
                if mode == .combineLatest { return combine(value, at: index) }
                return zip(value, at: index, completesAfterValue: &completesAfterValue)
            case .completed:
                completed[index] = true
                completedCount += 1
                if completedCount == completed.count || (mode == .zip && queues[index].isEmpty) {
                    done = true
                    return .completed
                }
                return nil
            case let .failed(error):
                done = true
                return .failed(error)
            case .interrupted:
                done = true
                return .interrupted
            }
        }
        // The zip ended with the value just sent; `done` keeps every other event out.
        if completesAfterValue { sink.send(.completed) }
    }

    private func combine(_ value: Any, at index: Int) -> Signal<Value, Error>.Event? {
        if latest[index] == nil { sourcesWithValues += 1 }
        latest[index] = value
        guard sourcesWithValues == latest.count else { return nil }
        return .value(transform(ContiguousArray(latest.lazy.map { $0! })))
    }

    private func zip(_ value: Any, at index: Int, completesAfterValue: inout Bool) -> Signal<Value, Error>.Event? {
        queues[index].append(value)
        guard queues.allSatisfy({ !$0.isEmpty }) else { return nil }
        var tuple = ContiguousArray<Any>()
        tuple.reserveCapacity(queues.count)
        for source in queues.indices { tuple.append(queues[source].removeFirst()) }
        let emitted = transform(tuple)
        // A completed source with nothing left to pair ends the zip after this value.
        if queues.indices.contains(where: { completed[$0] && queues[$0].isEmpty }) {
            done = true
            completesAfterValue = true
        }
        return .value(emitted)
    }
}

extension _AggregateRun: @unchecked Sendable {}  // State is confined to the owner of the sink's delivery.

/// A source of an aggregate, with its value type erased.
@usableFromInline
struct _AggregateSource<Error: Swift.Error> {
    let subscribe: (_ handler: @escaping (Signal<Any, Error>.Event) -> Void) -> (any Disposable)?

    @usableFromInline
    init<U>(_ signal: Signal<U, Error>) {
        subscribe = { handler in signal.observe { handler($0.map { $0 as Any }) } }
    }

    @usableFromInline
    init<U>(_ producer: SignalProducer<U, Error>) {
        subscribe = { handler in producer.start { handler($0.map { $0 as Any }) } }
    }
}

extension Signal {
    /// Aggregates `sources` with `mode`; `transform` rebuilds the typed value.
    @usableFromInline
    static func _aggregate(
        _ mode: _AggregateMode, _ sources: [_AggregateSource<Error>],
        _ transform: @escaping (ContiguousArray<Any>) -> Value
    ) -> Signal {
        guard !sources.isEmpty else { return .never }
        return Signal._serialized { sink, lifetime in
            let run = _AggregateRun(mode, count: sources.count, sink: sink, transform: transform)
            for (index, source) in sources.enumerated() where !lifetime.hasEnded {
                lifetime += source.subscribe { run.receive(index, $0) }
            }
        }
    }
}

extension SignalProducer {
    /// Aggregates `sources` with `mode` on each run; `transform` rebuilds the typed value.
    @usableFromInline
    static func _aggregate(
        _ mode: _AggregateMode, _ sources: [_AggregateSource<Error>],
        _ transform: @escaping (ContiguousArray<Any>) -> Value
    ) -> SignalProducer {
        guard !sources.isEmpty else { return .empty }
        return ._serialized { sink, lifetime in
            let run = _AggregateRun(mode, count: sources.count, sink: sink, transform: transform)
            for (index, source) in sources.enumerated() where !lifetime.hasEnded {
                lifetime += source.subscribe { run.receive(index, $0) }
            }
        }
    }
}

// MARK: Binary and sequence forms

extension Signal {
    /// Combines each value with the newest value of `other`, once both have sent one. Completes
    /// when both complete; fails or interrupts as soon as either does.
    public func combineLatest<U>(with other: Signal<U, Error>) -> Signal<(Value, U), Error> {
        Signal.combineLatest(self, other)
    }

    /// Pairs the n-th value of this signal with the n-th value of `other`. Completes when both
    /// complete, or when one completed and has no unpaired value left.
    public func zip<U>(with other: Signal<U, Error>) -> Signal<(Value, U), Error> {
        Signal.zip(self, other)
    }

    /// combineLatest over any number of signals, as arrays; an empty sequence never sends.
    public static func combineLatest<S: Sequence>(_ signals: S) -> Signal<[Value], Error>
    where S.Element == Signal<Value, Error> {
        Signal<[Value], Error>._aggregate(.combineLatest, signals.map(_AggregateSource.init)) { $0.map { $0 as! Value } }
    }

    /// zip over any number of signals, as arrays; an empty sequence never sends.
    public static func zip<S: Sequence>(_ signals: S) -> Signal<[Value], Error> where S.Element == Signal<Value, Error> {
        Signal<[Value], Error>._aggregate(.zip, signals.map(_AggregateSource.init)) { $0.map { $0 as! Value } }
    }
}

extension SignalProducer {
    /// Combines each value with the newest value of `other`; see `Signal.combineLatest(with:)`.
    public func combineLatest<U>(with other: SignalProducer<U, Error>) -> SignalProducer<(Value, U), Error> {
        SignalProducer.combineLatest(self, other)
    }

    /// Combines each value with the newest value of `other`; see `Signal.combineLatest(with:)`.
    public func combineLatest<Other: SignalProducerConvertible>(
        with other: Other
    ) -> SignalProducer<(Value, Other.Value), Error> where Other.Error == Error {
        SignalProducer.combineLatest(self, other.producer)
    }

    /// Pairs values in order with those of `other`; see `Signal.zip(with:)`.
    public func zip<U>(with other: SignalProducer<U, Error>) -> SignalProducer<(Value, U), Error> {
        SignalProducer.zip(self, other)
    }

    /// Pairs values in order with those of `other`; see `Signal.zip(with:)`.
    public func zip<Other: SignalProducerConvertible>(
        with other: Other
    ) -> SignalProducer<(Value, Other.Value), Error> where Other.Error == Error {
        SignalProducer.zip(self, other.producer)
    }

    /// combineLatest over any number of producers, as arrays; an empty sequence completes.
    public static func combineLatest<S: Sequence>(_ producers: S) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        SignalProducer<[Value], Error>._aggregate(.combineLatest, producers.map { _AggregateSource($0.producer) }) {
            $0.map { $0 as! Value }
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

    /// zip over any number of producers, as arrays; an empty sequence completes.
    public static func zip<S: Sequence>(_ producers: S) -> SignalProducer<[Value], Error>
    where S.Element: SignalProducerConvertible, S.Element.Value == Value, S.Element.Error == Error {
        SignalProducer<[Value], Error>._aggregate(.zip, producers.map { _AggregateSource($0.producer) }) {
            $0.map { $0 as! Value }
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

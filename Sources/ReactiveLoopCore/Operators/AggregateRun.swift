// The run behind combineLatest (CombineLatest.swift) and zip (Zip.swift): one run that
// aggregates the values of N sources.

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

/// The values one source of an aggregate run holds: its newest value (combineLatest) or its
/// unpaired values, oldest first (zip). Typed per source; the run sees the base class.
@usableFromInline
class _AggregateSlot {
    /// How many values are held (at most 1 for combineLatest).
    @usableFromInline var count: Int { 0 }
    /// Drops the oldest held value (zip, after pairing).
    @usableFromInline func removeFirst() {}
    @usableFromInline init() {}
}

@usableFromInline
final class _AggregateSlotOf<T>: _AggregateSlot {
    // Confined to the owner of the run's sink delivery, which is what makes the accesses
    // exclusive: the dynamic exclusivity check (several per value) is left out.
    @exclusivity(unchecked) @usableFromInline var values: ContiguousArray<T> = []
    // Confined to the owner of the run's sink delivery.
    @exclusivity(unchecked) @usableFromInline var head = 0

    @usableFromInline override var count: Int { values.count - head }

    /// The oldest held value (for combineLatest, the only one).
    @inlinable var first: T { values[head] }

    @inlinable
    func store(_ value: T, keepingOnlyLatest: Bool) {
        if keepingOnlyLatest {
            if values.isEmpty { values.append(value) } else { values[0] = value }
        } else {
            values.append(value)
        }
    }

    @usableFromInline override func removeFirst() {
        head += 1
        if head == values.count {
            values.removeAll(keepingCapacity: true)
            head = 0
        }
    }

    /// Reads the slot behind `slot`, which the aggregate created as a `_AggregateSlotOf<T>`.
    @inlinable
    static func of(_ slot: _AggregateSlot) -> _AggregateSlotOf<T> {
        unsafeDowncast(slot, to: _AggregateSlotOf<T>.self)
    }
}

/// One run of combineLatest or zip. State changes happen inside `sink.send(computing:)`, under
/// the output sink's delivery ownership, so emissions are ordered with the values that caused
/// them even when the sources send from different threads.
@usableFromInline
final class _AggregateRun<Value, Error: Swift.Error> {
    @usableFromInline let mode: _AggregateMode
    @usableFromInline let sink: _SerialSink<Value, Error>
    /// Builds the output from the slots' first values.
    @usableFromInline let transform: ([_AggregateSlot]) -> Value
    @usableFromInline let slots: [_AggregateSlot]

    // Confined to the owner of the sink's delivery (so exclusive without a dynamic check).
    @exclusivity(unchecked) @usableFromInline var completed: [Bool]
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var completedCount = 0
    // Confined to the owner of the sink's delivery.
    @exclusivity(unchecked) @usableFromInline var done = false

    @inlinable
    init(
        _ mode: _AggregateMode, slots: [_AggregateSlot], sink: _SerialSink<Value, Error>,
        transform: @escaping ([_AggregateSlot]) -> Value
    ) {
        self.mode = mode
        self.slots = slots
        self.sink = sink
        self.transform = transform
        completed = Array(repeating: false, count: slots.count)
    }

    /// After the source at `index` stored a value: the output to send, if any. Sets
    /// `completesAfterValue` when a zip ends with this value.
    @inlinable
    func valueArrived(at index: Int, completesAfterValue: inout Bool) -> Signal<Value, Error>.Event? {
        guard slots.allSatisfy({ $0.count > 0 }) else { return nil }
        let output = transform(slots)
        if mode == .zip {
            for slot in slots { slot.removeFirst() }
            // A completed source with nothing left to pair ends the zip after this value.
            if slots.indices.contains(where: { completed[$0] && slots[$0].count == 0 }) {
                done = true
                completesAfterValue = true
            }
        }
        return .value(output)
    }

    /// A terminal event of the source at `index`: the output event, if any.
    @inlinable
    func terminated(at index: Int, with event: Signal<Value, Error>.Event) -> Signal<Value, Error>.Event? {
        guard case .completed = event else {
            done = true
            return event
        }
        completed[index] = true
        completedCount += 1
        if completedCount == completed.count || (mode == .zip && slots[index].count == 0) {
            done = true
            return .completed
        }
        return nil
    }
}

extension _AggregateRun: @unchecked Sendable {}  // State is confined to the owner of the sink's delivery.

/// A source of an aggregate: makes its typed slot for a run and subscribes to feed it.
@usableFromInline
struct _AggregateSource<Error: Swift.Error> {
    @usableFromInline let makeSlot: () -> _AggregateSlot
    @usableFromInline let subscribe:
        (_ slot: _AggregateSlot, _ index: Int, _ deliver: _AggregateDelivery<Error>) -> (any Disposable)?

    @inlinable
    init<U>(_ signal: Signal<U, Error>) {
        makeSlot = { _AggregateSlotOf<U>() }
        subscribe = { slot, index, deliver in
            signal.observe(deliver.observer(for: _AggregateSlotOf<U>.of(slot), at: index))
        }
    }

    @inlinable
    init<U>(_ producer: SignalProducer<U, Error>) {
        makeSlot = { _AggregateSlotOf<U>() }
        subscribe = { slot, index, deliver in
            producer.start(deliver.observer(for: _AggregateSlotOf<U>.of(slot), at: index))
        }
    }
}

/// Makes the observers that feed a run's slots, whatever the run's output type.
@usableFromInline
struct _AggregateDelivery<Error: Swift.Error> {
    @usableFromInline let keepOnlyLatest: Bool

    @inlinable
    init(
        keepOnlyLatest: Bool,
        step: @escaping (_ index: Int, _ event: Signal<Void, Error>.Event, _ store: () -> Void) -> Void
    ) {
        self.keepOnlyLatest = keepOnlyLatest
        self.step = step
    }

    /// Runs the run's serialized step for a source event; the closure stores the value.
    @usableFromInline let step: (_ index: Int, _ event: Signal<Void, Error>.Event, _ store: () -> Void) -> Void

    @inlinable
    func observer<U>(for slot: _AggregateSlotOf<U>, at index: Int) -> Signal<U, Error>.Observer {
        let keepOnlyLatest = self.keepOnlyLatest
        let step = self.step
        return Signal<U, Error>.Observer { event in
            switch event {
            case let .value(value): step(index, .value(())) { slot.store(value, keepingOnlyLatest: keepOnlyLatest) }
            case let .failed(error): step(index, .failed(error)) {}
            case .completed: step(index, .completed) {}
            case .interrupted: step(index, .interrupted) {}
            }
        }
    }
}

extension _AggregateRun {
    /// Subscribes `sources` to this run, in order, while the run's lifetime lasts.
    @inlinable
    static func start(
        _ mode: _AggregateMode, _ sources: [_AggregateSource<Error>], sink: _SerialSink<Value, Error>,
        lifetime: Lifetime, transform: @escaping ([_AggregateSlot]) -> Value
    ) {
        let slots = sources.map { $0.makeSlot() }
        let run = _AggregateRun(mode, slots: slots, sink: sink, transform: transform)
        let delivery = _AggregateDelivery<Error>(keepOnlyLatest: mode == .combineLatest) { index, event, store in
            var completesAfterValue = false
            run.sink.send { () -> Signal<Value, Error>.Event? in
                guard !run.done else { return nil }
                switch event {
                case .value:
                    store()
                    return run.valueArrived(at: index, completesAfterValue: &completesAfterValue)
                case let .failed(error): return run.terminated(at: index, with: .failed(error))
                case .completed: return run.terminated(at: index, with: .completed)
                case .interrupted: return run.terminated(at: index, with: .interrupted)
                }
            }
            // The zip ended with the value just sent; `done` keeps every other event out.
            if completesAfterValue { run.sink.send(.completed) }
        }
        for (index, source) in sources.enumerated() where !lifetime.hasEnded {
            lifetime += source.subscribe(slots[index], index, delivery)
        }
    }
}

extension Signal {
    /// Aggregates `sources` with `mode`; `transform` rebuilds the typed value from the slots.
    @inlinable
    static func _aggregate(
        _ mode: _AggregateMode, _ sources: [_AggregateSource<Error>],
        _ transform: @escaping ([_AggregateSlot]) -> Value
    ) -> Signal {
        guard !sources.isEmpty else { return .never }
        return Signal._serialized { sink, lifetime in
            _AggregateRun.start(mode, sources, sink: sink, lifetime: lifetime, transform: transform)
        }
    }
}

extension SignalProducer {
    /// Aggregates `sources` with `mode` on each run; `transform` rebuilds the typed value.
    @inlinable
    static func _aggregate(
        _ mode: _AggregateMode, _ sources: [_AggregateSource<Error>],
        _ transform: @escaping ([_AggregateSlot]) -> Value
    ) -> SignalProducer {
        guard !sources.isEmpty else { return .empty }
        return ._serialized { sink, lifetime in
            _AggregateRun.start(mode, sources, sink: sink, lifetime: lifetime, transform: transform)
        }
    }
}

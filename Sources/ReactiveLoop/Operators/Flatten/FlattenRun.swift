/// One run of `flatten`: the strategy's state machine and the inner runs it starts.
///
/// Every state change happens inside `sink.send(computing:)`, that is while holding the output
/// core's delivery ownership, so the state needs no lock and each emitted event is ordered with
/// the state change that produced it. Side effects (starting and disposing inner runs) are
/// decided inside and carried out after, outside ownership, so no inner start handler ever runs
/// while the output is held.
@usableFromInline
final class _FlattenRun<Value, Error: Swift.Error> {
    @usableFromInline typealias Inner = SignalProducer<Value, Error>
    @usableFromInline typealias Event = Signal<Value, Error>.Event

    /// An inner run to start, and the slot its disposable goes into.
    @usableFromInline
    struct Start {
        let id: Int
        let inner: Inner
        let slot: SerialDisposable
    }

    let kind: FlattenStrategy.Kind
    let sink: _SerialSink<Value, Error>

    // Confined to the owner of the sink's delivery.
    var running: [Int: SerialDisposable] = [:]
    // Confined to the owner of the sink's delivery. Inner runs waiting for a place, oldest first.
    var waiting: ContiguousArray<(id: Int, inner: Inner)> = []
    // Confined to the owner of the sink's delivery.
    var waitingHead = 0
    // Confined to the owner of the sink's delivery.
    var nextID = 0
    // Confined to the owner of the sink's delivery.
    var raceDecided = false
    // Confined to the owner of the sink's delivery.
    var outerCompleted = false
    // Confined to the owner of the sink's delivery.
    var done = false

    @usableFromInline
    init(_ strategy: FlattenStrategy, sink: _SerialSink<Value, Error>, lifetime: Lifetime) {
        self.kind = strategy.kind
        self.sink = sink
        lifetime.observeEnded { [self] in self.disposeAll() }
    }

    /// An event of the outer stream.
    @usableFromInline
    func outer<Outer: SignalProducerConvertible>(_ event: Signal<Outer, Error>.Event)
    where Outer.Value == Value, Outer.Error == Error {
        var start: Start?
        var stop: [SerialDisposable] = []
        sink.send {
            guard !done else { return nil }
            switch event {
            case let .value(convertible):
                let id = nextID
                nextID += 1
                let inner = convertible.producer
                switch kind {
                case let .concurrent(limit):
                    if running.count < limit {
                        start = admit(id, inner)
                    } else {
                        waiting.append((id, inner))
                    }
                case .latest:
                    stop = Array(running.values)
                    running.removeAll()
                    start = admit(id, inner)
                case .race:
                    if !raceDecided { start = admit(id, inner) }
                case .throttle:
                    if running.isEmpty { start = admit(id, inner) }
                }
                return nil
            case .completed:
                outerCompleted = true
                return completionIfIdle()
            case let .failed(error):
                done = true
                return .failed(error)
            case .interrupted:
                done = true
                return .interrupted
            }
        }
        for slot in stop { slot.dispose() }
        if let start { run(start) }
    }

    /// An event of the inner run `id`.
    func inner(_ id: Int, _ event: Event) {
        var start: Start?
        var stop: [SerialDisposable] = []
        sink.send {
            // Events of a disposed (replaced, lost race) inner run are dropped.
            guard !done, running[id] != nil else { return nil }
            if kind == .race && !raceDecided {
                raceDecided = true
                stop = running.filter { $0.key != id }.map(\.value)
                running = running.filter { $0.key == id }
            }
            switch event {
            case .value:
                return event
            case .completed:
                running[id] = nil
                if waitingHead < waiting.count {
                    let next = waiting[waitingHead]
                    waitingHead += 1
                    if waitingHead == waiting.count {
                        waiting.removeAll(keepingCapacity: true)
                        waitingHead = 0
                    }
                    start = admit(next.id, next.inner)
                }
                return completionIfIdle()
            case .failed, .interrupted:
                done = true
                return event
            }
        }
        for slot in stop { slot.dispose() }
        if let start { run(start) }
    }

    // Requires delivery ownership.
    private func admit(_ id: Int, _ inner: Inner) -> Start {
        let slot = SerialDisposable()
        running[id] = slot
        return Start(id: id, inner: inner, slot: slot)
    }

    // Requires delivery ownership.
    private func completionIfIdle() -> Event? {
        guard outerCompleted, running.isEmpty, waitingHead == waiting.count else { return nil }
        done = true
        return .completed
    }

    /// Starts an inner run outside delivery ownership. If its slot was disposed in the
    /// meantime (replaced by `latest`, lost a race, the whole run ended), the inner run is
    /// disposed as soon as it is put in the slot.
    ///
    /// An inner run that completes synchronously admits the next one from inside its own
    /// start; the trampoline starts that one after this start returns, so any number of
    /// synchronous inner runs take constant stack.
    private func run(_ start: Start) {
        _Trampoline.run(owner: self) { [self] in
            let id = start.id
            start.slot.inner = start.inner.start { [self] event in self.inner(id, event) }
        }
    }

    private func disposeAll() {
        var slots: [SerialDisposable] = []
        sink.send {
            done = true
            slots = Array(running.values)
            running.removeAll()
            waiting.removeAll()
            waitingHead = 0
            return nil
        }
        for slot in slots { slot.dispose() }
    }
}

extension _FlattenRun: @unchecked Sendable {}  // State is confined to the owner of the sink's delivery.

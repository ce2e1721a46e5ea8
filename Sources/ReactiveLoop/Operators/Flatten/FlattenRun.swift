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

    @usableFromInline typealias InnerRun = _ProducerRun<Value, Error>

    /// An inner producer to start, and the run it starts as: the run exists from the moment it
    /// is admitted, so that it can be disposed before its start (replaced by `latest`, say).
    @usableFromInline
    struct Start {
        @usableFromInline let inner: Inner
        @usableFromInline let run: InnerRun

        @inlinable
        init(inner: Inner, run: InnerRun) {
            self.inner = inner
            self.run = run
        }
    }

    @usableFromInline let kind: FlattenStrategy.Kind
    @usableFromInline let sink: _SerialSink<Value, Error>

    // Confined to the owner of the sink's delivery.
    @usableFromInline var running: [Int: InnerRun] = [:]
    // Confined to the owner of the sink's delivery. Inner runs waiting for a place, oldest first.
    @usableFromInline var waiting: ContiguousArray<(id: Int, inner: Inner)> = []
    // Confined to the owner of the sink's delivery.
    @usableFromInline var waitingHead = 0
    // Confined to the owner of the sink's delivery.
    @usableFromInline var nextID = 0
    // Confined to the owner of the sink's delivery.
    @usableFromInline var raceDecided = false
    // Confined to the owner of the sink's delivery.
    @usableFromInline var outerCompleted = false
    // Confined to the owner of the sink's delivery.
    @usableFromInline var done = false

    @inlinable
    init(_ strategy: FlattenStrategy, sink: _SerialSink<Value, Error>, lifetime: Lifetime) {
        self.kind = strategy.kind
        self.sink = sink
        lifetime.observeEnded { [self] in self.disposeAll() }
    }

    /// An event of the outer stream.
    @inlinable
    func outer<Outer: SignalProducerConvertible>(_ event: Signal<Outer, Error>.Event)
    where Outer.Value == Value, Outer.Error == Error {
        var start: Start?
        var stop: InnerRun?
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
                    // At most one inner runs.
                    stop = running.first?.value
                    running.removeAll(keepingCapacity: true)
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
        stop?.dispose()
        if let start { run(start) }
    }

    /// An event of the inner run `id`.
    @inlinable
    func inner(_ id: Int, _ event: Event) {
        var start: Start?
        var stop: [InnerRun] = []
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
        for run in stop { run.dispose() }
        if let start { run(start) }
    }

    // Requires delivery ownership.
    @inlinable
    func admit(_ id: Int, _ inner: Inner) -> Start {
        let run = InnerRun(Signal.Observer { [self] event in self.inner(id, event) })
        running[id] = run
        return Start(inner: inner, run: run)
    }

    // Requires delivery ownership.
    @inlinable
    func completionIfIdle() -> Event? {
        guard outerCompleted, running.isEmpty, waitingHead == waiting.count else { return nil }
        done = true
        return .completed
    }

    /// Starts an inner run outside delivery ownership. If the run was disposed in the meantime
    /// (replaced by `latest`, lost a race, the whole run ended), its producer is not started.
    ///
    /// An inner run that completes synchronously admits the next one from inside its own
    /// start; the trampoline starts that one after this start returns, so any number of
    /// synchronous inner runs take constant stack.
    @inlinable
    func run(_ start: Start) {
        _Trampoline.run(owner: self) {
            guard !start.run.hasEnded else { return }
            start.run.begin(start.inner)
        }
    }

    @inlinable
    func disposeAll() {
        var runs: [InnerRun] = []
        sink.send {
            done = true
            runs = Array(running.values)
            running.removeAll()
            waiting.removeAll()
            waitingHead = 0
            return nil
        }
        for run in runs { run.dispose() }
    }
}

extension _FlattenRun: @unchecked Sendable {}  // State is confined to the owner of the sink's delivery.

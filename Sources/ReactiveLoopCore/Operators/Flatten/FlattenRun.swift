import Synchronization

/// One run of `flatten`: the strategy's state machine and the inner runs it starts.
///
/// Every state change happens inside `sink.send(computing:)`, that is while holding the output
/// sink's delivery ownership, so the state needs no lock and each emitted event is ordered with
/// the state change that produced it. Side effects (starting and disposing inner runs) are
/// decided inside and carried out after, outside ownership, so no inner start handler ever runs
/// while the output is held.
@usableFromInline
final class _FlattenRun<Value, Error: Swift.Error> {
    @usableFromInline typealias Inner = SignalProducer<Value, Error>
    @usableFromInline typealias Event = Signal<Value, Error>.Event

    @usableFromInline typealias InnerRun = _FlattenInnerRun<Value, Error>

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

        /// Runs `inner` as `run`, unless the run ended before its start. `onStarter`: called
        /// by the flatten's starter thread (see `_FlattenRun.run(_:)`), which may start an
        /// immediate inner with the flatten's reused observer.
        @inlinable
        func begin(onStarter: Bool) {
            guard !run.hasEnded else { return }
            let flatten = run.flatten
            if onStarter, inner._isImmediate {
                // Its events all come before `_run` returns, on this thread: the reused
                // observer sends them for the run named in `immediateRun`.
                flatten.immediateRun = Unmanaged.passUnretained(run)
                defer { flatten.immediateRun = nil }
                inner._run(flatten.immediateObserver, run)
                // An immediate producer keeps no observer (see `_ProducerShape.immediate`).
                assert(
                    isKnownUniquelyReferenced(&flatten.madeImmediateObserver), "an immediate inner kept its observer")
                return
            }
            inner._run(Signal.Observer { [run] event in run.flatten.inner(run, event) }, run)
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
    /// The thread starting inner runs (see `run(_:)`), or 0.
    @usableFromInline let starter = Synchronization.Atomic<UInt>(0)
    /// Starts admitted while the starter was starting another, oldest first from
    /// `pendingHead`. Confined to the starter thread.
    @usableFromInline @exclusivity(unchecked) var pending: ContiguousArray<Start> = []
    // Confined to the starter thread.
    @usableFromInline @exclusivity(unchecked) var pendingHead = 0
    /// The inner run an immediate inner is being started as, while its `_run` runs (which
    /// holds it): not retained, so that setting it and each event sent for it cost no
    /// reference counting. Confined to the starter thread.
    @usableFromInline @exclusivity(unchecked) var immediateRun: Unmanaged<InnerRun>?
    /// The observer immediate inners are started with, made on first use: it sends for
    /// `immediateRun`, so that such an inner (`SignalProducer(value:)` and the like, which
    /// keep no observer) costs no observer of its own. Confined to the starter thread.
    @usableFromInline @exclusivity(unchecked) var madeImmediateObserver: Signal<Value, Error>.Observer?

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

    /// An event of the inner run `innerRun`; after its terminal event, its lifetime ends.
    @inlinable
    func inner(_ innerRun: InnerRun, _ event: Event) {
        let id = innerRun.id
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
        if event.isTerminating { innerRun._end() }
        if let start { run(start) }
    }

    /// The observer immediate inners are started with (see `madeImmediateObserver`). It holds
    /// this run unowned: this run holds it, and only this run's starts use it.
    @inlinable
    var immediateObserver: Signal<Value, Error>.Observer {
        if let made = madeImmediateObserver { return made }
        let made = Signal<Value, Error>.Observer { [unowned(unsafe) self] event in
            immediateRun!._withUnsafeGuaranteedRef { inner($0, event) }
        }
        madeImmediateObserver = made
        return made
    }

    // Requires delivery ownership.
    @inlinable
    func admit(_ id: Int, _ inner: Inner) -> Start {
        let run = InnerRun(flatten: self, id: id)
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
    /// start; that one is queued and started after this start returns, so any number of
    /// synchronous inner runs take constant stack. One thread at a time does this with the
    /// run's own queue (no allocation per inner); another thread starting inner runs of the
    /// same flatten meanwhile uses the shared trampoline.
    @inlinable
    func run(_ start: Start) {
        let me = _currentThreadID()
        if starter.load(ordering: .relaxed) == me {
            pending.append(start)
            return
        }
        guard starter.compareExchange(expected: 0, desired: me, ordering: .acquiring).exchanged else {
            return _Trampoline.run(owner: self) { start.begin(onStarter: false) }
        }
        start.begin(onStarter: true)
        while pendingHead < pending.count {
            let next = pending[pendingHead]
            pendingHead += 1
            next.begin(onStarter: true)
        }
        pending.removeAll(keepingCapacity: true)
        pendingHead = 0
        starter.store(0, ordering: .releasing)
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

/// One inner run of a flatten: its lifetime, its disposable, and what its events go to (the
/// flatten run, with its id), in one object, so that an inner run costs this object and the
/// observer its producer sends to. Events after its terminal event, or after it was disposed or
/// replaced, are dropped by the flatten run (the id is no longer running).
@usableFromInline
final class _FlattenInnerRun<Value, Error: Swift.Error>: _RunLifetime {
    /// Strong: the flatten run holds its inner runs only while they run, so the cycle ends
    /// when the inner run is removed.
    @usableFromInline let flatten: _FlattenRun<Value, Error>
    @usableFromInline let id: Int

    @inlinable
    init(flatten: _FlattenRun<Value, Error>, id: Int) {
        self.flatten = flatten
        self.id = id
        super.init()
    }
}

extension _FlattenInnerRun: @unchecked Sendable {}  // Immutable; the lifetime is thread safe.

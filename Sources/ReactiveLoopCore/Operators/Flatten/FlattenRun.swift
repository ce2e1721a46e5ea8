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
    /// The inner run that immediate inners are admitted as while it is free, made on first
    /// use, so that such an inner costs no run of its own either. It is taken at admission,
    /// and freed, without ending its lifetime, when its inner completes while still in
    /// `running`: an immediate inner keeps neither its observer nor its lifetime, and whatever
    /// else gets hold of an inner run (to dispose it) takes it out of `running` first. A run
    /// taken out that way (replaced by `latest`, beaten in a race, ended with the flatten run)
    /// is never freed: it ends as any inner run does, and the immediate inners after it each
    /// get a run of their own. Let go of when the flatten run ends, which breaks the cycle
    /// through the run's `flatten`. Confined to the owner of the sink's delivery.
    @usableFromInline var reusable: InnerRun?
    /// Whether `reusable` is taken (admitted, and not freed). Confined to the owner of the
    /// sink's delivery.
    @usableFromInline var reusableTaken = false

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

    /// An event of the inner run `innerRun`; after its terminal event, its lifetime ends
    /// (unless it is `reusable`, completed: then it is freed for the next immediate inner).
    @inlinable
    func inner(_ innerRun: InnerRun, _ event: Event) {
        let id = innerRun.id
        var start: Start?
        var stop: [InnerRun] = []
        var freed = false
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
                if innerRun === reusable {
                    reusableTaken = false
                    freed = true
                }
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
        if event.isTerminating && !freed { innerRun._end() }
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

    /// Makes the run `inner` starts as, or takes `reusable` for an immediate inner while it
    /// is free. Requires delivery ownership.
    @inlinable
    func admit(_ id: Int, _ inner: Inner) -> Start {
        let run: InnerRun
        if inner._isImmediate && !reusableTaken {
            if let reusable {
                reusable.id = id
                run = reusable
            } else {
                run = InnerRun(flatten: self, id: id)
                reusable = run
            }
            reusableTaken = true
        } else {
            run = InnerRun(flatten: self, id: id)
        }
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
            reusable = nil
            reusableTaken = false
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
    /// Strong: the flatten run holds its inner runs only while they run (and the one it
    /// reuses, until it ends), so the cycle ends when the inner run is removed.
    @usableFromInline let flatten: _FlattenRun<Value, Error>
    /// The inner's id. Changed only when the flatten run reuses this run for another
    /// immediate inner (see `_FlattenRun.reusable`), under the sink's delivery ownership, once
    /// the last inner's events are all in.
    @usableFromInline @exclusivity(unchecked) var id: Int

    @inlinable
    init(flatten: _FlattenRun<Value, Error>, id: Int) {
        self.flatten = flatten
        self.id = id
        super.init()
    }
}

// `id` changes only under the flatten run's delivery ownership; the lifetime is thread safe.
extension _FlattenInnerRun: @unchecked Sendable {}

import Synchronization

/// One run of `flatten`: the strategy's state machine and the inner runs it starts.
///
/// Every state change happens inside `sink.send(computing:)`, that is while holding the output
/// sink's delivery ownership, so the state needs no lock and each emitted event is ordered with
/// the state change that produced it. Side effects (starting and disposing inner runs) are
/// decided inside and carried out after the body, so no inner start handler runs inside it.
/// (Called reentrantly, from inside a delivery of the output on the same thread, the output is
/// still held by that delivery when an inner starts.) No caller's object is let go of while
/// a piece of the state is being changed: an inner producer leaves the waiting queue copied
/// out before its slot is emptied, and the queue of a flatten that ends is released after the
/// body, so that a deinitializer that sends to the outer stream (and so runs the body again,
/// at once) never runs in the middle of a change.
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
            var observer = Signal.Observer { [run] event in run.flatten.inner(run, event) }
            inner._run(observer, run)
            assert(!inner._isImmediate || isKnownUniquelyReferenced(&observer), "an immediate inner kept its observer")
        }
    }

    @usableFromInline let kind: FlattenStrategy.Kind
    @usableFromInline let sink: _SerialSink<Value, Error>

    // The state below, up to `starter`, is confined to the owner of the sink's delivery, which
    // keeps its accesses apart: the runtime's exclusivity checks on it are off, as they cost
    // more than the state machine itself (see docs/performance.md, "flatten").

    /// The running inner runs, most recently admitted first, linked through their `next` and
    /// `previous` (no table to hash into, no allocation per inner).
    @usableFromInline @exclusivity(unchecked) var runningHead: InnerRun?
    /// How many inner runs are in the `runningHead` list.
    @usableFromInline @exclusivity(unchecked) var runningCount = 0
    /// Inners waiting for a place, oldest first from `waitingHead`; a slot is emptied as its
    /// inner leaves, and the emptied front is dropped once it is most of the queue.
    @usableFromInline @exclusivity(unchecked) var waiting: ContiguousArray<Inner?> = []
    @usableFromInline @exclusivity(unchecked) var waitingHead = 0
    @usableFromInline @exclusivity(unchecked) var raceDecided = false
    @usableFromInline @exclusivity(unchecked) var outerCompleted = false
    @usableFromInline @exclusivity(unchecked) var done = false
    /// The thread starting inner runs (see `run(_:)`), or 0.
    @usableFromInline let starter = Synchronization.Atomic<UInt>(0)
    /// Starts admitted while the starter was starting another, oldest first from
    /// `pendingHead`; a slot is emptied as its start begins. Confined to the starter thread.
    @usableFromInline @exclusivity(unchecked) var pending: ContiguousArray<Start?> = []
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
    /// and freed, without ending its lifetime, when its inner completes while still running:
    /// an immediate inner keeps neither its observer nor its lifetime, and whatever else gets
    /// hold of an inner run (to dispose it) takes it out of the running list first. A run
    /// taken out that way (replaced by `latest`, beaten in a race, ended with the flatten run)
    /// is never freed: it ends as any inner run does, and the immediate inners after it each
    /// get a run of their own. Let go of when the flatten run ends, which breaks the cycle
    /// through the run's `flatten`. Confined to the owner of the sink's delivery.
    @usableFromInline @exclusivity(unchecked) var reusable: InnerRun?
    /// Whether `reusable` is taken (admitted, and not freed). Confined to the owner of the
    /// sink's delivery.
    @usableFromInline @exclusivity(unchecked) var reusableTaken = false

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
                let inner = convertible.producer
                switch kind {
                case let .concurrent(limit):
                    if runningCount < limit {
                        start = admit(inner)
                    } else {
                        waiting.append(inner)
                    }
                case .latest:
                    // At most one inner runs.
                    stop = runningHead
                    if let stop { unlink(stop) }
                    start = admit(inner)
                case .race:
                    if !raceDecided { start = admit(inner) }
                case .throttle:
                    if runningCount == 0 { start = admit(inner) }
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
    /// (unless it is `reusable` and completed while still running: then it is freed for the
    /// next immediate inner).
    @inlinable
    func inner(_ innerRun: InnerRun, _ event: Event) {
        var start: Start?
        var stop: [InnerRun] = []
        var freed = false
        sink.send {
            // Events of a disposed (replaced, lost race) inner run are dropped.
            guard !done, innerRun.isRunning else { return nil }
            if kind == .race && !raceDecided {
                raceDecided = true
                stop = unlinkAll(but: innerRun)
            }
            switch event {
            case .value:
                return event
            case .completed:
                unlink(innerRun)
                if innerRun === reusable {
                    assert(innerRun._isUnattached, "an immediate inner attached something to its lifetime")
                    reusableTaken = false
                    freed = true
                }
                if waitingHead < waiting.count {
                    let next = waiting[waitingHead].unsafelyUnwrapped
                    waiting[waitingHead] = nil
                    waitingHead += 1
                    if waitingHead == waiting.count {
                        waiting.removeAll(keepingCapacity: true)
                        waitingHead = 0
                    } else if waitingHead >= 64 && waitingHead * 2 >= waiting.count {
                        waiting.removeSubrange(0..<waitingHead)
                        waitingHead = 0
                    }
                    start = admit(next)
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
    /// is free, and puts it in the running list. Requires delivery ownership.
    @inlinable
    func admit(_ inner: Inner) -> Start {
        let run: InnerRun
        if inner._isImmediate && !reusableTaken {
            if let reusable {
                run = reusable
            } else {
                run = InnerRun(flatten: self)
                reusable = run
            }
            reusableTaken = true
        } else {
            run = InnerRun(flatten: self)
        }
        run.isRunning = true
        run.next = runningHead
        runningHead?.previous = run
        runningHead = run
        runningCount += 1
        return Start(inner: inner, run: run)
    }

    /// Takes `run` out of the running list. Requires delivery ownership.
    @inlinable
    func unlink(_ run: InnerRun) {
        run.isRunning = false
        if let previous = run.previous { previous.next = run.next } else { runningHead = run.next }
        run.next?.previous = run.previous
        run.next = nil
        run.previous = nil
        runningCount -= 1
    }

    /// Takes every running inner run but `kept` (if any) out of the running list, and
    /// returns them in the order they were admitted (the order they are disposed in).
    /// Requires delivery ownership.
    @inlinable
    func unlinkAll(but kept: InnerRun? = nil) -> [InnerRun] {
        var taken: [InnerRun] = []
        var current = runningHead
        while let run = current {
            current = run.next
            if run !== kept {
                unlink(run)
                taken.append(run)
            }
        }
        taken.reverse()
        return taken
    }

    // Requires delivery ownership.
    @inlinable
    func completionIfIdle() -> Event? {
        guard outerCompleted, runningCount == 0, waitingHead == waiting.count else { return nil }
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
            let next = pending[pendingHead].unsafelyUnwrapped
            pending[pendingHead] = nil
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
        var dropped: ContiguousArray<Inner?> = []
        sink.send {
            done = true
            runs = unlinkAll()
            reusable = nil
            reusableTaken = false
            swap(&dropped, &waiting)
            waitingHead = 0
            return nil
        }
        dropped.removeAll()
        for run in runs { run.dispose() }
    }
}

extension _FlattenRun: @unchecked Sendable {}  // State is confined to the owner of the sink's delivery.

/// One inner run of a flatten: its lifetime, its disposable, and what its events go to (the
/// flatten run), in one object, so that an inner run costs this object and the observer its
/// producer sends to. Events after it was disposed or replaced, or after its terminal event,
/// are dropped by the flatten run (it is no longer running). The run the flatten reuses for
/// immediate inners runs again after its terminal event: it relies on such an inner sending
/// nothing after it (see `_ProducerShape.immediate`).
@usableFromInline
final class _FlattenInnerRun<Value, Error: Swift.Error>: _RunLifetime {
    /// Strong: the flatten run holds its inner runs only while they run (and the one it
    /// reuses, until it ends), so the cycle ends when the inner run is removed.
    @usableFromInline let flatten: _FlattenRun<Value, Error>
    // The three below belong to the flatten run's state: confined to the owner of its sink's
    // delivery, unchecked as that state is.
    /// Whether this run is in the flatten run's running list.
    @usableFromInline @exclusivity(unchecked) var isRunning = false
    /// The next run in the running list, which holds its runs through these.
    @usableFromInline @exclusivity(unchecked) var next: _FlattenInnerRun?
    /// The run before this one in the running list (which holds it), or `nil` at its head.
    @usableFromInline @exclusivity(unchecked) unowned(unsafe) var previous: _FlattenInnerRun?

    @inlinable
    init(flatten: _FlattenRun<Value, Error>) {
        self.flatten = flatten
        super.init()
    }

    /// Whether nothing is attached to this run's lifetime and it has not ended (for the
    /// assertion that a reused run can start another inner).
    @usableFromInline
    var _isUnattached: Bool {
        _state.load(ordering: .acquiring) == 0 && _first.load(ordering: .acquiring) == 0
            && _second.load(ordering: .acquiring) == 0
    }
}

// The list links and `isRunning` change only under the flatten run's delivery ownership; the
// lifetime is thread safe.
extension _FlattenInnerRun: @unchecked Sendable {}

#if canImport(FoundationEssentials)
    import Dispatch
    import FoundationEssentials
    #if canImport(Glibc)
        import Glibc
    #endif
#else
    import Foundation
#endif

// Shared plumbing for time-based operators: each builds the observer of its input from the
// output's serializing sink. Timer callbacks arrive on the scheduler's thread and change the
// operator's state through `sink.send(computing:)`, so the state is confined to the output's
// delivery owner and needs no lock.

extension Signal {
    @inlinable
    func _timed<U, F>(_ make: @escaping (_SerialSink<U, F>, Lifetime) -> Observer) -> Signal<U, F> {
        Signal<U, F>._serialized { sink, lifetime in
            lifetime += self.observe(make(sink, lifetime))
        }
    }
}

extension SignalProducer {
    /// A run of a time operator.
    ///
    /// Disposing the run ends the upstream run at once (they share the lifetime). For an
    /// operator that delivers on `scheduler` (`observe(on:)`, `delay`, `throttle`, ...), the
    /// output is cancelled inside `dispose()`, as in ReactiveSwift: whatever the operator had
    /// already queued or scheduled is dropped, and exactly one `interrupted` is delivered, on
    /// `scheduler` (see `_SerialSink.cancel(deliveringInterruptedOn:)`). For one that forwards
    /// on the caller's thread (`timeout`, `hopping: nil`), `interrupted` goes through the
    /// operator's input at once. The run keeps itself alive until then, like every producer run.
    @inlinable
    func _timed<U, F>(
        hopping scheduler: (any Scheduler)?,
        _ make: @escaping (_SerialSink<U, F>, Lifetime) -> Signal<Value, Error>.Observer
    ) -> SignalProducer<U, F> {
        SignalProducer<U, F>(.run) { downstream, lifetime in
            let sink = _SerialSink<U, F>(downstream)
            let input = make(sink, lifetime)
            // One object, in a free inline slot of the run if there is one: a closure took a
            // context, and the list of attachments and its entry.
            lifetime._attachFirst(_TimedRunEnd(sink: sink, input: input, hopping: scheduler))
            self._run(input, lifetime)
        }
    }
}

/// The end of a time operator's run: an operator that delivers on a scheduler cancels its
/// output there; one that forwards on the caller's thread interrupts its input. A run that
/// terminated ends its lifetime too, and then there is nothing to cancel or interrupt.
@usableFromInline
final class _TimedRunEnd<Value, Error: Swift.Error, Input, InputError: Swift.Error>: _LifetimeEndHandler {
    @usableFromInline let sink: _SerialSink<Value, Error>
    /// The operator's input, kept only by an operator that forwards on the caller's thread.
    @usableFromInline let input: Signal<Input, InputError>.Observer?
    @usableFromInline let scheduler: (any Scheduler)?

    @inlinable
    init(
        sink: _SerialSink<Value, Error>, input: Signal<Input, InputError>.Observer, hopping scheduler: (any Scheduler)?
    ) {
        self.sink = sink
        self.input = scheduler == nil ? input : nil
        self.scheduler = scheduler
        super.init()
    }

    @inlinable
    override func lifetimeEnded() {
        if let scheduler {
            sink.cancel(deliveringInterruptedOn: scheduler)
        } else if !sink.hasTerminated {
            input?.sendInterrupted()
        }
    }
}

/// What every timed operator's per-run state holds: its interval, scheduler and output, and
/// the serial disposable of its pending timer, which ends with the run.
@usableFromInline
class _TimedState<Value, Error: Swift.Error>: @unchecked Sendable {  // Immutable; subclasses say what guards theirs.
    @usableFromInline let interval: TimeInterval
    /// The scheduler's time, for deadlines (its own clock when it has one), and the scheduler.
    @usableFromInline let clock: _SchedulerClock
    @usableFromInline let sink: _SerialSink<Value, Error>
    @usableFromInline let timer = SerialDisposable()

    /// The operator's scheduler.
    @inlinable
    var scheduler: any DateScheduler { clock.scheduler }

    @usableFromInline
    init(interval: TimeInterval, clock: _SchedulerClock, sink: _SerialSink<Value, Error>, lifetime: Lifetime) {
        self.interval = interval
        self.clock = clock
        self.sink = sink
        lifetime += timer
    }
}

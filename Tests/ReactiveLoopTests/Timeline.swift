import Foundation
@testable import ReactiveLoopCore

/// Records events with the virtual time (seconds since the scheduler's start) they arrived at.
final class Timeline<Value, Error: Swift.Error>: @unchecked Sendable {
    private let lock = NSLock()
    private var _entries: [(time: Double, event: Signal<Value, Error>.Event)] = []
    let scheduler: TestScheduler
    init(_ scheduler: TestScheduler) { self.scheduler = scheduler }
    var observer: Signal<Value, Error>.Observer {
        Signal.Observer { [self] event in
            let time = scheduler.currentDate.timeIntervalSinceReferenceDate
            lock.lock()
            _entries.append((time, event))
            lock.unlock()
        }
    }
    /// `"time:event"` strings, e.g. `"1.0:VALUE 2"`.
    var entries: [String] {
        lock.lock()
        defer { lock.unlock() }
        return _entries.map { "\($0.time):\($0.event)" }
    }
}

/// Sends `events` into `input` at the given virtual times.
func play<V, E>(
    _ events: [(Double, Signal<V, E>.Event)], into input: Signal<V, E>.Observer, on scheduler: TestScheduler
) {
    for (time, event) in events {
        scheduler.schedule(after: Date(timeIntervalSinceReferenceDate: time)) { input.send(event) }
    }
}

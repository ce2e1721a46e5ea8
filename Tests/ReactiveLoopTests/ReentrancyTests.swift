import Foundation
import ReactiveLoopTestSupport
import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// Guarantee 2: a reentrant send never deadlocks; it is queued and delivered, in FIFO order,
/// right after the current delivery and before the outermost send returns. Every test runs
/// its scenario under a watchdog so that a deadlock fails instead of hanging the run.
@Suite("Reentrancy")
struct ReentrancyTests {
    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func recursiveSendIsQueuedInFIFOOrderBeforeTheOuterSendReturns(kind: _SignalCoreKind) {
        let log = Box<[String]>([])
        let seenWhenSendReturned = Box(0)
        let finished = runWithWatchdog {
            withCoreKind(kind) {
                let (signal, input) = Signal<Int, Never>.pipe()
                signal.observeValues { value in
                    log.modify { $0.append("A\(value)") }
                    if value == 1 {
                        input.send(value: 2)
                        input.send(value: 3)
                        log.modify { $0.append("A1 done") }
                    }
                    if value == 2 { input.send(value: 4) }
                }
                signal.observeValues { value in log.modify { $0.append("B\(value)") } }
                input.send(value: 1)
                seenWhenSendReturned.value = log.value.count
            }
        }
        #expect(finished)
        #expect(log.value == ["A1", "A1 done", "B1", "A2", "B2", "A3", "B3", "A4", "B4"])
        #expect(seenWhenSendReturned.value == 9)
    }

    @Test func mutablePropertySetInsideItsOwnObserverIsDeliveredNextAndReadsTheNewestValue() {
        let delivered = Box<[Int]>([])
        let other = Box<[Int]>([])
        let readsInside = Box<[Int]>([])
        let finished = runWithWatchdog {
            let property = MutableProperty(0)
            property.signal.observeValues { value in
                delivered.modify { $0.append(value) }
                if value < 3 {
                    property.value = value + 1
                    readsInside.modify { $0.append(property.value) }
                }
            }
            property.signal.observeValues { value in other.modify { $0.append(value) } }
            property.value = 1
            #expect(property.value == 3)
        }
        #expect(finished)
        #expect(delivered.value == [1, 2, 3])
        #expect(other.value == [1, 2, 3])
        #expect(readsInside.value == [2, 3])
    }

    @Test func modifyInsideTheObserverOfAnotherPropertyDoesNotDeadlock() {
        let finished = runWithWatchdog {
            let a = MutableProperty(0)
            let b = MutableProperty(0)
            a.signal.observeValues { value in b.modify { $0 += value } }
            b.signal.observeValues { value in if value < 10 { a.value = value } }
            a.value = 1
            #expect(b.value == 16)
        }
        #expect(finished)
    }

    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func terminalEventSentDuringValueDeliveryEndsTheSignalAfterThatDelivery(kind: _SignalCoreKind) {
        let events = Box<[Signal<Int, Never>.Event]>([])
        let finished = runWithWatchdog {
            withCoreKind(kind) {
                let (signal, input) = Signal<Int, Never>.pipe()
                signal.observe { event in
                    events.modify { $0.append(event) }
                    if event.value == 1 {
                        input.sendCompleted()
                        input.send(value: 2)
                    }
                }
                signal.observe { event in events.modify { $0.append(event) } }
                input.send(value: 1)
                input.send(value: 3)
            }
        }
        #expect(finished)
        #expect(events.value == [.value(1), .value(1), .completed, .completed])
    }

    @Test(arguments: [_SignalCoreKind.lockFree, .locked])
    func disposalDuringDeliveryStopsTheDisposedObserverAtOnce(kind: _SignalCoreKind) {
        let first = Box<[Int]>([])
        let second = Box<[Int]>([])
        let finished = runWithWatchdog {
            withCoreKind(kind) {
                let (signal, input) = Signal<Int, Never>.pipe()
                let secondDisposable = Box<(any Disposable)?>(nil)
                let selfDisposable = Box<(any Disposable)?>(nil)
                selfDisposable.value = signal.observeValues { value in
                    first.modify { $0.append(value) }
                    secondDisposable.value?.dispose()
                    if value == 2 {
                        input.send(value: 3)
                        selfDisposable.value?.dispose()
                    }
                }
                secondDisposable.value = signal.observeValues { value in second.modify { $0.append(value) } }
                input.send(value: 1)
                input.send(value: 2)
                input.send(value: 4)
            }
        }
        #expect(finished)
        #expect(first.value == [1, 2])
        #expect(second.value == [])
    }

    @Test func observerAddedDuringDeliverySeesOnlyLaterEvents() {
        let late = Box<[Int]>([])
        let finished = runWithWatchdog {
            let (signal, input) = Signal<Int, Never>.pipe()
            signal.observeValues { value in
                if value == 1 {
                    signal.observeValues { lateValue in late.modify { $0.append(lateValue) } }
                }
            }
            input.send(value: 1)
            input.send(value: 2)
        }
        #expect(finished)
        #expect(late.value == [2])
    }

    @Test func bindingTargetReleasedWhileItsSourceDeliversEndsTheBinding() {
        let received = Box<[Int]>([])
        let lifetimeEnded = Box(false)
        let finished = runWithWatchdog {
            final class Owner { let token = Lifetime.Token() }
            var owner: Owner? = Owner()
            let lifetime = Lifetime(owner!.token)
            lifetime.observeEnded { lifetimeEnded.value = true }
            let target = BindingTarget<Int>(lifetime: lifetime) { value in
                received.modify { $0.append(value) }
                // The target's owner goes away inside the delivery of 2.
                if value == 2 { owner = nil }
            }
            let (source, input) = Signal<Int, Never>.pipe()
            target <~ source
            input.send(value: 1)
            input.send(value: 2)
            input.send(value: 3)
        }
        #expect(finished)
        #expect(lifetimeEnded.value)
        #expect(received.value == [1, 2])
    }

    @Test func mutablePropertyTargetReleasedWhileItsSourceDelivers() {
        let finished = runWithWatchdog {
            let (source, input) = Signal<Int, Never>.pipe()
            var target: MutableProperty<Int>? = MutableProperty(0)
            weak let weakTarget = target
            target! <~ source
            target!.signal.observeValues { value in if value == 2 { target = nil } }
            input.send(value: 1)
            input.send(value: 2)
            input.send(value: 3)
            #expect(weakTarget == nil)
        }
        #expect(finished)
    }
}

/// Observers registered from inside a delivery, behind reentrant events already queued.
@Suite("Reentrant registration")
struct ReentrantRegistrationTests {
    /// Regression: an observer registered after a reentrant send received the queued event,
    /// which was sent before it observed.
    @Test func anObserverAddedAfterAReentrantSendSeesOnlyLaterEvents() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let late = Recorder<Int, Never>()
        let disposedLate = Recorder<Int, Never>()
        signal.observeValues { value in
            guard value == 1 else { return }
            input.send(value: 2)
            signal.observe(late.observer)
            signal.observe(disposedLate.observer)?.dispose()
        }
        input.send(value: 1)
        input.send(value: 3)
        #expect(late.values == [3])
        #expect(disposedLate.events.isEmpty)
    }

    @Test func anObserverAddedBehindAQueuedTerminalEventIsInterrupted() {
        let (signal, input) = Signal<Int, Never>.pipe()
        let late = Recorder<Int, Never>()
        let all = Recorder<Int, Never>()
        signal.observe(all.observer)
        signal.observeValues { _ in
            input.sendCompleted()
            signal.observe(late.observer)
        }
        input.send(value: 1)
        #expect(all.events == [.value(1), .completed])
        #expect(late.events == [.interrupted])
    }
}

/// A value type that names the signal of the contention test in reports.
struct ContentionMarker: Sendable { let value: Int }

@Suite("Contention report")
struct ContentionReportTests {
    /// A value sent from thread B into a signal whose delivery on thread A waits for B
    /// deadlocks (as in ReactiveSwift). Debug builds say so once the send has waited: the test
    /// breaks the deadlock with a timeout and reads the report.
    @Test func aSendWaitingForADeliveryThatWaitsForItIsReportedOnce() {
        #if DEBUG
            let ours = contentionReports(naming: "ContentionMarker") { onValue in
                // The report belongs to the lock-free core: create it as such even while a test
                // on another thread has switched new signals to the locked reference core.
                let (signal, input) = withCoreKind(.lockFree) { Signal<ContentionMarker, Never>.pipe() }
                signal.observeValues { onValue($0.value) }
                return { input.send(value: ContentionMarker(value: $0)) }
            }
            #expect(ours.count == 1)
            #expect(ours.first?.contains("has waited 0.2 s for a delivery of Signal<ContentionMarker, Never>") == true)
            #expect(ours.first?.contains("A send that waits for its own delivery deadlocks") == true)
        #endif
    }
}

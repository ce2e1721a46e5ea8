import Testing
@testable @_spi(Testing) import ReactiveLoopCore

/// The lock-free core and the lock-based reference core must agree on every single-threaded
/// history: random sequences of sends, observes, disposals, reentrant sends and terminations.
@Suite("Differential")
struct DifferentialTests {
    /// A small deterministic generator, so that a failing seed can be replayed.
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// Runs the history for `seed` on a core of `kind` and returns what every observer saw.
    static func history(seed: UInt64, kind: _SignalCoreKind) -> [String] {
        var random = Generator(state: seed)
        var log: [String] = []
        withCoreKind(kind) {
            let (signal, input) = Signal<Int, TestError>.pipe()
            var disposables: [(any Disposable)?] = []
            var nextValue = 0
            for _ in 0..<300 {
                switch random.next(100) {
                case 0..<45:
                    nextValue += 1
                    input.send(value: nextValue)
                case 45..<65:
                    let id = disposables.count
                    disposables.append(signal.observe { event in log.append("o\(id) \(event)") })
                case 65..<75:
                    guard !disposables.isEmpty else { continue }
                    let index = random.next(disposables.count)
                    log.append("dispose o\(index)")
                    disposables[index]?.dispose()
                case 75..<88:
                    // An observer that sends again from inside its own delivery, once.
                    let id = disposables.count
                    var fired = false
                    disposables.append(
                        signal.observe { event in
                            log.append("r\(id) \(event)")
                            if !fired, let value = event.value {
                                fired = true
                                input.send(value: value * 1000)
                            }
                        })
                case 88..<96:
                    // Observe and dispose from inside a delivery.
                    let id = disposables.count
                    disposables.append(
                        signal.observe { event in
                            log.append("d\(id) \(event)")
                            if event.value != nil, let victim = disposables.indices.randomElementStable(id) {
                                disposables[victim]?.dispose()
                            }
                        })
                default:
                    switch random.next(3) {
                    case 0: input.sendCompleted()
                    case 1: input.send(error: TestError(code: nextValue))
                    default: input.sendInterrupted()
                    }
                    log.append("terminated")
                }
            }
        }
        return log
    }

    @Test(arguments: 1...40)
    func lockFreeAndLockedCoresAgree(seed: UInt64) {
        let lockFree = Self.history(seed: seed, kind: .lockFree)
        let locked = Self.history(seed: seed, kind: .locked)
        #expect(lockFree == locked, "seed \(seed)")
        #expect(lockFree.count > 50, "seed \(seed) exercised too little")
    }
}

extension Range where Bound == Int {
    /// A deterministic pick that depends only on `salt` and the range (no global randomness).
    fileprivate func randomElementStable(_ salt: Int) -> Int? {
        isEmpty ? nil : lowerBound + (salt * 7 + 3) % count
    }
}

import Foundation
import Testing
@testable import ReactiveLoopCore

@Suite("Atomic and Bag")
struct AtomicBagTests {
    @Test func atomicModifySwapAndWithValue() {
        let atomic = ReactiveLoopCore.Atomic(1)
        #expect(
            atomic.modify { value -> Int in
                value += 1
                return value * 10
            } == 20)
        #expect(atomic.swap(5) == 2)
        #expect(atomic.withValue { $0 + 1 } == 6)
        atomic.value = 7
        #expect(atomic.value == 7)
    }

    @Test func atomicModifyIsAtomicAcrossThreads() {
        let atomic = ReactiveLoopCore.Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<1_000 { atomic.modify { $0 += 1 } }
        }
        #expect(atomic.value == 8_000)
    }

    @Test func bagRemovesExactlyTheInsertionItsTokenNames() {
        var bag = Bag<String>()
        let first = bag.insert("a")
        let second = bag.insert("a")
        bag.insert("b")
        #expect(Array(bag) == ["a", "a", "b"])
        #expect(bag.remove(using: second) == "a")
        #expect(bag.remove(using: second) == nil)
        #expect(Array(bag) == ["a", "b"])
        #expect(bag.remove(using: first) == "a")
        #expect(bag.count == 1)
        #expect(bag[bag.startIndex] == "b")
        #expect(Array(Bag([1, 2, 3])) == [1, 2, 3])
    }
}

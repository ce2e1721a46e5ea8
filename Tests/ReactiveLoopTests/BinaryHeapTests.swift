import Testing
@testable import ReactiveLoopCore

/// A heap element that records its index, as the queue scheduler's actions do.
final class IndexedValue: _HeapElement {
    let value: Int
    var index = -1
    init(_ value: Int) { self.value = value }
    func precedes(_ other: IndexedValue) -> Bool { value < other.value }
    func heapIndexDidChange(to index: Int) { self.index = index }
}

@Suite("Binary heap")
struct BinaryHeapTests {
    /// Random inserts, removals from the middle (by recorded index) and from the top agree with a
    /// sorted reference, and every element always knows where it is.
    @Test func agreesWithASortedReference() {
        var generator = SystemRandomNumberGenerator()
        var heap = _BinaryHeap<IndexedValue>()
        var live: [IndexedValue] = []
        for step in 0..<5_000 {
            switch Int.random(in: 0..<3, using: &generator) {
            case 0, 1:
                let element = IndexedValue(Int.random(in: 0..<1_000, using: &generator))
                heap.insert(element)
                live.append(element)
            default:
                guard !live.isEmpty else { continue }
                let victim = live.remove(at: Int.random(in: 0..<live.count, using: &generator))
                #expect(heap.remove(at: victim.index) === victim)
                #expect(victim.index == -1)
            }
            if step % 100 == 0 {
                #expect(heap.first?.value == live.map(\.value).min())
                #expect(live.allSatisfy { heap.storage[$0.index] === $0 })
            }
        }
        heap.removeAll { $0.value % 2 == 0 }
        live.removeAll { $0.value % 2 == 0 }
        var drained: [Int] = []
        while heap.count > 0 { drained.append(heap.remove(at: 0).value) }
        #expect(drained == live.map(\.value).sorted())
    }
}

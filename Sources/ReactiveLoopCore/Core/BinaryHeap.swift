/// An element of a `_BinaryHeap`.
///
/// Package access: the runtime module's scheduler shares it; not part of the API.
@usableFromInline
package protocol _HeapElement {
    /// Whether `self` comes out of the heap before `other`.
    func precedes(_ other: Self) -> Bool
    /// Called when the element moves to `index`, or leaves the heap (-1). Elements that must be
    /// removed from the middle of the heap record it; the default does nothing.
    func heapIndexDidChange(to index: Int)
}

extension _HeapElement {
    /// Does nothing: the element is only ever removed from the top.
    @inlinable
    package func heapIndexDidChange(to index: Int) {}
}

/// A binary min-heap: insertion and removal (from the top, or at a known index) in O(log n).
///
/// Used by the schedulers for their timed actions. `@inlinable` so that each user gets it
/// specialized for its element type (no generic call per comparison).
@usableFromInline
package struct _BinaryHeap<Element: _HeapElement> {
    @usableFromInline var storage: ContiguousArray<Element> = []

    /// An empty heap.
    @inlinable
    package init() {}

    /// How many elements the heap holds.
    @inlinable
    package var count: Int { storage.count }

    /// The elements, in heap order.
    @inlinable
    package var elements: ContiguousArray<Element> { storage }

    /// The element that comes out first, if any.
    @inlinable
    package var first: Element? { storage.first }

    /// Adds `element`.
    @inlinable
    package mutating func insert(_ element: Element) {
        storage.append(element)
        siftUp(storage.count - 1)
    }

    /// Removes and returns the element at `index` (0 is the top).
    @inlinable
    @discardableResult
    package mutating func remove(at index: Int) -> Element {
        let removed = storage[index]
        let last = storage.removeLast()
        removed.heapIndexDidChange(to: -1)
        if index < storage.count {
            storage[index] = last
            if index > 0 && last.precedes(storage[(index - 1) / 2]) {
                siftUp(index)
            } else {
                siftDown(index)
            }
        }
        return removed
    }

    /// Removes every element for which `shouldRemove` is true, then restores the heap order.
    @inlinable
    package mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        storage.removeAll(where: shouldRemove)
        var index = storage.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
        for (position, element) in storage.enumerated() { element.heapIndexDidChange(to: position) }
    }

    /// Removes every element.
    @inlinable
    package mutating func removeAll() {
        for element in storage { element.heapIndexDidChange(to: -1) }
        storage.removeAll()
    }

    // The sifts work on the array's buffer: one uniqueness check per sift, not one per move.
    @inlinable
    mutating func siftUp(_ start: Int) {
        storage.withUnsafeMutableBufferPointer { storage in
            var index = start
            let element = storage[index]
            while index > 0 {
                let parent = (index - 1) / 2
                guard element.precedes(storage[parent]) else { break }
                storage[index] = storage[parent]
                storage[index].heapIndexDidChange(to: index)
                index = parent
            }
            storage[index] = element
            element.heapIndexDidChange(to: index)
        }
    }

    @inlinable
    mutating func siftDown(_ start: Int) {
        storage.withUnsafeMutableBufferPointer { storage in
            var index = start
            let element = storage[index]
            let count = storage.count
            while true {
                var child = 2 * index + 1
                guard child < count else { break }
                if child + 1 < count && storage[child + 1].precedes(storage[child]) { child += 1 }
                guard storage[child].precedes(element) else { break }
                storage[index] = storage[child]
                storage[index].heapIndexDidChange(to: index)
                index = child
            }
            storage[index] = element
            element.heapIndexDidChange(to: index)
        }
    }
}

/// An unordered collection that hands out a token for each insertion, to remove exactly that
/// element later, even when equal elements were inserted (ReactiveSwift's `Bag`).
///
/// Elements are kept in insertion order. Inserting is O(1); removing is O(n).
public struct Bag<Element> {
    /// Identifies one insertion.
    public struct Token: Hashable, Sendable {
        fileprivate let id: UInt64
    }

    private var elements: ContiguousArray<Element> = []
    private var tokens: ContiguousArray<UInt64> = []
    private var nextID: UInt64 = 0

    /// An empty bag.
    public init() {}

    /// A bag holding `elements`, in order.
    public init<S: Sequence>(_ elements: S) where S.Element == Element {
        for element in elements { insert(element) }
    }

    /// Inserts `value` and returns the token that removes it.
    @discardableResult
    public mutating func insert(_ value: Element) -> Token {
        let token = Token(id: nextID)
        nextID += 1
        elements.append(value)
        tokens.append(token.id)
        return token
    }

    /// Removes the element inserted with `token`.
    ///
    /// - Returns: The element, or `nil` if it was already removed.
    @discardableResult
    public mutating func remove(using token: Token) -> Element? {
        guard let index = tokens.firstIndex(of: token.id) else { return nil }
        tokens.remove(at: index)
        return elements.remove(at: index)
    }
}

extension Bag: RandomAccessCollection {
    /// The position of the first element.
    public var startIndex: Int { elements.startIndex }

    /// The position after the last element.
    public var endIndex: Int { elements.endIndex }

    /// The element at `index`.
    public subscript(index: Int) -> Element { elements[index] }

    /// Iterates the elements in insertion order.
    public func makeIterator() -> Iterator {
        Iterator(base: elements.makeIterator())
    }

    /// Iterates a bag's elements in insertion order.
    public struct Iterator: IteratorProtocol {
        fileprivate var base: ContiguousArray<Element>.Iterator

        /// The next element, or `nil` at the end.
        public mutating func next() -> Element? { base.next() }
    }
}

extension Bag: Sendable where Element: Sendable {}

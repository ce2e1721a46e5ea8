// concat and prefix: one producer's run after another's.

extension SignalProducer {
    /// Runs `next` after this producer completes. A failure or interruption of either ends the
    /// whole run.
    public func concat(_ next: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        SignalProducer(chain: .pair(_ConcatChain(self), _ConcatChain(next)))
    }

    /// Runs `next` after this producer completes; see `concat(_:)`.
    public func concat<Next: SignalProducerConvertible>(_ next: Next) -> SignalProducer<Value, Error>
    where Next.Value == Value, Next.Error == Error {
        concat(next.producer)
    }

    /// Sends `value` after this producer completes, then completes.
    public func concat(value: Value) -> SignalProducer<Value, Error> {
        concat(SignalProducer(value: value))
    }

    /// Fails with `error` after this producer completes.
    public func concat(error: Error) -> SignalProducer<Value, Error> {
        concat(SignalProducer(error: error))
    }

    /// Runs `previous` first, then this producer.
    public func prefix(_ previous: SignalProducer<Value, Error>) -> SignalProducer<Value, Error> {
        previous.concat(self)
    }

    /// Runs `previous` first, then this producer.
    public func prefix<Previous: SignalProducerConvertible>(_ previous: Previous) -> SignalProducer<Value, Error>
    where Previous.Value == Value, Previous.Error == Error {
        prefix(previous.producer)
    }

    /// Sends `value` first, then this producer's events.
    public func prefix(value: Value) -> SignalProducer<Value, Error> {
        prefix(SignalProducer(value: value))
    }
}

/// The parts of a chain of `concat`, `prefix` and `then`, as a tree: chaining costs O(1),
/// however the chain nests (`a.concat(b).concat(c)` or `a.concat(b.concat(c))`), and a start
/// walks the tree without recursion into one flat list of runs, which `flatten(.concat)` runs
/// one after another in constant stack. Nesting producers instead made the start of a chain of
/// 100,000 recurse 100,000 levels deep.
@usableFromInline
final class _ConcatChain<Value, Error: Swift.Error> {
    enum Node {
        /// One producer.
        case part(SignalProducer<Value, Error>)
        /// `first`, then `second`.
        case pair(_ConcatChain, _ConcatChain)
        /// `base` with its values dropped (the left side of `then`).
        case ignoringValues(_ConcatChain)
        /// Nothing: what `deinit` leaves behind.
        case empty
    }

    // Immutable once shared; `deinit` empties the nodes it alone owns.
    private(set) var node: Node

    init(node: Node) {
        self.node = node
    }

    /// Releases the tree without recursion: a chain of 100,000 would otherwise be freed 100,000
    /// `deinit`s deep.
    deinit {
        var pending: [_ConcatChain] = []
        Self.moveChildren(of: &node, to: &pending)
        while var chain = pending.popLast() {
            if isKnownUniquelyReferenced(&chain) { Self.moveChildren(of: &chain.node, to: &pending) }
        }
    }

    private static func moveChildren(of node: inout Node, to pending: inout [_ConcatChain]) {
        switch node {
        case let .pair(first, second): pending += [first, second]
        case let .ignoringValues(base): pending.append(base)
        case .part, .empty: return
        }
        node = .empty
    }

    /// The chain of `producer`: its own parts if it is a chain.
    convenience init(_ producer: SignalProducer<Value, Error>) {
        if let chain = producer._chain {
            self.init(node: chain.node)
        } else {
            self.init(node: .part(producer))
        }
    }

    static func pair(_ first: _ConcatChain, _ second: _ConcatChain) -> _ConcatChain {
        _ConcatChain(node: .pair(first, second))
    }

    /// Every part in order, walked with an explicit stack.
    func parts() -> [SignalProducer<Value, Error>] {
        var parts: [SignalProducer<Value, Error>] = []
        var pending: [(chain: _ConcatChain, ignoringValues: Bool)] = [(self, false)]
        while let (chain, ignoringValues) = pending.popLast() {
            switch chain.node {
            case let .part(producer):
                parts.append(ignoringValues ? producer.filter { _ in false } : producer)
            case let .pair(first, second):
                pending.append((second, ignoringValues))
                pending.append((first, ignoringValues))
            case let .ignoringValues(base):
                pending.append((base, true))
            case .empty:
                break
            }
        }
        return parts
    }
}

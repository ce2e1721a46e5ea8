// repeat(_:): a producer run several times in a row.

extension SignalProducer {
    /// Runs the producer `count` times in a row, each after the previous one completed. A
    /// failure or interruption ends the whole. `repeat(0)` completes at once.
    ///
    /// Each run starts when the previous one completes: starting costs the same for any
    /// `count`, and so does memory.
    ///
    /// - Precondition: `count >= 0`.
    public func `repeat`(_ count: Int) -> SignalProducer<Value, Error> {
        _require(count >= 0, "repeat(_:): count must be >= 0, got \(count)")
        guard count > 0 else { return .empty }
        guard count > 1 else { return self }
        return _restarting {
            var remaining = count - 1
            return { event in
                guard case .completed = event, remaining > 0 else { return false }
                remaining -= 1
                return true
            }
        }
    }
}

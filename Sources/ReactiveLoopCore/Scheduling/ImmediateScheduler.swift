/// A scheduler that runs every action at once, on the calling thread.
public final class ImmediateScheduler: Scheduler {
    /// Creates an immediate scheduler.
    public init() {}

    /// Runs `action` now and returns `nil`: there is nothing left to cancel.
    @discardableResult
    public func schedule(_ action: @escaping () -> Void) -> (any Disposable)? {
        action()
        return nil
    }
}

extension ImmediateScheduler: @unchecked Sendable {}  // Stateless.

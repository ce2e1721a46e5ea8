/// Runs actions somewhere: at once, on a queue, on an event loop.
///
/// - Note: The full scheduler contract (ordering, cancellation, time) lands with the scheduler
///   issue; today this module has `ImmediateScheduler`, which bindings use by default.
public protocol Scheduler: AnyObject {
    /// Runs `action`, now or later depending on the scheduler.
    ///
    /// - Returns: A disposable that cancels the action if it has not started, or `nil` if the
    ///   action cannot be cancelled (for example because it has already run).
    @discardableResult
    func schedule(_ action: @escaping () -> Void) -> (any Disposable)?
}

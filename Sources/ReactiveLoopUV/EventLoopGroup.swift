import ReactiveLoopCore
import Synchronization

/// Several event loops, each on a thread of its own, for work spread over cores.
public final class EventLoopGroup: Sendable {
    /// The loops, in the order `next()` hands them out.
    public let loops: [EventLoop]
    private let counter = Atomic<Int>(0)

    /// Starts `threads` loops, each on a new thread.
    ///
    /// - Precondition: `threads > 0`.
    /// - Throws: `UVError` if libuv cannot create a loop (the loops already started are stopped).
    public init(threads: Int) throws(UVError) {
        _require(threads > 0, "EventLoopGroup(threads:): threads must be > 0, got \(threads)")
        var loops: [EventLoop] = []
        do {
            for index in 0..<threads {
                loops.append(try EventLoop.startOnNewThread(name: "ReactiveLoopUV-\(index)"))
            }
        } catch {
            for loop in loops { loop.stop() }
            throw error
        }
        self.loops = loops
    }

    /// The next loop, round robin.
    public func next() -> EventLoop {
        loops[counter.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// The loop the calling thread is driving, if it is one of this group's; else `next()`.
    public func any() -> EventLoop {
        if let current = EventLoop.current, loops.contains(where: { $0 === current }) { return current }
        return next()
    }

    /// Stops every loop and waits until all have shut down (see `EventLoop`'s "Shutdown").
    ///
    /// - Precondition: Not called on one of the group's loop threads.
    public func shutdownGracefully() {
        for loop in loops { loop.stop() }
        for loop in loops { loop.waitUntilStopped() }
    }
}

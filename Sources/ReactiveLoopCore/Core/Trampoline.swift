#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Turns the recursion of runs that start runs into iteration, per owner and per thread.
///
/// A run that starts its next run from inside the previous one's terminal event (flatten's
/// queue, `retry`, `repeat`, a chain of `concat`s) would grow the stack by a few frames per run
/// when the runs finish synchronously: 100,000 synchronous runs overflow a thread's stack.
/// `_Trampoline.run(owner:_:)` runs its body at once, unless the calling thread is already
/// inside `run` for the same owner; then the body waits until that outer call's current body
/// returns, and runs next, in order. Other owners and other threads are not affected, so a
/// synchronous start elsewhere (a blocking `first()` inside a start handler, say) still runs
/// synchronously.
@usableFromInline
enum _Trampoline {
    /// The owners the calling thread is inside of, innermost last, each with the bodies that
    /// wait for it.
    final class Frames {
        var stack: [(owner: ObjectIdentifier, pending: ContiguousArray<() -> Void>)] = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let result = pthread_key_create(&key) { frames in
            if let frames { Unmanaged<Frames>.fromOpaque(frames).release() }
        }
        _require(result == 0, "_Trampoline: pthread_key_create failed with \(result)")
        return key
    }()

    /// The calling thread's frames, created on first use and released when the thread ends.
    private static var frames: Frames {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<Frames>.fromOpaque(existing).takeUnretainedValue()
        }
        let frames = Frames()
        pthread_setspecific(key, Unmanaged.passRetained(frames).toOpaque())
        return frames
    }

    /// Runs `body` now, or, if this thread is already inside `run` for `owner`, right after the
    /// body that is running for it returns.
    @usableFromInline
    static func run(owner: AnyObject, _ body: @escaping () -> Void) {
        let frames = self.frames
        let id = ObjectIdentifier(owner)
        if let index = frames.stack.lastIndex(where: { $0.owner == id }) {
            frames.stack[index].pending.append(body)
            return
        }
        let depth = frames.stack.count
        frames.stack.append((id, []))
        defer { frames.stack.removeLast() }
        body()
        var next = 0
        while next < frames.stack[depth].pending.count {
            let body = frames.stack[depth].pending[next]
            next += 1
            body()
        }
    }
}

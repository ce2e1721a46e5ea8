import CLibUV
import ReactiveLoopCore

/// An object that owns one libuv handle on a loop. The loop closes the handle when it shuts down
/// (reporting `interrupted`), and from its first run holds the owner until the handle is closed,
/// so an open socket lives whether or not anyone refers to it. Before the loop first runs it
/// holds the owner weakly: an owner released then closes its handle in `deinit`
/// (`closeOrphanedHandle()`), so a loop released without running frees its sockets.
///
/// Closing is safe from inside any callback, any number of times: the owner stays alive until
/// libuv's close callback, since callbacks of the handle (a pending write's, the rest of a batch
/// of datagrams) may come until then. Every member is for the loop thread, except
/// `closeFromAnyThread()`.
protocol _LoopOwnedHandle: AnyObject {
    var loop: EventLoop { get }
    /// The open handle; nil once closing.
    var handle: UnsafeMutablePointer<uv_handle_t>? { get set }
    /// Called once as the handle starts closing: end the streams (`interrupted` when the loop is
    /// shutting down, `completed` otherwise).
    func handleWillClose(interrupted: Bool)
}

extension _LoopOwnedHandle {
    /// Takes ownership of `handle` (initialized by libuv): from now on it is closed exactly once.
    func adopt<Handle>(_ handle: UnsafeMutablePointer<Handle>) {
        loop.assertInEventLoop()
        let raw = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
        raw.pointee.data = Unmanaged.passUnretained(self as AnyObject).toOpaque()
        self.handle = raw
        loop.register(self, of: UnsafeMutableRawPointer(raw))
    }

    /// Closes the handle (once), ending the streams first.
    func closeOnLoop(interrupted: Bool) {
        loop.assertInEventLoop()
        guard let handle else { return }
        self.handle = nil
        loop.unregister(UnsafeMutableRawPointer(handle))
        guard loop.hasRun else {
            // No callback of the handle can come before its close callback; and a loop that
            // never runs never makes that callback, so holding the owner until then would
            // keep it (and its loop) forever.
            handle.pointee.data = nil
            handleWillClose(interrupted: interrupted)
            uv_close(handle) { UnsafeMutableRawPointer($0!).deallocate() }
            return
        }
        // Released by the close callback: the handle's callbacks may name this owner until then.
        _ = Unmanaged.passRetained(self as AnyObject)
        handleWillClose(interrupted: interrupted)
        uv_close(handle) { handle in
            Unmanaged<AnyObject>.fromOpaque(handle!.pointee.data!).release()
            UnsafeMutableRawPointer(handle!).deallocate()
        }
    }

    /// Hands the open handle to `newOwner` (on success of a connect, say): it no longer closes it.
    func transferHandle(to newOwner: some _LoopOwnedHandle) {
        loop.assertInEventLoop()
        guard let handle else { return }
        self.handle = nil
        loop.unregister(UnsafeMutableRawPointer(handle))
        newOwner.adopt(handle)
    }

    /// Closes the handle from any thread (on the loop thread); a no-op once closed or stopped.
    func closeFromAnyThread() {
        _ = loop.onLoopThread { [self] in closeOnLoop(interrupted: false) }
    }

    /// For `deinit`: closes a handle still open, which only an owner released before its loop
    /// first ran can have; a run of its input ends with `interrupted`. (A run does not keep
    /// its owner alive: the loop does that, from its first run.)
    func closeOrphanedHandle(thenClosing descriptor: Int32 = -1) {
        guard let handle else { return }
        self.handle = nil
        handleWillClose(interrupted: true)
        loop.closeOrphan(handle, thenClosing: descriptor)
    }

    /// The owner of a handle, in a libuv callback.
    static func owner<Handle>(of handle: UnsafeMutablePointer<Handle>?) -> Self {
        let raw = UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_handle_t.self)
        let object = Unmanaged<AnyObject>.fromOpaque(raw.pointee.data!).takeUnretainedValue()
        // The owner's exact class is checked with one comparison; a dynamic cast costs about 30
        // instructions, on every callback of every handle (several per datagram received).
        if ObjectIdentifier(type(of: object)) == ObjectIdentifier(Self.self) {
            return unsafeDowncast(object, to: Self.self)
        }
        return object as! Self
    }

    /// Calls `body` with the owner of a handle, in a libuv callback, without retaining it: for
    /// the callbacks that come for every datagram. Callbacks come only while the loop runs, and
    /// from its first run the loop holds the owner until the handle's close callback (see
    /// `closeOnLoop(interrupted:)`), so the owner outlives any other callback, whatever `body`
    /// closes or releases.
    @inline(__always)
    static func withOwner<Handle, Result>(
        of handle: UnsafeMutablePointer<Handle>?, _ body: (Self) -> Result
    ) -> Result {
        let raw = UnsafeMutableRawPointer(handle!).assumingMemoryBound(to: uv_handle_t.self)
        let data = raw.pointee.data!
        let isExact = Unmanaged<AnyObject>.fromOpaque(data)._withUnsafeGuaranteedRef {
            ObjectIdentifier(type(of: $0)) == ObjectIdentifier(Self.self)
        }
        guard isExact else { return body(owner(of: handle)) }
        return Unmanaged<Self>.fromOpaque(data)._withUnsafeGuaranteedRef(body)
    }
}

/// Allocates a handle, runs libuv's `initialize` on it, and frees it again if that fails.
func allocateHandle<Handle>(
    _ type: Handle.Type, _ operation: String, _ initialize: (UnsafeMutablePointer<Handle>) -> Int32
) throws(UVError) -> UnsafeMutablePointer<Handle> {
    let handle = UnsafeMutablePointer<Handle>.allocate(capacity: 1)
    let status = initialize(handle)
    if status < 0 {
        handle.deallocate()
        throw UVError(code: status, operation: operation)
    }
    return handle
}

/// The one run of a handle's input stream (datagrams, bytes, connections). Reading starts when
/// the producer is started and stops when its run is disposed, so what arrives meanwhile waits
/// in the kernel, not lost. Confined to the loop thread.
final class _SingleReader<Value>: @unchecked Sendable {  // Confined to the loop thread.
    private(set) var observer: Signal<Value, UVError>.Observer?
    private var run: UInt64 = 0

    /// The stream of `owner`: started on the loop thread, one run at a time (a second
    /// concurrent start fails with `EALREADY`), `completed` once the handle is closed.
    func producer(
        _ api: String, loop: EventLoop, isOpen: @escaping () -> Bool, start: @escaping () -> UVError?,
        stop: @escaping () -> Void
    ) -> SignalProducer<Value, UVError> {
        SignalProducer { [self] observer, lifetime in
            let begin = { [self] in
                guard !lifetime.hasEnded else { return }
                guard isOpen() else { return observer.sendCompleted() }
                guard self.observer == nil else {
                    let code = Int32(UV_EALREADY.rawValue)
                    return observer.send(error: UVError(code: code, operation: "\(api): already started"))
                }
                if let error = start() { return observer.send(error: error) }
                run += 1
                let mine = run
                self.observer = observer
                lifetime.observeEnded {
                    _ = loop.onLoopThread { [self] in
                        guard run == mine, self.observer != nil else { return }
                        self.observer = nil
                        if isOpen() { stop() }
                    }
                }
            }
            if !loop.onLoopThread(begin) { observer.sendInterrupted() }
        }
    }

    /// Ends the current run, if any, with `completed` or `interrupted`.
    func finish(interrupted: Bool) {
        guard let observer else { return }
        self.observer = nil
        if interrupted { observer.sendInterrupted() } else { observer.sendCompleted() }
    }

    /// Ends the current run, if any, with `error`.
    func fail(_ error: UVError) {
        guard let observer else { return }
        self.observer = nil
        observer.send(error: error)
    }
}

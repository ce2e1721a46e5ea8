// Streams as async sequences: `values` on SignalProducer, Signal and properties.

/// What an async sequence of a stream's values keeps when values arrive faster than the
/// consumer asks for them.
///
/// Values are pushed by the stream as it sends them; the sequence cannot slow the stream down.
/// The buffer holds the values sent and not yet returned by `next()`.
public enum AsyncBufferingPolicy: Sendable, Equatable {
    /// Keep every value (the default). Memory grows with the consumer's backlog.
    case unbounded
    /// Keep at most this many values: the oldest ones; newer values are dropped while full.
    case bufferingOldest(Int)
    /// Keep at most this many values: the newest ones; the oldest is dropped to make room.
    case bufferingNewest(Int)

    /// The limit, checked: `nil` for `unbounded`.
    func checkedLimit(api: String) -> Int? {
        switch self {
        case .unbounded:
            return nil
        case let .bufferingOldest(limit), let .bufferingNewest(limit):
            _require(limit >= 0, "\(api): the buffering policy's limit must be >= 0, got \(limit)")
            return limit
        }
    }
}

/// The values of a stream as an `AsyncSequence`, for `for await` (or `for try await` when the
/// stream can fail).
///
/// - Iteration starts the producer (or starts observing the signal) when the iterator is
///   made, so a `for` loop sees every value from its start on.
/// - The stream's failure is thrown from `next()` with its own type (`Failure == Error`): a
///   stream that cannot fail gives a non-throwing sequence. Completion and interruption end
///   the sequence (`next()` returns `nil`).
/// - Leaving the loop early (`break`, `return`, a thrown error) releases the iterator, which
///   disposes the run. Cancelling the iterating task disposes the run too, and the pending
///   `next()` returns `nil`.
/// - Values are buffered as `bufferingPolicy` says (unbounded by default).
///
/// Each iterator is a separate run of the producer (or observation of the signal).
public struct AsyncValues<Value, Error: Swift.Error>: AsyncSequence {
    /// The stream's values.
    public typealias Element = Value
    /// The stream's failure, thrown by `next()`.
    public typealias Failure = Error

    @usableFromInline let begin: (_AsyncValuesState<Value, Error>) -> (any Disposable)?
    @usableFromInline let limit: Int?
    @usableFromInline let keepsNewest: Bool

    @usableFromInline
    init(
        policy: AsyncBufferingPolicy, api: String,
        begin: @escaping (_AsyncValuesState<Value, Error>) -> (any Disposable)?
    ) {
        self.begin = begin
        limit = policy.checkedLimit(api: api)
        if case .bufferingNewest = policy { keepsNewest = true } else { keepsNewest = false }
    }

    /// Starts the run and returns the iterator that reads its values.
    public func makeAsyncIterator() -> Iterator {
        let state = _AsyncValuesState<Value, Error>(limit: limit, keepsNewest: keepsNewest)
        state.attach(begin(state))
        return Iterator(handle: _AsyncValuesHandle(state))
    }

    /// Reads the values of one run; releasing it disposes the run.
    public struct Iterator: AsyncIteratorProtocol {
        let handle: _AsyncValuesHandle<Value, Error>

        /// The next value; `nil` once the stream completed or was interrupted, or the task was
        /// cancelled.
        ///
        /// - Throws: The stream's failure, once; `next()` returns `nil` after it.
        public mutating func next() async throws(Error) -> Value? {
            try await handle.state.next()
        }

        /// The next value, resuming on `actor`; see `next()`.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Error) -> Value? {
            try await handle.state.next()
        }
    }
}

extension AsyncValues: @unchecked Sendable {}  // Immutable; each iterator owns its own run.

/// Disposes the run when the iterator that owns it goes away. The run holds the state, not
/// this handle, so releasing the iterator is what ends it.
final class _AsyncValuesHandle<Value, Error: Swift.Error>: @unchecked Sendable {  // Immutable.
    let state: _AsyncValuesState<Value, Error>

    init(_ state: _AsyncValuesState<Value, Error>) { self.state = state }

    deinit { state.cancel() }
}

/// The buffer between a stream's deliveries and the iterator's `next()` calls.
///
/// Thread safety: every field is protected by `lock`; continuations are resumed after it is
/// released.
@usableFromInline
final class _AsyncValuesState<Value, Error: Swift.Error>: @unchecked Sendable {
    private enum End {
        case completed
        case failed(Error)
    }

    private let lock = _Lock.make()
    private let limit: Int?
    private let keepsNewest: Bool
    private var buffer: [Value] = []
    private var head = 0
    private var end: End?
    private var cancelled = false
    private var waiting: UnsafeContinuation<Result<Value?, Error>, Never>?
    private var run: (any Disposable)?

    init(limit: Int?, keepsNewest: Bool) {
        self.limit = limit
        self.keepsNewest = keepsNewest
    }

    /// Keeps the run's disposable while the run goes on; disposes it at once if the iterator
    /// is already gone. (A run that ended during its start has nothing left to dispose.)
    func attach(_ disposable: (any Disposable)?) {
        let disposeNow: Bool = lock.withLock {
            if cancelled { return true }
            if end == nil { run = disposable }
            return false
        }
        if disposeNow { disposable?.dispose() }
    }

    /// One event from the stream.
    @usableFromInline
    func receive(_ event: Signal<Value, Error>.Event) {
        lock.lock()
        guard end == nil, !cancelled else { return lock.unlock() }
        switch event {
        case let .value(value):
            if let continuation = waiting {
                waiting = nil
                lock.unlock()
                return continuation.resume(returning: .success(value))
            }
            store(value)
            lock.unlock()
        case let .failed(error):
            finish(.failed(error))
        case .completed, .interrupted:
            finish(.completed)
        }
    }

    /// Buffers `value` as the policy says. Called with the lock held.
    private func store(_ value: Value) {
        if let limit, buffer.count - head >= limit {
            guard keepsNewest, limit > 0 else { return }
            head += 1
        }
        buffer.append(value)
        if head > 32, head * 2 > buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
    }

    /// Records the end and wakes a waiting `next()`. Called with the lock held; releases it,
    /// then releases the run's disposable (whose release may run code of its own).
    private func finish(_ outcome: End) {
        end = outcome
        let finishedRun = run
        run = nil
        let continuation = waiting
        waiting = nil
        let result = continuation == nil ? nil : takeEnd()
        lock.unlock()
        if let continuation, let result { continuation.resume(returning: result) }
        withExtendedLifetime(finishedRun) {}
    }

    /// What `next()` returns at the end: the failure once, then `nil`. Called with the lock held.
    private func takeEnd() -> Result<Value?, Error> {
        guard case let .failed(error) = end else { return .success(nil) }
        end = .completed
        return .failure(error)
    }

    /// Ends the iteration: disposes the run and returns `nil` to a waiting `next()`.
    func cancel() {
        lock.lock()
        guard !cancelled else { return lock.unlock() }
        cancelled = true
        let continuation = waiting
        waiting = nil
        let disposable = run
        run = nil
        buffer = []
        head = 0
        lock.unlock()
        disposable?.dispose()
        continuation?.resume(returning: .success(nil))
    }

    func next() async throws(Error) -> Value? {
        let result: Result<Value?, Error> = await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                lock.lock()
                if head < buffer.count {
                    let value = buffer[head]
                    head += 1
                    if head == buffer.count {
                        buffer.removeAll(keepingCapacity: true)
                        head = 0
                    }
                    lock.unlock()
                    return continuation.resume(returning: .success(value))
                }
                if cancelled || end != nil {
                    let result = cancelled ? .success(nil) : takeEnd()
                    lock.unlock()
                    return continuation.resume(returning: result)
                }
                let concurrent = waiting != nil
                if !concurrent { waiting = continuation }
                lock.unlock()
                _require(
                    !concurrent,
                    "AsyncValues.Iterator.next(): called while another call on the same iterator is waiting; an iterator has one consumer"
                )
            }
        } onCancel: {
            cancel()
        }
        return try result.get()
    }
}

extension SignalProducer {
    /// The values of a run of this producer, as an async sequence; see `AsyncValues`.
    ///
    /// ```swift
    /// for try await line in connection.lines.values { handle(line) }
    /// ```
    public var values: AsyncValues<Value, Error> {
        values(bufferingPolicy: .unbounded)
    }

    /// The values of a run of this producer, buffered as `bufferingPolicy` says.
    ///
    /// - Precondition: A buffering limit is not negative.
    public func values(bufferingPolicy: AsyncBufferingPolicy) -> AsyncValues<Value, Error> {
        AsyncValues(policy: bufferingPolicy, api: "SignalProducer.values(bufferingPolicy:)") { state in
            self.start { event in state.receive(event) }
        }
    }
}

extension Signal {
    /// The values this signal sends from the moment the iterator is made, as an async
    /// sequence; see `AsyncValues`. A signal that has already terminated gives an empty
    /// sequence.
    public var values: AsyncValues<Value, Error> {
        values(bufferingPolicy: .unbounded)
    }

    /// The values of this signal, buffered as `bufferingPolicy` says.
    ///
    /// - Precondition: A buffering limit is not negative.
    public func values(bufferingPolicy: AsyncBufferingPolicy) -> AsyncValues<Value, Error> {
        AsyncValues(policy: bufferingPolicy, api: "Signal.values(bufferingPolicy:)") { state in
            self.observe { event in state.receive(event) }
        }
    }
}

extension PropertyProtocol {
    /// The current value, then every change, as an async sequence; it ends when the property
    /// goes away. See `AsyncValues`.
    public var values: AsyncValues<Value, Never> {
        producer.values
    }
}

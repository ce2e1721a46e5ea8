import Synchronization

/// Bytes read from a socket, handed over without a copy: a view into the buffer libuv read them
/// into, which stays alive while a view of it does.
///
/// A socket reuses its receive buffer only when no view of it is left, so keeping a
/// `ReceivedBytes` (or a slice of it) is safe; it keeps the whole buffer alive (64 KiB for a TCP
/// read, about 1.25 MiB for a batch of UDP datagrams). Copy what you keep for long
/// (`Array(bytes)`). Slicing shares the buffer and keeps the indices, as `ArraySlice` does.
public struct ReceivedBytes: RandomAccessCollection, Hashable, Sendable, CustomStringConvertible {
    @usableFromInline let storage: _ByteStorage
    /// The position of the first byte.
    public let startIndex: Int
    /// The position after the last byte.
    public let endIndex: Int

    @inlinable init(storage: _ByteStorage, range: Range<Int>) {
        self.storage = storage
        self.startIndex = range.lowerBound
        self.endIndex = range.upperBound
    }

    /// A copy of `bytes`, in a buffer of its own.
    public init(_ bytes: some Sequence<UInt8>) {
        let array = Array(bytes)
        let storage = _ByteStorage(capacity: array.count)
        array.withUnsafeBytes { storage.base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        self.init(storage: storage, range: 0..<array.count)
    }

    /// The byte at `position`.
    @inlinable public subscript(position: Int) -> UInt8 {
        precondition(position >= startIndex && position < endIndex, "ReceivedBytes: index out of range")
        return storage.base.load(fromByteOffset: position, as: UInt8.self)
    }

    /// The bytes in `bounds`, sharing this buffer.
    @inlinable public subscript(bounds: Range<Int>) -> ReceivedBytes {
        precondition(
            bounds.lowerBound >= startIndex && bounds.upperBound <= endIndex, "ReceivedBytes: range out of bounds")
        return ReceivedBytes(storage: storage, range: bounds)
    }

    /// Calls `body` with the bytes' memory, valid during the call.
    @inlinable public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows
        -> Result
    {
        try body(UnsafeRawBufferPointer(start: storage.base + startIndex, count: endIndex - startIndex))
    }

    @inlinable public func withContiguousStorageIfAvailable<Result>(
        _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
    ) rethrows -> Result? {
        try withUnsafeBytes { try body($0.bindMemory(to: UInt8.self)) }
    }

    /// The bytes decoded as UTF-8 (invalid sequences replaced), for logs and tests.
    public var description: String { String(decoding: self, as: UTF8.self) }

    public static func == (lhs: ReceivedBytes, rhs: ReceivedBytes) -> Bool {
        lhs.count == rhs.count && lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in a.elementsEqual(b) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// A receive buffer. Written by the loop thread only while no `ReceivedBytes` refers to it.
///
/// Not part of the API: `@usableFromInline` only because `ReceivedBytes`' inlinable accessors
/// read its memory.
@usableFromInline
final class _ByteStorage: @unchecked Sendable {  // Immutable while shared; see above.
    @usableFromInline let base: UnsafeMutableRawPointer
    let capacity: Int

    /// How many buffers are alive, in this process (tests check that idle sockets hold none).
    static let live = Synchronization.Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: max(capacity, 1), alignment: 16)
        _ByteStorage.live.add(1, ordering: .relaxed)
    }

    deinit {
        _ByteStorage.live.subtract(1, ordering: .relaxed)
        base.deallocate()
    }
}

/// The receive buffer of one socket: reused for the next read when nothing refers to it any
/// more, replaced otherwise. Confined to the loop thread.
struct _ReceiveBuffer {
    private var storage: _ByteStorage?
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The buffer `next()` returned last (nil before the first).
    var current: _ByteStorage? { storage }

    /// A buffer free to read into: the current one if nothing else refers to it any more.
    mutating func next() -> _ByteStorage {
        if storage == nil || !isKnownUniquelyReferenced(&storage!) {
            storage = _ByteStorage(capacity: capacity)
        }
        return storage!
    }

    /// The bytes of `next()`'s buffer, to read into (it stays `current`).
    mutating func nextBytes() -> UnsafeMutableRawBufferPointer {
        let storage = next()
        return UnsafeMutableRawBufferPointer(start: storage.base, count: storage.capacity)
    }
}

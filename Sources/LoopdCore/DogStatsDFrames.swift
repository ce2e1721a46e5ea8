/// DogStatsD's framing on a Unix stream socket (its clients' `unixstream://`): each payload,
/// what one datagram would carry (lines separated by `\n`), follows its length in bytes as a
/// 4-byte little-endian integer.
///
/// Feed it the stream's bytes as they arrive; it hands out each whole payload, without a copy
/// when the payload lies within one read. Memory: a payload that spans reads is gathered in a
/// buffer of at most `maxFrame` bytes.
public struct DogStatsDFrameDecoder {
    /// The longest payload taken, in bytes; a longer length ends the stream (see `feed`).
    public let maxFrame: Int
    /// The length being read: its bytes so far (little-endian) and how many.
    private var length: UInt32 = 0
    private var lengthBytes = 0
    /// The payload being gathered across reads, and the bytes it still needs.
    private var payload: [UInt8] = []
    private var missing = 0
    /// A frame too long was met: nothing more is taken.
    private var refused = false

    /// A decoder taking payloads of at most `maxFrame` bytes.
    ///
    /// - Precondition: `maxFrame` is in 1...Int32.max.
    public init(maxFrame: Int) {
        precondition(
            maxFrame > 0 && maxFrame <= Int(Int32.max),
            "DogStatsDFrameDecoder(maxFrame:): maxFrame must be in 1...\(Int32.max), got \(maxFrame)")
        self.maxFrame = maxFrame
    }

    /// Bytes of a frame begun (its length or its payload) and not finished: at the end of the
    /// stream, they are lost.
    public var pendingBytes: Int { lengthBytes + payload.count }

    /// The payload gathered so far of a frame not finished (empty if none).
    public var partialPayload: [UInt8] { payload }

    /// Reads `bytes`, handing each whole payload to `frame` (valid during the call only; an
    /// empty payload is skipped).
    ///
    /// - Returns: nil, or the length of a frame longer than `maxFrame`: the stream cannot be
    ///   followed past it, and the decoder takes nothing more (later calls hand out nothing and
    ///   return nil).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ frame: (UnsafeRawBufferPointer) -> Void) -> Int? {
        if refused { return nil }
        var rest = bytes[...]
        while !rest.isEmpty {
            if missing > 0 {
                let taken = rest.prefix(missing)
                payload.append(contentsOf: taken)
                missing -= taken.count
                rest = rest.dropFirst(taken.count)
                if missing == 0 {
                    payload.withUnsafeBytes { frame($0) }
                    payload.removeAll(keepingCapacity: payload.capacity <= 8192)
                }
                continue
            }
            if lengthBytes == 0 && rest.count >= 4 {
                // The common case: the length lies within this read.
                let start = rest.startIndex
                length =
                    UInt32(rest[start]) | UInt32(rest[start + 1]) << 8 | UInt32(rest[start + 2]) << 16
                    | UInt32(rest[start + 3]) << 24
                rest = rest.dropFirst(4)
            } else {
                length |= UInt32(rest.first!) << (8 * UInt32(lengthBytes))
                lengthBytes += 1
                rest = rest.dropFirst()
                if lengthBytes < 4 { continue }
                lengthBytes = 0
            }
            let count = Int(length)
            length = 0
            if count > maxFrame {
                // Nothing more is taken: the rest of the stream cannot be framed.
                refused = true
                payload = []
                return count
            }
            if count == 0 { continue }
            if rest.count >= count {
                frame(UnsafeRawBufferPointer(rebasing: rest.prefix(count)))
                rest = rest.dropFirst(count)
            } else {
                payload.reserveCapacity(count)
                payload.append(contentsOf: rest)
                missing = count - rest.count
                rest = rest.dropFirst(rest.count)
            }
        }
        return nil
    }
}

// Where the output formats write a flush, and the writers of literals, numbers and JSON strings
// that all three formats share.

/// A flush's output as a format writes it: one buffer that grows by doubling, whose appends
/// are a capacity check and a copy.
///
/// An array's append goes through a uniqueness check and generic code: about 70 to 100
/// instructions for a short literal, and a flush writes several per series.
final class OutputBytes {
    // Confined to the format writing into it; no access is held across a call out of the class.
    @exclusivity(unchecked) private var base: UnsafeMutableRawPointer
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private var capacity: Int
    /// The text of recently written numbers that have a fraction (see `append(number:)`):
    /// `numberSlots` entries of a bit pattern and `numberTextStride` bytes (a length byte, then
    /// the text), made on first use.
    @exclusivity(unchecked) private var numberTexts: UnsafeMutableRawPointer?

    /// How many numbers with a fraction the buffer remembers the text of, by their bit pattern
    /// (the slot is the top 4 bits of a multiplicative hash of it).
    static let numberSlots = 16
    /// Room per remembered number: its bit pattern (8 bytes), its text's length (1) and its text
    /// (shortest round-trip texts are at most 24 bytes).
    private static let numberTextStride = 40

    /// An empty buffer with room for `capacity` bytes (at least 256) before it first grows.
    init(capacity: Int) {
        self.capacity = Swift.max(capacity, 256)
        base = .allocate(byteCount: self.capacity, alignment: 1)
    }

    deinit {
        base.deallocate()
        numberTexts?.deallocate()
    }

    /// The bytes written so far, copied into an array.
    var bytes: [UInt8] { [UInt8](UnsafeRawBufferPointer(start: base, count: count)) }

    /// Calls `body` with the bytes written so far, in place.
    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Appends one byte.
    @inline(__always)
    func append(_ byte: UInt8) {
        if count == capacity { grow(toHold: 1) }
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count &+= 1
    }

    /// Appends `bytes`, copied at once.
    @inline(__always)
    func append(bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        if capacity &- count < bytes.count { grow(toHold: bytes.count) }
        (base + count).copyMemory(from: source, byteCount: bytes.count)
        count &+= bytes.count
    }

    /// Appends `bytes`, copied at once.
    func append(contentsOf bytes: ArraySlice<UInt8>) { bytes.withUnsafeBytes { append(bytes: $0) } }

    /// Appends `bytes`, copied at once.
    func append(contentsOf bytes: [UInt8]) { bytes.withUnsafeBytes { append(bytes: $0) } }

    /// Makes room for `extra` more bytes: twice the capacity, or what they need if that is more.
    @inline(never)
    private func grow(toHold extra: Int) {
        let needed = count + extra
        let newCapacity = Swift.max(capacity * 2, needed)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 1)
        grown.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }
}

/// A format's output as it was written, without a copy into an array: read only, so that it
/// can be handed to an output's writer on another thread.
public struct WrittenBytes: @unchecked Sendable {  // Nothing appends to the buffer any more.
    private let buffer: OutputBytes

    /// Takes `buffer`, which its format wrote and will not append to again.
    init(_ buffer: OutputBytes) { self.buffer = buffer }

    /// The number of bytes.
    public var count: Int { buffer.count }

    /// The bytes, copied into an array.
    public var bytes: [UInt8] { buffer.bytes }

    /// Calls `body` with the bytes, in place.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try buffer.withUnsafeBytes(body)
    }
}

extension OutputBytes {
    /// A literal, copied at once.
    @inline(__always)
    func append(ascii literal: StaticString) {
        literal.withUTF8Buffer { append(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A string's UTF-8 bytes, copied at once.
    func append(string: String) {
        var string = string
        string.withUTF8 { append(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A number as JSON, Graphite and Prometheus read it: an integer without a fraction when it
    /// is one, else Swift's shortest round-trip form; `null` if not finite.
    ///
    /// The shortest form costs about 600 instructions to find, and a flush often writes the same
    /// fraction many times (counters with the same count have the same rate), so the text of
    /// the last numbers written is kept, in `numberSlots` slots chosen by the bit pattern: a
    /// number found there is copied.
    func append(number value: Double) {
        guard value.isFinite else { return append(ascii: "null") }
        // Whole: converted to an integer and back unchanged (two conversions and a compare,
        // where `rounded()` is a call into the C library).
        if abs(value) < 1e15, Double(Int64(value)) == value {
            return append(integer: Int64(value), negative: value.sign == .minus)
        }
        let bits = value.bitPattern
        let texts = numberTexts ?? makeNumberTexts()
        let entry = texts + Self.numberTextStride * Int(truncatingIfNeeded: (bits &* 0x9E37_79B9_7F4A_7C15) >> 60)
        if entry.load(as: UInt64.self) == bits {
            let length = Int(entry.load(fromByteOffset: 8, as: UInt8.self))
            return append(bytes: UnsafeRawBufferPointer(start: entry + 9, count: length))
        }
        // The same text as `description`, written without making a `String`.
        let start = count
        var stream = self
        value.write(to: &stream)
        let length = count - start
        guard length <= Self.numberTextStride - 9 else { return }
        entry.storeBytes(of: bits, as: UInt64.self)
        entry.storeBytes(of: UInt8(length), toByteOffset: 8, as: UInt8.self)
        (entry + 9).copyMemory(from: base + start, byteCount: length)
    }

    /// The slots of `append(number:)`, each holding a NaN's bit pattern, which it never looks up.
    @inline(never)
    private func makeNumberTexts() -> UnsafeMutableRawPointer {
        let texts = UnsafeMutableRawPointer.allocate(
            byteCount: Self.numberSlots * Self.numberTextStride, alignment: MemoryLayout<UInt64>.alignment)
        for slot in 0..<Self.numberSlots {
            texts.storeBytes(of: Double.nan.bitPattern, toByteOffset: slot * Self.numberTextStride, as: UInt64.self)
        }
        numberTexts = texts
        return texts
    }

    /// The digits of `value`'s magnitude, after a `-` if `negative` (which may be set for 0:
    /// `-0` is written as such).
    func append(integer value: Int64, negative: Bool) {
        var magnitude = value.magnitude
        // Most counts are small: one or two digits without the loop below.
        if magnitude < 100 && !negative {
            if magnitude < 10 { return append(UInt8(truncatingIfNeeded: 48 &+ magnitude)) }
            if capacity &- count < 2 { grow(toHold: 2) }
            let tens = (magnitude &* 205) &>> 11  // magnitude / 10, exact below 1,029
            base.storeBytes(of: UInt8(truncatingIfNeeded: 48 &+ tens), toByteOffset: count, as: UInt8.self)
            base.storeBytes(
                of: UInt8(truncatingIfNeeded: 48 &+ magnitude &- tens &* 10), toByteOffset: count &+ 1, as: UInt8.self)
            count &+= 2
            return
        }
        // 19 digits and a sign at most; written from the end, then copied at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(truncatingIfNeeded: 48 &+ magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if negative {
                start -= 1
                digits[start] = UInt8(ascii: "-")
            }
            append(bytes: UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: digits[start...])))
        }
    }

    /// A number as Prometheus' text format reads it: `NaN`, `+Inf` and `-Inf` for those.
    func append(prometheusNumber value: Double) {
        if value.isNaN { return append(ascii: "NaN") }
        if value.isInfinite { return append(ascii: value < 0 ? "-Inf" : "+Inf") }
        append(number: value)
    }

    /// `bytes` as a JSON string: quoted, with `"` and `\` escaped and control bytes as `\u00XX`.
    /// Other bytes are copied as they are (the table holds valid UTF-8 only).
    func append(jsonString bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { append(jsonString: $0) }
    }

    /// `bytes` as a JSON string; see `append(jsonString:)`.
    func append(jsonString bytes: UnsafeRawBufferPointer) {
        // The usual name: eight bytes or more, none to escape, and room for it and its quotes.
        // Checked a word at a time (the last word overlapping the one before), then copied
        // with its quotes at once.
        let length = bytes.count
        if length >= 8 && capacity &- count >= length &+ 2 {
            var clean = !Self.needsEscape(bytes.loadUnaligned(fromByteOffset: length &- 8, as: UInt64.self))
            var index = 0
            while clean && index &+ 8 < length {
                clean = !Self.needsEscape(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                index &+= 8
            }
            if clean {
                let start = base + count
                start.storeBytes(of: UInt8(ascii: "\""), as: UInt8.self)
                (start + 1).copyMemory(from: bytes.baseAddress!, byteCount: length)
                start.storeBytes(of: UInt8(ascii: "\""), toByteOffset: length &+ 1, as: UInt8.self)
                count &+= length &+ 2
                return
            }
        }
        append(UInt8(ascii: "\""))
        // Runs of bytes that need no escape (most names are one) are copied at once, and found
        // eight bytes at a time.
        var run = 0
        var index = 0
        let count = bytes.count
        while index < count {
            if index + 8 <= count {
                if !Self.needsEscape(bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                    index += 8
                    continue
                }
            } else if count >= 8 && !Self.needsEscape(bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)) {
                // Fewer than eight left: the last eight bytes (some already seen) in one load.
                break
            }
            let byte = bytes[index]
            index += 1
            guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
            append(bytes: UnsafeRawBufferPointer(rebasing: bytes[run..<index - 1]))
            run = index
            switch byte {
            case UInt8(ascii: "\""): append(ascii: "\\\"")
            case UInt8(ascii: "\\"): append(ascii: "\\\\")
            default:
                append(ascii: "\\u00")
                append(Self.hexDigit(byte >> 4))
                append(Self.hexDigit(byte & 15))
            }
        }
        append(bytes: UnsafeRawBufferPointer(rebasing: bytes[run...]))
        append(UInt8(ascii: "\""))
    }

    /// Whether one of the eight bytes in `word` is `"`, `\` or a control byte (below 0x20).
    /// Exact, though it does not say which byte: each part subtracts from every byte at once, and
    /// a borrow between bytes starts only at a byte that matches.
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return control | ((quote &- ones) & ~quote & highs) | ((backslash &- ones) & ~backslash & highs) != 0
    }

    /// The lowercase hexadecimal digit of `nibble` (0 to 15).
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

extension OutputBytes: TextOutputStream {
    /// Appends `string`'s UTF-8 bytes (what `Double.write(to:)` writes, as `_writeASCII`).
    func write(_ string: String) { append(string: string) }

    func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { append(bytes: UnsafeRawBufferPointer(buffer)) }
}

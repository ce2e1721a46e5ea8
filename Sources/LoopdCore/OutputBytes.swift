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

    /// An empty buffer with room for `capacity` bytes (at least 256) before it first grows.
    init(capacity: Int) {
        self.capacity = Swift.max(capacity, 256)
        base = .allocate(byteCount: self.capacity, alignment: 1)
    }

    deinit { base.deallocate() }

    /// The bytes written so far, copied into an array.
    var bytes: [UInt8] { [UInt8](UnsafeRawBufferPointer(start: base, count: count)) }

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
    func append(number value: Double) {
        guard value.isFinite else { return append(ascii: "null") }
        if value == value.rounded(), abs(value) < 1e15 {
            return append(integer: Int64(value), negative: value.sign == .minus)
        }
        // The same text as `description`, written without making a `String`.
        var stream = self
        value.write(to: &stream)
    }

    /// The digits of `value`'s magnitude, after a `-` if `negative` (which may be set for 0:
    /// `-0` is written as such).
    func append(integer value: Int64, negative: Bool) {
        var magnitude = value.magnitude
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
        append(UInt8(ascii: "\""))
        // Runs of bytes that need no escape (most names are one) are copied at once.
        var run = 0
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
            append(bytes: UnsafeRawBufferPointer(rebasing: bytes[run..<index]))
            run = index + 1
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

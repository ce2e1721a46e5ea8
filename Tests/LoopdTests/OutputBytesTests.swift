import Foundation
@testable import LoopdCore
import Testing

/// The buffer the formats write into, seen through the formats' output.
@Suite("Output bytes")
struct OutputBytesTests {
    /// The JSON output of one flush of `lines`.
    func json(_ lines: [String], maxSeries: Int = 10_000) -> [UInt8] {
        let ingest = Ingest(maxLineLength: 4096, maxSeries: maxSeries)
        for line in lines { feed(ingest, line) }
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [])
        return JSONLinesFormat.format(flush, flush.summaries())
    }

    /// JSON strings are scanned eight bytes at a time: every byte value at every position of
    /// strings of every length up to 24 (three words), with room to spare in the buffer, room
    /// for the string and its quotes exactly, and one byte too few, and random strings mixing
    /// what needs an escape with what does not, come out as a byte-by-byte escaper writes them.
    @Test func aJSONStringIsEscapedWhereverTheBytesToEscapeAre() {
        func reference(_ bytes: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [UInt8(ascii: "\"")]
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out += Array(#"\""#.utf8)
                case UInt8(ascii: "\\"): out += Array(#"\\"#.utf8)
                case 0..<0x20: out += Array(String(format: "\\u%04x", byte).utf8)
                default: out.append(byte)
                }
            }
            return out + [UInt8(ascii: "\"")]
        }
        // After `filler` bytes, in a buffer of 256: with room to spare, and with too little
        // room for the string and its quotes, which then grows it on the way.
        func written(_ bytes: [UInt8], after filler: Int = 0) -> [UInt8] {
            let out = OutputBytes(capacity: 16)
            out.append(contentsOf: [UInt8](repeating: UInt8(ascii: "x"), count: filler))
            bytes.withUnsafeBytes { out.append(jsonString: $0) }
            return Array(out.bytes.dropFirst(filler))
        }
        var wrong: [[UInt8]] = []
        for length in 0...24 {
            for position in 0..<max(length, 1) {
                for value in UInt8.min...UInt8.max where length > 0 || value == 0 {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    if length > 0 { bytes[position] = value }
                    if written(bytes) != reference(bytes) { wrong.append(bytes) }
                    // Room for the string and its quotes exactly, and one byte short.
                    if written(bytes, after: 256 - length - 2) != reference(bytes) { wrong.append(bytes) }
                    if written(bytes, after: 256 - length - 1) != reference(bytes) { wrong.append(bytes) }
                }
            }
        }
        var generator = SplitMix64(state: 0x150E)
        let alphabet: [UInt8] = [
            0, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xA2, 0xDC, 0xFF, 0x61, 0x2E,
        ]
        for _ in 0..<2_000 {
            let length = Int(generator.next() % 48)
            let bytes = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
            if written(bytes) != reference(bytes) { wrong.append(bytes) }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    }

    @Test func aNumberWithAFractionIsWrittenAsItsDescription() {
        // Values whose shortest form is every length and exponent, from a fixed seed.
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        var values: [Double] = [
            0.1, -0.5, 1e-300, -2.2250738585072014e-308, 1.7976931348623157e308, .leastNonzeroMagnitude, 1e16,
        ]
        while values.count < 2_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let value = Double(bitPattern: state)
            if value.isFinite && value != value.rounded() || abs(value) >= 1e15 { values.append(value) }
        }
        let text = String(decoding: json(values.enumerated().map { "g\($0.offset):\($0.element)|g" }), as: UTF8.self)
        for (index, value) in values.enumerated() {
            let expected = #""name":"g\#(index)","tags":[],"value":\#(value.description)}"#
            #expect(text.contains(expected), "\(expected)")
        }
    }

    /// The formats remember the text of the numbers with a fraction they wrote last: numbers
    /// written again, in any order, with more distinct ones than slots (so that slots are
    /// reused), are each still written as their description. Counters' rates repeat too.
    @Test func aNumberWrittenAgainIsWrittenAsItsDescription() {
        var generator = SplitMix64(state: 0x5EED)
        // 20 values and their neighbours one unit in the last place up (the same text but for
        // the last digits).
        let pool = (0..<20).flatMap { index -> [Double] in
            let drawn = Double(generator.next() % 1_000_000) / 1_000 + 0.001 * Double(index % 7)
            let value = drawn == drawn.rounded() ? drawn + 0.5 : drawn
            return [value, value.nextUp]
        }
        let values = (0..<2_000).map { _ in pool[Int(generator.next() % UInt64(pool.count))] }
        let gauges = values.enumerated().map { "g\($0.offset):\($0.element)|g" }
        let lines = gauges + (0..<200).map { "c\($0):\($0 % 9 + 1)|c" }
        let text = String(decoding: json(lines), as: UTF8.self)
        for (index, value) in values.enumerated() {
            let expected = #""name":"g\#(index)","tags":[],"value":\#(value.description)}"#
            #expect(text.contains(expected), "\(expected)")
        }
        for index in 0..<200 {
            let count = Double(index % 9 + 1)
            let expected = #""name":"c\#(index)","tags":[],"value":\#(Int(count)),"rate":\#((count / 10).description)}"#
            #expect(text.contains(expected), "\(expected)")
        }
    }

    /// Numbers written straight into a buffer: a number whose text is written while the buffer
    /// grows (its first 256 bytes nearly full) is remembered from the grown buffer; a number and
    /// its negation, and texts of every length up to 24 bytes, are each remembered as
    /// themselves; each written again is copied from what was remembered.
    @Test func rememberedNumbersAreTheirOwnTextWhereverTheBufferGrew() {
        let values: [Double] = [
            0.1, -0.1, 2.5, -2.5, 1e-300, -1e-300, 1.2345678901234567e-300, -1.2345678901234567e-300,
            -2.2250738585072014e-308, 2.2250738585072014e-308, 1.7976931348623157e308, 1e15 + 0.5,
            .leastNonzeroMagnitude,
        ]
        for filler in [0, 1, 200, 250, 254, 255] {
            let out = OutputBytes(capacity: 0)
            var expected = [UInt8](repeating: UInt8(ascii: "x"), count: filler)
            out.append(contentsOf: expected)
            for value in values + values.reversed() + values {
                out.append(number: value)
                out.append(UInt8(ascii: ","))
                expected += Array(value.description.utf8) + [UInt8(ascii: ",")]
            }
            #expect(out.bytes == expected, "filler \(filler)")
        }
    }

    /// Integers as their description, whatever their size or sign, also where a short one is
    /// the one that fills the buffer: one- and two-digit ones take a path of their own.
    @Test func anIntegerIsWrittenAsItsDescription() {
        var values = (-1_000...1_000).map(Int64.init)
        values += [Int64.max, Int64.min + 1, 1_000_000_007, -99_999, 1_028, 1_029, 10_000]
        for filler in [0, 254, 255] {
            let out = OutputBytes(capacity: 0)
            var expected = [UInt8](repeating: UInt8(ascii: "x"), count: filler)
            out.append(contentsOf: expected)
            for value in values {
                out.append(integer: Int64(value.magnitude), negative: value < 0)
                out.append(UInt8(ascii: ","))
                expected += Array(String(value).utf8) + [UInt8(ascii: ",")]
            }
            out.append(integer: 0, negative: true)
            expected += Array("-0".utf8)
            #expect(out.bytes == expected, "filler \(filler)")
        }
        // Each short one alone where the first buffer (256 bytes) has 0, 1 or 2 bytes left: a
        // write past its end shows under AddressSanitizer, which CI runs this suite with.
        for value in -99...99 as ClosedRange<Int64> {
            for filler in [254, 255, 256] {
                let out = OutputBytes(capacity: 0)
                out.append(contentsOf: [UInt8](repeating: UInt8(ascii: "x"), count: filler))
                out.append(integer: Int64(value.magnitude), negative: value < 0)
                #expect(Array(out.bytes.dropFirst(filler)) == Array(String(value).utf8), "\(value), filler \(filler)")
            }
        }
    }

    @Test func anOutputLargerThanItsFirstCapacityIsWrittenWhole() throws {
        // Names of up to 1,000 bytes: far more per series than the room made at the start.
        let names = (0..<500).map { String(repeating: "n", count: 1 + $0 * 2) + "\($0)" }
        let bytes = json(names.map { "\($0):1|c" })
        #expect(bytes.count > 500 * 1_000 / 2)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let counters = try #require(object["counters"] as? [[String: Any]])
        #expect(Set(counters.compactMap { $0["name"] as? String }) == Set(names))
    }

    @Test func oneAppendLongerThanTwiceTheRoomLeftIsWrittenWhole() throws {
        // One series: room for a few hundred bytes at first, then names far longer than that.
        for length in [600, 3_000] {
            let name = String(repeating: "x", count: length - 4) + "\(length)"
            let bytes = json(["\(name):1|c"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            let counters = try #require(object["counters"] as? [[String: Any]])
            #expect(counters.map { $0["name"] as? String } == [name])
        }
    }

    @Test func eachTagIsAStringOfItsOwnAndEscapedAsTheNameIs() throws {
        let bytes = json([
            #"a:1|c|#z:last,q"uote:x,back\slash,ctl:"# + "\u{1F}" + "v,m:1"
        ])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let counters = try #require(object["counters"] as? [[String: Any]])
        let tags = try #require(counters.first { $0["name"] as? String == "a" }?["tags"] as? [String])
        #expect(tags == [#"back\slash"#, "ctl:\u{1F}v", "m:1", #"q"uote:x"#, "z:last"])
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains(#"["back\\slash","ctl:\u001fv","m:1","q\"uote:x","z:last"]"#))
    }

    @Test func aSeriesWithoutTagsHasAnEmptyArrayAndANameEndingInAnEscapeIsClosed() throws {
        let text = String(decoding: json(["end\\:1|c", "\"\":2|c"]), as: UTF8.self)
        #expect(text.contains(#"{"name":"end\\","tags":[],"value":1"#))
        #expect(text.contains(#"{"name":"\"\"","tags":[],"value":2"#))
    }
}

@_spi(Testing) import LoopdCore
import Testing

@Suite("StatsD parser")
struct StatsDParserTests {
    @Test func parsesEachTypeField() {
        var parser = StatsDParser(maxLineLength: 256)
        for (field, kind) in [
            ("c", MetricKind.counter), ("g", .gauge), ("ms", .timer), ("h", .histogram),
            ("d", .distribution), ("s", .set),
        ] {
            #expect(parse(&parser, "x:1|\(field)") == nil)
            #expect(parser.kind == kind)
        }
    }

    @Test(arguments: [
        ("", LineError.emptyName), (":1|c", .emptyName), ("name", .missingValue), ("name|c", .missingValue),
        ("a|b:1|c", .missingValue), ("name:1", .missingType), ("name:1|", .unknownType), ("name:1|x", .unknownType),
        ("name:1|cc", .unknownType), ("name:1|msx", .unknownType), ("name:abc|c", .badValue), ("name:|c", .badValue),
        ("name:1.2.3|c", .badValue), ("name:1e|c", .badValue), ("name:nan|g", .badValue), ("name:inf|g", .badValue),
        ("name:1e999|c", .badValue), ("name:1::2|c", .badValue), ("name:-|c", .badValue),
        ("name:1e400|ms", .badValue), ("name:-1e400|c", .badValue), ("name:1.8e308|g", .badValue),
        ("name:Infinity|c", .badValue), ("name:-inf|c", .badValue), ("name:NaN|ms", .badValue),
        ("name:1|c|@nan", .badSampleRate),
        ("name:1|c|@0", .badSampleRate),
        ("name:1|c|@1.5", .badSampleRate), ("name:1|c|@x", .badSampleRate), ("name:1|c|@-0.5", .badSampleRate),
        ("name:1|c|@", .badSampleRate), ("set:|s", .badValue), ("set:a::b|s", .badValue),
    ])
    func rejectsMalformedLines(line: String, error: LineError) {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, line) == error, "\(line)")
    }

    @Test func rejectsBytesThatAreNotUTF8() {
        var parser = StatsDParser(maxLineLength: 256)
        for bytes: [UInt8] in [
            [0x61, 0xFF, 0x3A, 0x31, 0x7C, 0x63], [0x61, 0xC3, 0x3A, 0x31, 0x7C, 0x63],
            [0x61, 0xED, 0xA0, 0x80, 0x3A, 0x31, 0x7C, 0x63], [0x61, 0xC0, 0xAF, 0x3A, 0x31, 0x7C, 0x63],
        ] {
            #expect(bytes.withUnsafeBytes { parser.parse($0) } == .notUTF8)
        }
        #expect(parse(&parser, "temperature.°C.zürich:1|g") == nil)
    }

    @Test func aByteThatIsNotUTF8IsFoundWhereverItIsInLinesOfEveryLength() {
        // The check goes eight bytes at a time and takes the last eight in one load: lines of
        // every length up to four words and more (names and tags of each length), with the bad
        // byte at every position, the last ones included.
        var parser = StatsDParser(maxLineLength: 256)
        for nameLength in 1...12 {
            for tagLength in 0...24 {
                let name = String(repeating: "n", count: nameLength)
                let tag = String(repeating: "t", count: tagLength)
                let line = Array((name + ":1|c" + (tagLength > 0 ? "|#" + tag : "")).utf8)
                #expect(line.withUnsafeBytes { parser.parse($0) } == nil, "\(line.count)")
                for position in line.indices {
                    for bad: UInt8 in [0xFF, 0xC3] {  // Never valid; a lead byte cut short.
                        var broken = line
                        broken[position] = bad
                        #expect(broken.withUnsafeBytes { parser.parse($0) } == .notUTF8, "\(line.count), \(position)")
                    }
                }
                // A two-byte character in the name, and at the very end of the line.
                #expect(parse(&parser, name + "é:1|c" + (tagLength > 0 ? "|#" + tag : "")) == nil)
                if tagLength > 0 { #expect(parse(&parser, name + ":1|c|#" + tag + "é") == nil) }
            }
        }
    }

    @Test func rejectsALineLongerThanTheLimit() {
        var parser = StatsDParser(maxLineLength: 256)
        parser = StatsDParser(maxLineLength: 10)
        #expect(parse(&parser, "abcde:1|c") == nil)
        #expect(parse(&parser, "abcdefgh:1|c") == .tooLong)
    }

    @Test func parsesNumbersExactly() {
        var parser = StatsDParser(maxLineLength: 256)
        for (text, value) in [
            ("1", 1.0), ("-2.5", -2.5), ("+3", 3), ("0.1", 0.1), (".5", 0.5), ("5.", 5),
            ("1e3", 1000), ("2.5E-3", 0.0025), ("123456789012345678901", 123456789012345678901.0),
            ("0.30000000000000004", 0.30000000000000004), ("1e-30", 1e-30), ("007", 7),
            // Whole numbers of up to 15 digits take a shortcut; one more digit, the full parse,
            // which rounds 2^53 + 1 to even.
            ("0", 0), ("999999999999999", 999_999_999_999_999), ("9007199254740993", 9_007_199_254_740_992),
            ("1234567890123456", 1_234_567_890_123_456),
        ] {
            #expect(parse(&parser, "x:\(text)|g") == nil)
            #expect(parser.values == [value], "\(text)")
        }
    }

    @Test func rejectsAValueWithAnythingButDigitsAfterItsDigits() {
        var parser = StatsDParser(maxLineLength: 256)
        for text in ["1a", "12 ", "1_000", "0x10", "", "1:", ":1"] {
            #expect(parse(&parser, "x:\(text)|c") == .badValue, "\(text)")
        }
    }

    @Test func marksSignedGaugeValuesAsDeltas() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "g:+4:-2:7|g") == nil)
        #expect(parser.values == [4, -2, 7])
        #expect(parser.isDelta == [true, true, false])
    }

    @Test func unpacksSeveralValues() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "t:1:2:3|ms") == nil)
        #expect(parser.values == [1, 2, 3])
    }

    @Test func linesWithMoreValuesAndMembersThanTheScratchSpaceFirstHeldKeepThemAll() {
        var parser = StatsDParser(maxLineLength: 8192)
        for count in [1, 15, 16, 17, 33, 100, 1_000] {
            let values = (0..<count).map { $0 % 2 == 0 ? "+\($0)" : "\($0)" }
            #expect(parse(&parser, "t:" + values.joined(separator: ":") + "|g") == nil)
            #expect(parser.values == (0..<count).map(Double.init))
            #expect(parser.isDelta == (0..<count).map { $0 % 2 == 0 })
            let members = (0..<count).map { "m\($0 % 50)" }
            #expect(parse(&parser, "u:" + members.joined(separator: ":") + "|s") == nil)
            #expect(parser.members.count == count)
            #expect(Set(parser.members).count == min(count, 50))
        }
        // A short line after long ones sees only its own.
        #expect(parse(&parser, "t:7|ms") == nil)
        #expect(parser.values == [7])
    }

    @Test func theWordAtATimeSearchFindsTheFirstByteWhereverItIs() {
        // Bytes one above the one sought (0x3b after ':') are where a borrow would show a
        // false match, were the first true one not taken.
        var random = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x3a, 0x3b, 0x39, 0x00, 0x01, 0x80, 0xff, 0x7c, 0x0a, 0x61]
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...40, using: &random)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &random)! }
            let start = Int.random(in: 0...count, using: &random)
            let end = Int.random(in: start...count, using: &random)
            for sought in [UInt8(0x3a), 0x0a, 0x00, 0xff] {
                let expected = bytes[start..<end].firstIndex(of: sought) ?? end
                let found = bytes.withUnsafeBytes { firstIndex(of: sought, in: $0, from: start, to: end) }
                #expect(found == expected, "\(bytes) [\(start)..<\(end)] \(sought)")
            }
            for (sought, other) in [(UInt8(0x3a), UInt8(0x7c)), (0x00, 0x01), (0x3b, 0x3a)] {
                let expected = bytes[start..<end].firstIndex { $0 == sought || $0 == other } ?? end
                let found = bytes.withUnsafeBytes { firstIndex(of: sought, or: other, in: $0, from: start, to: end) }
                #expect(found == expected, "\(bytes) [\(start)..<\(end)] \(sought) or \(other)")
            }
        }
    }

    /// The hash of bytes (a set's members; a key's is the same walk over the bytes after its
    /// kind's, with the kind mixed in at the end), word by word.
    @Test func theHashOfBytesIsThatOfTheirWordsAssembledOneByOneWhateverTheirLength() {
        // The reference: every whole word, then the rest assembled byte by byte, then the count.
        func reference(_ bytes: [UInt8]) -> UInt64 {
            var h = StatsDParser.seed
            var position = 0
            while position < bytes.count {
                var word: UInt64 = 0
                for (shift, byte) in bytes[position..<min(position + 8, bytes.count)].enumerated() {
                    word |= UInt64(byte) << UInt64(8 * shift)
                }
                h = (h ^ word) &* 0xBF58_476D_1CE4_E5B9
                h ^= h >> 31
                position += 8
            }
            h ^= UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15
            h = (h ^ (h >> 30)) &* 0x94D0_49BB_1331_11EB
            return h ^ (h >> 31)
        }
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(bytes.withUnsafeBytes { StatsDParser.hash($0) } == reference(bytes), "\(count) bytes")
        }
    }

    @Test func readsTheSampleRateAndIgnoresOtherFields() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "c:1|c|@0.25|c:container-id|T1656581400|x:future|#a:1") == nil)
        #expect(parser.sampleRate == 0.25)
        #expect(parse(&parser, "c:1|c||") == nil)
        #expect(parser.sampleRate == 1)
    }

    @Test func theKeyHasTheTagsInSortedOrder() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "req:1|c|#region:eu,env:prod,b") == nil)
        let sorted = parser.withKey { Array($0) }
        let hash = parser.keyHash
        #expect(Array(sorted.dropFirst()) == Array("req|#b,env:prod,region:eu".utf8))
        #expect(parse(&parser, "req:1|c|#env:prod,b,region:eu") == nil)
        #expect(parser.withKey { Array($0) } == sorted)
        #expect(parser.keyHash == hash)
        #expect(parse(&parser, "req:1|c|#env:prod|#region:eu,,b|@1") == nil, "tags in two fields, an empty tag")
        #expect(parser.withKey { Array($0) } == sorted)
    }

    /// A tagless line's key is the kind's byte and the name, copied eight bytes at a time: names
    /// of every length up to 40, each byte distinct from its neighbours, in an order where
    /// shorter names follow longer ones.
    @Test func aTaglessKeyIsTheKindAndTheWholeName() {
        var parser = StatsDParser(maxLineLength: 256)
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ".utf8)
        for length in [40, 1, 39, 7, 8, 9, 15, 16, 17, 2, 24, 23, 25, 33, 32, 31] + Array(1...40) {
            let name = String(decoding: letters[..<length], as: UTF8.self)
            let key = [MetricKind.gauge.rawValue] + Array(name.utf8)
            #expect(parse(&parser, name + ":1|g") == nil)
            #expect(parser.withKey { Array($0) } == key, "length \(length)")
            #expect(parser.keyHash == key.withUnsafeBytes { StatsDParser.keyHash($0) }, "length \(length)")
        }
    }

    /// The plain shape, `name:value|type` with one unsigned value, is recognized with the kind,
    /// the name's end, the value and the hash `parse(_:)` gives the same line, and the line's
    /// end: a newline or the end of the bytes. Every other shape is left to `parse(_:)`.
    @Test func aPlainLineIsReadAsTheFullParseReadsIt() {
        var parser = StatsDParser(maxLineLength: 40)
        let letters = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ"
        var plain = (1...30).map { String(letters.prefix($0)) + ":1|c" }
        plain += (1...24).map { String(letters.prefix($0)) + ":2.5|ms" }
        plain += [
            "a:0|c", "a:007|c", "a:123456789012345|c", "é:5|c", "a b:1|c", "a.b:42|c", "g:3|g", "h:0.5|h", "d:12|d",
            "t:1.25|ms", "t:12345678901234.5|ms", "t:0.00000000000001|ms", "t:007.50|h", "g:0.0|g",
        ]
        for line in plain {
            for (prefix, suffix) in [("", ""), ("", "\nb:1|c"), ("x\n", ""), ("x:1|c\n", "\n")] {
                let bytes = Array((prefix + line + suffix).utf8)
                let start = prefix.utf8.count
                let read = bytes.withUnsafeBytes { parser.plainLine($0, from: start) }
                #expect(parse(&parser, line) == nil, "\(line)")
                #expect(read?.kind == parser.kind, "\(bytes)")
                #expect(read?.nameEnd == bytes[start...].firstIndex(of: UInt8(ascii: ":")), "\(bytes)")
                #expect(read?.value.bitPattern == parser.values.first?.bitPattern, "\(bytes)")
                #expect(read?.hash == parser.keyHash, "\(bytes)")
                #expect(read?.lineEnd == start + line.utf8.count, "\(bytes)")
            }
        }
        let others = [
            "a:1|c|@0.5", "a:1|c|#t", "a:1|cc", "a:1|c|", "a:1|gg", "a:1|m", "a:1|msx", "a:1|s", "a:1|x", "a:1", "a:1|",
            "a:|c", ":1|c", "a|b:1|c", "a:+1|c", "a:-1|g", "a:1e3|c", "a:1:2|c", "a:1234567890123456|c",
            "a:1234567890123.456|ms", "a:0.000000000000001|ms", "a:x|c", "a:1|C", "a:1|c\r", "", "a:1|c|c",
            String(repeating: "a", count: 37) + ":1|c",
            "a\n:1|c", "abcdefghij\n:1|c", "a:1|c\r\n", "a:1\n|c", "abcdefgh|:1|c", "a:.5|ms", "a:5.|ms", "a:1.2.3|ms",
            "a:.|ms", "a:1..2|h",
        ]
        for line in others {
            #expect(Array(line.utf8).withUnsafeBytes { parser.plainLine($0, from: 0) } == nil, "\(line)")
        }
    }

    /// A key's hash is that of the bytes after its kind's, with the kind mixed in last: the
    /// same name of two kinds hashes apart, and the hash is the one the parse gives the line.
    @Test func aKeysHashIsItsNamesWithItsKind() {
        var parser = StatsDParser(maxLineLength: 256)
        var hashes: Set<UInt64> = []
        for (field, kind) in [
            ("c", MetricKind.counter), ("g", .gauge), ("ms", .timer), ("h", .histogram), ("d", .distribution),
            ("s", .set),
        ] {
            #expect(parse(&parser, "name:1|\(field)") == nil)
            let key = [kind.rawValue] + Array("name".utf8)
            #expect(parser.keyHash == key.withUnsafeBytes { StatsDParser.keyHash($0) })
            hashes.insert(parser.keyHash)
        }
        #expect(hashes.count == MetricKind.allCases.count)
        #expect(parse(&parser, "name:1|c|#t") == nil)
        let tagged = [MetricKind.counter.rawValue] + Array("name|#t".utf8)
        #expect(parser.keyHash == tagged.withUnsafeBytes { StatsDParser.keyHash($0) })
        #expect(!hashes.contains(parser.keyHash))
    }

    @Test func theKeyTellsKindsApart() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "x:1|c") == nil)
        let counter = parser.withKey { Array($0) }
        #expect(parse(&parser, "x:1|g") == nil)
        #expect(parser.withKey { Array($0) } != counter)
        #expect(parser.withKey { Array($0.dropFirst()) } == Array(counter.dropFirst()))
    }

    @Test func hashesSetMembers() {
        var parser = StatsDParser(maxLineLength: 256)
        #expect(parse(&parser, "users:alice:bob:alice|s") == nil)
        #expect(parser.members.count == 3)
        #expect(parser.members[0] == parser.members[2])
        #expect(parser.members[0] != parser.members[1])
    }

    @Test func aLineWithMoreTagsThanTheBoundIsRejected() {
        var parser = StatsDParser(maxLineLength: 65536)
        let reversed = (0..<3000).reversed().map { "t\($0)" }
        #expect(parse(&parser, "x:1|c|#" + reversed.joined(separator: ",")) == .tooManyTags)
        let atTheBound = (0..<StatsDParser.maxTags).map { "t\($0)" }
        #expect(parse(&parser, "x:1|c|#" + atTheBound.joined(separator: ",")) == nil)
        #expect(parse(&parser, "x:1|c|#" + atTheBound.joined(separator: ",") + ",one.more") == .tooManyTags)
        #expect(
            parse(&parser, "x:1|c|#" + atTheBound.joined(separator: ",") + ",,|#") == nil, "empty tags do not count")
    }

    @Test func reverseOrderedTagsUpToTheBoundAreSorted() {
        var parser = StatsDParser(maxLineLength: 65536)
        let tags = (0..<StatsDParser.maxTags).map { "tag.\(1000 + $0 % 100):\($0)" }
        #expect(parse(&parser, "x:1|c|#" + tags.reversed().joined(separator: ",")) == nil)
        let sorted = tags.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        #expect(parser.withKey { Array($0.dropFirst()) } == Array(("x|#" + sorted.joined(separator: ",")).utf8))
    }

    /// The comparisons `StatsDParser.sortInPlace` makes to sort `values`, and whether it sorted them.
    func comparisons(sorting values: [Int]) -> (count: Int, sorted: Bool) {
        var values = values
        var count = 0
        values.withUnsafeMutableBufferPointer { buffer in
            StatsDParser.sortInPlace(buffer) {
                count += 1
                return $0 < $1
            }
        }
        return (count, values == values.sorted())
    }

    @Test func sortingTagsTakesAtMostNLogNComparisons() {
        var generator = SystemRandomNumberGenerator()
        for n in [0, 1, 2, 15, 16, 17, 200, 2000] {
            let bound = n < 2 ? 0 : 2 * n * (Int.bitWidth - (n - 1).leadingZeroBitCount)
            for (order, values) in [
                ("reversed", Array((0..<n).reversed())), ("sorted", Array(0..<n)),
                ("random", (0..<n).map { _ in Int.random(in: 0..<max(n / 4, 1), using: &generator) }),
            ] {
                let (count, sorted) = comparisons(sorting: values)
                #expect(sorted, "\(n) \(order) values")
                #expect(count <= max(bound, n * n / 2), "\(n) \(order) values: \(count) comparisons")
                if n >= 200 { #expect(count <= bound, "\(n) \(order) values: \(count) comparisons") }
            }
        }
        // Ten times the tags, about eleven times the comparisons: a quadratic sort takes a hundred.
        let small = comparisons(sorting: Array((0..<200).reversed())).count
        let large = comparisons(sorting: Array((0..<2000).reversed())).count
        #expect(large < 20 * small, "\(small) comparisons for 200 tags, \(large) for 2,000")
    }

    @Test func namesAnOutputWouldShowAsLoopdsOwnAreReserved() {
        var parser = StatsDParser(maxLineLength: 1024)
        // Each is loopd.* in JSON or Graphite, or loopd_* in Prometheus, once cleaned.
        for name in [
            "loopd.bad_lines", "loopd.series", "loopd_series", "loopd-series", "LOOPD.series", "Loopd_x", "loopdSeries",
            ".loopd.series", "..loopd.x", "loopd/x", "loopd x", "loopdé", "loopd", "LOOPD", ".loopd",
        ] {
            #expect(parse(&parser, "\(name):1|c") == .reservedName, "\(name)")
        }
        for name in ["loopdx.y", "LOOPDX.y", "loopd9", "app.loopd.y", "_loopd_x", "loop.d", "loop"] {
            #expect(parse(&parser, "\(name):1|c") == nil, "\(name)")
        }
    }

    /// What a parse gave: the error, or everything a line records.
    static func outcome(_ parser: inout StatsDParser, _ line: [UInt8]) -> String {
        if let error = line.withUnsafeBytes({ parser.parse($0) }) { return "error \(error)" }
        let key = parser.withKey { Array($0) }
        return "\(parser.kind) \(parser.sampleRate) \(parser.values) \(parser.isDelta) \(parser.members) "
            + "\(key) \(parser.keyHash) \(parser.hasTimestamp)"
    }

    @Test func theSeparatorMasksFindWhatTheByteSearchesFind() {
        var masked = StatsDParser(maxLineLength: 256)
        var searched = StatsDParser(maxLineLength: 256)
        searched.usesSeparatorMasks = false
        var random = SplitMix64(state: 23)
        let alphabet = Array(":|,@#cgmsdhT.x1-+e0lopLOD".utf8) + Array("é".utf8) + [0x80, 0xFF]
        let fields = ["", "|@0.5", "|#a:b,c", "|#z,a:1|@0.1", "|T1700000000", "|c:abc", "|#", "|@"]
        let types = ["c", "g", "ms", "h", "d", "s", "x", ""]
        var parsed = 0
        for round in 0..<40_000 {
            var line: [UInt8]
            if round % 2 == 0 {
                // Bytes at random, 1 to 80 of them: the lengths around 8 and 64 included.
                line = (0..<Int.random(in: 1...80, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            } else {
                // A line of the right shape, with a byte or two changed.
                let name =
                    ["", "loopd", "LOOPD.", ".loop", "Loop"].randomElement(using: &random)!
                    + String(repeating: "n", count: Int.random(in: 1...50, using: &random))
                let values = (0..<Int.random(in: 1...3, using: &random)).map { _ in
                    String(Int.random(in: -5...500, using: &random))
                }
                line = Array(
                    (name + ":" + values.joined(separator: ":") + "|" + types.randomElement(using: &random)!
                        + fields.randomElement(using: &random)!).utf8)
                for _ in 0..<Int.random(in: 0...2, using: &random) where !line.isEmpty {
                    line[Int.random(in: 0..<line.count, using: &random)] = alphabet.randomElement(using: &random)!
                }
            }
            let expected = Self.outcome(&searched, line)
            #expect(Self.outcome(&masked, line) == expected, "\(line)")
            if !expected.hasPrefix("error") { parsed += 1 }
        }
        // Both kinds of line were tried.
        #expect(parsed > 5_000 && parsed < 35_000, "\(parsed) lines parsed")
    }
}

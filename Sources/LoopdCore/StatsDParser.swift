// The StatsD line parser: bytes in, a canonical series key and parsed values out, with no
// allocation once its scratch space has grown to the largest line seen. Standard library only,
// so that the fuzz target (scripts/fuzz-parser) compiles it on its own.

/// The kind of a StatsD metric, named by the type field of its line (`name:1|c`).
public enum MetricKind: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// `c`: a count, scaled by 1/rate, summed over the interval and reset at each flush.
    case counter
    /// `g`: a value that persists across flushes; `+n` and `-n` change it by n.
    case gauge
    /// `ms`: a timing; each flush reports count, sum, min, max, mean and percentiles.
    case timer
    /// `h`: a histogram sample, summarised like a timer.
    case histogram
    /// `d`: a distribution sample, summarised like a timer.
    case distribution
    /// `s`: a set member; each flush reports the number of distinct members.
    case set

    /// The type field that names this kind in a line: `c`, `g`, `ms`, `h`, `d` or `s`.
    public var typeField: String {
        switch self {
        case .counter: "c"
        case .gauge: "g"
        case .timer: "ms"
        case .histogram: "h"
        case .distribution: "d"
        case .set: "s"
        }
    }

    /// The type field.
    public var description: String { typeField }

    /// Whether each flush summarises this kind's samples (count, sum, min, max, mean, percentiles).
    @inlinable
    public var isSampled: Bool { self == .timer || self == .histogram || self == .distribution }
}

/// A parsed StatsD line, handed out by `StatsDParser.withParsedLine(_:)`: its key is a view into
/// the parser's scratch space, valid during that call only.
public struct ParsedLine {
    /// The kind.
    public let kind: MetricKind
    /// The sample rate (1 when the line has no `@rate`).
    public let sampleRate: Double
    /// The values: numbers (a set's are empty). A view of the parser's scratch space, valid
    /// while the line is being recorded, as `key` is.
    public let values: UnsafeBufferPointer<Double>
    /// For a gauge, whether each value was signed (a change, not a new value).
    public let isDelta: UnsafeBufferPointer<Bool>
    /// For a set, the 64-bit hashes of the members.
    public let members: UnsafeBufferPointer<UInt64>
    /// The canonical key: the kind's raw value, the name, and `|#` and the sorted tags if any.
    public let key: UnsafeRawBufferPointer
    /// The key's hash, with the process's seed.
    public let keyHash: UInt64

    /// A line made by hand (tests choose the hash to make keys collide).
    @_spi(Testing)
    public init(
        kind: MetricKind, sampleRate: Double, values: UnsafeBufferPointer<Double>, isDelta: UnsafeBufferPointer<Bool>,
        members: UnsafeBufferPointer<UInt64>, key: UnsafeRawBufferPointer, keyHash: UInt64
    ) {
        (self.kind, self.sampleRate, self.values, self.isDelta) = (kind, sampleRate, values, isDelta)
        (self.members, self.key, self.keyHash) = (members, key, keyHash)
    }
}

/// Why a StatsD line was rejected. The valid lines of the same datagram are kept.
public enum LineError: UInt8, Error, Sendable, CaseIterable, CustomStringConvertible {
    /// Nothing before the first `:`.
    case emptyName
    /// No `:` between the name and a value.
    case missingValue
    /// No `|type` field after the value.
    case missingType
    /// A value that is not a finite decimal number (or an empty set member).
    case badValue
    /// A type field other than `c`, `g`, `ms`, `h`, `d` and `s`.
    case unknownType
    /// An `@rate` field that is not a number in (0, 1].
    case badSampleRate
    /// Bytes that are not UTF-8.
    case notUTF8
    /// A line longer than the parser's `maxLineLength`, or cut short by an oversized datagram.
    case tooLong
    /// A line with more than `StatsDParser.maxTags` tags.
    case tooManyTags
    /// A line whose values, finite themselves, would make its series' value or one of its totals
    /// infinite or NaN (`1e308|c` twice, or `1|ms|@1e-320`); reported by `Ingest`, not the parser.
    case nonFinite
    /// A name that an output would show as one of the daemon's own metrics (`loopd.x`,
    /// `loopd_x`, `LOOPD-x`, `.loopd.x`; see `StatsDParser.isReserved`): a client cannot forge
    /// or hide them.
    case reservedName
    /// A stream client's line without its `\n`, or DogStatsD frame cut short, when the client
    /// closed the connection, it failed or loopd stopped: it may be cut short, so it is not
    /// recorded; reported by loopd, not the parser.
    case unterminated
    /// A DogStatsD event (`_e{…}`) whose lengths do not match its title and text; reported by
    /// `Ingest`.
    case badEvent
    /// A DogStatsD service check (`_sc|…`) without a name or with a status other than 0 to 3;
    /// reported by `Ingest`.
    case badServiceCheck

    /// The reason, in a few words, for a log line.
    public var description: String {
        switch self {
        case .emptyName: "empty metric name"
        case .missingValue: "no ':' before a value"
        case .missingType: "no '|type' field"
        case .badValue: "value is not a finite number"
        case .unknownType: "unknown metric type (expected c, g, ms, h, d or s)"
        case .badSampleRate: "sample rate not in (0, 1]"
        case .notUTF8: "not UTF-8"
        case .tooLong: "line too long"
        case .tooManyTags: "more than \(StatsDParser.maxTags) tags"
        case .nonFinite: "would make the series' value or a total infinite or NaN"
        case .reservedName: "names that an output would show as loopd.* or loopd_* are loopd's own metrics"
        case .unterminated: "a line without its newline, or a frame cut short, when the connection ended"
        case .badEvent: "malformed DogStatsD event"
        case .badServiceCheck: "malformed DogStatsD service check"
        }
    }
}

/// Parses StatsD lines, with the DogStatsD extensions, from bytes.
///
/// A line is `name:value[:value…]|type[|@rate][|#tag,tag:value…][|c:container][|T<unix seconds>]`;
/// other `|x…` fields are accepted and ignored. `parse(_:)` fills `key` with the series' canonical
/// key (its kind, its name and its tags sorted) and `values` with the line's values, reusing the
/// same storage for every line: a line never allocates once the scratch space has grown to fit.
///
/// A value type, so that its scratch space is reached without the dynamic exclusivity checks a
/// class's stored properties cost (they were half of the instructions per line); not copyable,
/// because it owns its scratch space: raw memory, so that a line costs no reference counting
/// and no uniqueness check of arrays.
public struct StatsDParser: ~Copyable {
    /// The most tags a line may carry; a line with more fails with `LineError.tooManyTags`.
    ///
    /// Empty tags (`#a,,b`) do not count. The bound keeps the tag sort, and the scratch space
    /// that holds the tags, small whatever a client sends.
    public static let maxTags = 256

    /// The longest line accepted, in bytes; longer lines fail with `LineError.tooLong`.
    public let maxLineLength: Int
    /// The kind of the last line parsed.
    public private(set) var kind = MetricKind.counter
    /// The sample rate of the last line parsed (1 when it has no `@rate`).
    public private(set) var sampleRate = 1.0
    /// The values of the last line parsed: numbers (a set's are empty). A copy: a line is
    /// recorded through `withParsedLine(_:)`, which copies nothing.
    public var values: [Double] { Array(UnsafeBufferPointer(start: valueStorage, count: valueCount)) }
    /// For a gauge, whether each value of the last line was signed (a change, not a new value).
    public var isDelta: [Bool] { Array(UnsafeBufferPointer(start: deltaStorage, count: valueCount)) }
    /// For a set, the 64-bit hashes of the members of the last line.
    public var members: [UInt64] { Array(UnsafeBufferPointer(start: memberStorage, count: memberCount)) }
    /// The hash of the last line's key, with the process's seed.
    public private(set) var keyHash: UInt64 = 0
    /// Whether the last line had a DogStatsD timestamp (`|T<unix seconds>`). loopd aggregates
    /// such a line into the current interval, as it does every line, and counts it.
    public private(set) var hasTimestamp = false

    // The scratch space, allocated once: the key (never longer than the line plus 3 bytes),
    // the tags' ranges in the line (at most `maxTags`), and the values, signs and members,
    // which double when a line has more than they hold. A line uses the first `keyLength`,
    // `tagCount`, `valueCount` and `memberCount` of them, so that it empties nothing.
    private let keyStorage: UnsafeMutableRawPointer
    private var keyLength = 0
    /// `StatsDParser.seed`, read once.
    let seed = StatsDParser.seed
    /// Tests: false makes every line search byte by byte, as lines outside 8 to 64 bytes do, so
    /// that both ways can be compared on the same lines.
    @_spi(Testing) public var usesSeparatorMasks = true
    private let tagStorage: UnsafeMutablePointer<Range<Int>>
    private var tagCount = 0
    private var valueStorage: UnsafeMutablePointer<Double>
    private var deltaStorage: UnsafeMutablePointer<Bool>
    private var valueCapacity = 16
    private var valueCount = 0
    private var memberStorage: UnsafeMutablePointer<UInt64>
    private var memberCapacity = 16
    private var memberCount = 0

    /// Creates a parser for lines of at most `maxLineLength` bytes.
    ///
    /// - Precondition: `maxLineLength` is positive.
    public init(maxLineLength: Int) {
        guard maxLineLength > 0 else {
            fatalError("StatsDParser(maxLineLength:): maxLineLength must be > 0, got \(maxLineLength)")
        }
        self.maxLineLength = maxLineLength
        // A key holds the kind byte, the name, "|#" and the tags: never more than the line.
        keyStorage = .allocate(byteCount: maxLineLength + 3, alignment: 8)
        tagStorage = .allocate(capacity: Self.maxTags)
        valueStorage = .allocate(capacity: valueCapacity)
        deltaStorage = .allocate(capacity: valueCapacity)
        memberStorage = .allocate(capacity: memberCapacity)
    }

    deinit {
        keyStorage.deallocate()
        tagStorage.deallocate()
        valueStorage.deallocate()
        deltaStorage.deallocate()
        memberStorage.deallocate()
    }

    /// Calls `body` with the last line parsed, as views into the parser's scratch space (valid
    /// during the call only): what `SeriesTable.record(_:)` takes, without a copy.
    @inline(__always)
    public func withParsedLine<Result>(_ body: (ParsedLine) -> Result) -> Result {
        body(
            ParsedLine(
                kind: kind, sampleRate: sampleRate,
                values: UnsafeBufferPointer(start: valueStorage, count: valueCount),
                isDelta: UnsafeBufferPointer(start: deltaStorage, count: valueCount),
                members: UnsafeBufferPointer(start: memberStorage, count: memberCount),
                key: UnsafeRawBufferPointer(start: keyStorage, count: keyLength), keyHash: keyHash))
    }

    /// Calls `body` with the canonical key of the last line: its kind's raw value, its name,
    /// and if it has tags, `|#` and the tags sorted bytewise, joined by `,`.
    @inline(__always)
    public func withKey<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: keyStorage, count: keyLength))
    }

    /// Parses one line (without its `\n`). On success the line's kind, key, values and rate are
    /// in the parser's properties; on failure they are unspecified.
    public mutating func parse(_ line: UnsafeRawBufferPointer) -> LineError? {
        guard line.count <= maxLineLength else { return .tooLong }
        // Most lines are 8 to 64 bytes: one pass marks their ':' and '|' bytes and checks that
        // they are ASCII, and every search for either is then a few bit operations.
        let separators = Separators(line, enabled: usesSeparatorMasks)
        guard separators.isASCII || isUTF8(line) else { return .notUTF8 }
        let end = line.count
        // The name runs to the first ':'; the values, to the first '|'. A '|' before the first
        // ':' means the value (and its ':') is missing: "name|c". One pass finds either.
        let stop = separators.indexOfColonOrBar(in: line, to: end)
        let colon =
            stop < end && line[stop] == UInt8(ascii: "|")
            ? separators.index(of: UInt8(ascii: ":"), in: line, from: stop + 1, to: end) : stop
        guard colon > 0 else { return .emptyName }
        // Only a name that starts with a dot or with `loop` in any case can be reserved: the
        // first four bytes, lowered as `isReserved` lowers them, in one load.
        if (line[0] == UInt8(ascii: ".")
            || colon >= 5 && line.loadUnaligned(as: UInt32.self) | 0x2020_2020 == Self.loopLowered)
            && Self.isReserved(line, nameEnd: colon)
        {
            return .reservedName
        }
        guard colon < end, stop == colon else { return .missingValue }
        let bar = separators.index(of: UInt8(ascii: "|"), in: line, from: colon + 1, to: end)
        guard bar < end else { return .missingType }
        let typeEnd = separators.index(of: UInt8(ascii: "|"), in: line, from: bar + 1, to: end)
        guard let kind = Self.kind(line, bar + 1, typeEnd) else { return .unknownType }
        self.kind = kind

        // The optional fields: @rate, #tags; others are skipped.
        sampleRate = 1
        hasTimestamp = false
        tagCount = 0
        var field = typeEnd
        while field < end {
            let start = field + 1
            let next = separators.index(of: UInt8(ascii: "|"), in: line, from: start, to: end)
            if start < next {
                switch line[start] {
                case UInt8(ascii: "@"):
                    guard let rate = Self.number(line, start + 1, next), rate > 0, rate <= 1 else {
                        return .badSampleRate
                    }
                    sampleRate = rate
                case UInt8(ascii: "#"):
                    var tag = start + 1
                    while tag <= next {
                        let comma = index(of: UInt8(ascii: ","), in: line, from: tag, to: next)
                        if tag < comma {
                            guard tagCount < Self.maxTags else { return .tooManyTags }
                            tagStorage[tagCount] = tag..<comma
                            tagCount += 1
                        }
                        tag = comma + 1
                    }
                case UInt8(ascii: "T"): hasTimestamp = Self.number(line, start + 1, next) != nil
                default: break  // c:container, card:cardinality, and fields yet to come
                }
            }
            field = next
        }

        // The values: numbers, or for a set, members (hashed).
        valueCount = 0
        memberCount = 0
        var value = colon + 1
        while value <= bar {
            let next = separators.index(of: UInt8(ascii: ":"), in: line, from: value, to: bar)
            if kind == .set {
                guard value < next else { return .badValue }
                if memberCount == memberCapacity { growMembers() }
                memberStorage[memberCount] = Self.hash(UnsafeRawBufferPointer(rebasing: line[value..<next]), seed: seed)
                memberCount += 1
            } else {
                guard let number = Self.wholeNumber(line, value, next) ?? Self.number(line, value, next) else {
                    return .badValue
                }
                if valueCount == valueCapacity { growValues() }
                valueStorage[valueCount] = number
                deltaStorage[valueCount] = line[value] == UInt8(ascii: "+") || line[value] == UInt8(ascii: "-")
                valueCount += 1
            }
            value = next + 1
        }

        if tagCount == 0 {
            // Most lines have no tags: their key is the kind's byte and the name, made here
            // rather than through a call.
            keyStorage.storeBytes(of: kind.rawValue, as: UInt8.self)
            Self.copyName(from: line.baseAddress!, count: colon, to: keyStorage + 1)
            keyLength = colon + 1
            keyHash = Self.nameHash(UnsafeRawBufferPointer(start: keyStorage + 1, count: colon), kind: kind, seed: seed)
        } else {
            buildTaggedKey(line, name: 0..<colon)
        }
        return nil
    }

    /// The line of the commonest shape, `name:value|type`, at `start` in `bytes`: one value of
    /// digits, or digits, a `.` and digits (15 digits at most in all, no sign), a type of `c`,
    /// `g`, `ms`, `h` or `d`, no sample rate, no tags, no other field, and then a newline or
    /// the end of `bytes`. Its kind, name's end, value, key's hash and end (the newline's
    /// position, or `bytes.count`); nil if the line at `start` is of any other shape or longer
    /// than `maxLineLength`.
    ///
    /// `parse(_:)` reads a line it accepts as the same kind and value, with the same key and
    /// hash, unless the name is one it refuses (not UTF-8, or reserved). Such a name never has
    /// a series, since neither `parse(_:)` nor the mapping rules make one, so a caller that
    /// records the line only into a series its table already holds, and leaves every other
    /// line to `parse(_:)`, records what `parse(_:)` would have: without looking for the line's
    /// end first, without the full parse, the copy of the key and the general lookup.
    @inline(__always)
    @_spi(Testing) public func plainLine(
        _ bytes: UnsafeRawBufferPointer, from start: Int
    ) -> (kind: MetricKind, nameEnd: Int, value: Double, hash: UInt64, lineEnd: Int)? {
        Self.plainLine(bytes, from: start, maxLineLength: maxLineLength, seed: seed)
    }

    /// `plainLine(_:from:)` of a parser for lines of at most `maxLineLength` bytes, with
    /// `StatsDParser.seed` as read once: all it reads of the parser.
    @inline(__always)
    static func plainLine(
        _ bytes: UnsafeRawBufferPointer, from start: Int, maxLineLength: Int, seed: UInt64
    ) -> (kind: MetricKind, nameEnd: Int, value: Double, hash: UInt64, lineEnd: Int)? {
        let end = bytes.count
        // The name ends at the first ':', unless a '|' or a newline comes first. Eight bytes at a
        // time: the lowest marked byte of a word is the first of any of them, and the words of
        // the name are hashed on the way, as `hash(_:seed:)` would. One mark finds ':' and the
        // newline (0x3A, 0x0A) with 0x1A and '*' (0x2A), the bytes that differ from ':' in bits
        // 4 and 5 only; a line stopped at one of the last two is left to `parse(_:)`.
        var colon = start
        var h = seed
        var hashed = false
        #if _endian(little)
            while colon &+ 8 <= end {
                let word = bytes.loadUnaligned(fromByteOffset: colon, as: UInt64.self)
                let marks =
                    zeroByteMarks((word ^ 0x3A3A_3A3A_3A3A_3A3A) & 0xCFCF_CFCF_CFCF_CFCF)
                    | zeroByteMarks(word ^ 0x7C7C_7C7C_7C7C_7C7C)
                if marks != 0 {
                    let rest = marks.trailingZeroBitCount &>> 3
                    if rest > 0 { h = Self.mix(h, word & (~0 &>> UInt64(64 &- 8 &* rest))) }
                    colon &+= rest
                    hashed = true
                    break
                }
                h = Self.mix(h, word)
                colon &+= 8
            }
        #endif
        if !hashed {
            while colon < end && bytes[colon] != UInt8(ascii: ":") && bytes[colon] != UInt8(ascii: "|")
                && bytes[colon] != UInt8(ascii: "\n")
            {
                colon &+= 1
            }
        }
        guard colon > start, colon < end, bytes[colon] == UInt8(ascii: ":") else { return nil }
        // The value: as `wholeNumber` reads 15 digits or fewer, and `number` digits with a
        // fraction (exactly: the digits fit 2^53 and the power of ten is at most 22).
        var position = colon &+ 1
        var mantissa: UInt64 = 0
        while position < end {
            let digit = bytes[position] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            mantissa = mantissa &* 10 &+ UInt64(digit)
            position &+= 1
        }
        var digits = position &- colon &- 1
        var fractionDigits = 0
        if position < end && bytes[position] == UInt8(ascii: ".") && digits > 0 {
            position &+= 1
            let fractionStart = position
            while position < end {
                let digit = bytes[position] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                mantissa = mantissa &* 10 &+ UInt64(digit)
                position &+= 1
            }
            fractionDigits = position &- fractionStart
            guard fractionDigits > 0 else { return nil }
            digits &+= fractionDigits
        }
        guard digits > 0, digits <= 15, position &+ 1 < end, bytes[position] == UInt8(ascii: "|") else { return nil }
        let kind: MetricKind
        var lineEnd = position &+ 2
        let type = bytes[position &+ 1]
        if type == UInt8(ascii: "c") {
            kind = .counter
        } else {
            switch type {
            case UInt8(ascii: "g"): kind = .gauge
            case UInt8(ascii: "h"): kind = .histogram
            case UInt8(ascii: "d"): kind = .distribution
            case UInt8(ascii: "m"):
                guard lineEnd < end, bytes[lineEnd] == UInt8(ascii: "s") else { return nil }
                kind = .timer
                lineEnd &+= 1
            default: return nil
            }
        }
        guard lineEnd &- start <= maxLineLength, lineEnd == end || bytes[lineEnd] == UInt8(ascii: "\n")
        else { return nil }
        // Below 10^15: exact as a Double, and converted as a signed integer in one instruction.
        let magnitude = Double(Int64(bitPattern: mantissa))
        let value = fractionDigits == 0 ? magnitude : magnitude / Self.powersOfTen[fractionDigits]
        let name = UnsafeRawBufferPointer(rebasing: bytes[start..<colon])
        let hash =
            hashed
            ? Self.finish(h, count: colon &- start, kind: kind) : Self.nameHash(name, kind: kind, seed: seed)
        return (kind, colon, value, hash, lineEnd)
    }

    /// Copies a name (a line's first `count` bytes, `count` > 0) to `destination`, eight bytes at
    /// a time, the last eight in one load and store (some of them twice): most names are a few
    /// words long, so this saves a call to `memcpy`.
    @inline(__always)
    static func copyName(from source: UnsafeRawPointer, count: Int, to destination: UnsafeMutableRawPointer) {
        guard count >= 8 else { return destination.copyMemory(from: source, byteCount: count) }
        var offset = 0
        while offset + 8 < count {
            destination.storeBytes(
                of: source.loadUnaligned(fromByteOffset: offset, as: UInt64.self), toByteOffset: offset, as: UInt64.self
            )
            offset += 8
        }
        destination.storeBytes(
            of: source.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self), toByteOffset: count - 8,
            as: UInt64.self)
    }

    /// Where a line's ':' and '|' bytes are: a bit per byte (bit i for byte i) of each, for an
    /// ASCII line of 8 to 64 bytes, found eight bytes at a time; other lines (and every line
    /// when disabled) are searched for each separator, eight bytes at a time.
    struct Separators {
        private let colons: UInt64
        private let bars: UInt64
        private let hasMasks: Bool
        /// Whether the line is 8 to 64 bytes, all ASCII (false for other lines, which the
        /// caller checks as UTF-8).
        let isASCII: Bool

        @inline(__always)
        init(_ line: UnsafeRawBufferPointer, enabled: Bool) {
            #if _endian(little)
                let count = line.count
                if enabled && count >= 8 && count <= 64 {
                    var colons: UInt64 = 0
                    var bars: UInt64 = 0
                    var high: UInt64 = 0
                    var position = 0
                    repeat {
                        // The last word may overlap the one before: its bytes get the same bits.
                        let offset = Swift.min(position, count - 8)
                        let word = line.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                        high |= word
                        colons |= Self.bits(of: word, equalTo: 0x3A3A_3A3A_3A3A_3A3A) &<< UInt64(offset)
                        bars |= Self.bits(of: word, equalTo: 0x7C7C_7C7C_7C7C_7C7C) &<< UInt64(offset)
                        position += 8
                    } while position < count
                    // The masks hold for ASCII lines only (see `bits(of:equalTo:)`); the others
                    // are checked as UTF-8 and searched byte by byte.
                    isASCII = high & 0x8080_8080_8080_8080 == 0
                    (self.colons, self.bars, hasMasks) = (colons, bars, isASCII)
                    return
                }
            #endif
            (colons, bars, hasMasks, isASCII) = (0, 0, false, false)
        }

        /// A bit per byte of `word` (bit i for the byte at offset i) that equals its byte of
        /// `pattern`, if every byte of both is ASCII (else the bits are unspecified).
        @inline(__always)
        static func bits(of word: UInt64, equalTo pattern: UInt64) -> UInt64 {
            let x = word ^ pattern
            // The top bit of each byte of `x` that is zero, exactly: each byte is below 0x80, so
            // adding 0x7F sets its top bit unless it is zero, and carries into no other byte.
            let zero = ~(x &+ 0x7F7F_7F7F_7F7F_7F7F) & 0x8080_8080_8080_8080
            // Gathers the eight top bits into the top byte, byte i's as bit 56 + i.
            return ((zero &>> 7) &* 0x0102_0408_1020_4080) &>> 56
        }

        /// The position of the first set bit of `mask` in `start..<end` (at most 64), or `end`.
        @inline(__always)
        private static func first(in mask: UInt64, from start: Int, to end: Int) -> Int {
            let after = start < 64 ? mask & (~0 &<< UInt64(start)) : 0
            return after == 0 ? end : Swift.min(after.trailingZeroBitCount, end)
        }

        /// The position of the first `byte` (':' or '|') in `line[start..<end]`, or `end`.
        @inline(__always)
        func index(of byte: UInt8, in line: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
            guard hasMasks else { return firstIndex(of: byte, in: line, from: start, to: end) }
            return Self.first(in: byte == UInt8(ascii: ":") ? colons : bars, from: start, to: end)
        }

        /// The position of the first ':' or '|' in `line[0..<end]`, or `end`.
        @inline(__always)
        func indexOfColonOrBar(in line: UnsafeRawBufferPointer, to end: Int) -> Int {
            guard hasMasks else {
                return firstIndex(of: UInt8(ascii: ":"), or: UInt8(ascii: "|"), in: line, from: 0, to: end)
            }
            return Self.first(in: colons | bars, from: 0, to: end)
        }
    }

    /// `loop` as the little-endian `UInt32` of its four bytes.
    private static let loopLowered = UInt32(littleEndian: 0x706F_6F6C)

    /// Whether a name is one that an output would show as one of loopd's own (`loopd.*` in
    /// JSON and Graphite, `loopd_*` in Prometheus): after any leading dots (Graphite drops
    /// them), `loopd` in any case, alone or then a byte that the outputs' cleaning turns into a
    /// separator: not a lower-case letter or a digit, and not an upper-case letter after an
    /// upper-case `D` (`loopd`, `loopd.x`, `loopd_x`, `LOOPD-x`, `loopdX`; not `loopdx`,
    /// `LOOPDX`).
    static func isReserved(_ line: UnsafeRawBufferPointer, nameEnd: Int) -> Bool {
        var start = 0
        while start < nameEnd && line[start] == UInt8(ascii: ".") { start += 1 }
        guard nameEnd - start >= 5 else { return false }
        // Letter by letter, any case (`| 0x20` lowers an ASCII letter, and makes no other byte
        // a letter): most names differ at the first.
        guard line[start] | 0x20 == UInt8(ascii: "l"), line[start + 1] | 0x20 == UInt8(ascii: "o"),
            line[start + 2] | 0x20 == UInt8(ascii: "o"), line[start + 3] | 0x20 == UInt8(ascii: "p"),
            line[start + 4] | 0x20 == UInt8(ascii: "d")
        else { return false }
        guard nameEnd - start > 5 else { return true }  // `loopd` itself: its timer is loopd.count.
        let next = line[start + 5]
        switch next {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return false
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return line[start + 4] == UInt8(ascii: "d")
        default: return true
        }
    }

    /// Doubles the space for values and signs.
    @inline(never)
    private mutating func growValues() {
        let values = UnsafeMutablePointer<Double>.allocate(capacity: 2 * valueCapacity)
        let deltas = UnsafeMutablePointer<Bool>.allocate(capacity: 2 * valueCapacity)
        values.moveInitialize(from: valueStorage, count: valueCapacity)
        deltas.moveInitialize(from: deltaStorage, count: valueCapacity)
        valueStorage.deallocate()
        deltaStorage.deallocate()
        (valueStorage, deltaStorage) = (values, deltas)
        valueCapacity *= 2
    }

    /// Doubles the space for members.
    @inline(never)
    private mutating func growMembers() {
        let members = UnsafeMutablePointer<UInt64>.allocate(capacity: 2 * memberCapacity)
        members.moveInitialize(from: memberStorage, count: memberCapacity)
        memberStorage.deallocate()
        memberStorage = members
        memberCapacity *= 2
    }

    // MARK: The key

    /// The key of a line with tags: the kind's byte, the name, `|#` and the tags sorted, joined
    /// by commas (a tagless line's key is made inline in `parse`).
    private mutating func buildTaggedKey(_ line: UnsafeRawBufferPointer, name: Range<Int>) {
        if tagCount > 1 {
            Self.sortInPlace(UnsafeMutableBufferPointer(start: tagStorage, count: tagCount)) {
                Self.less(line, $0, $1)
            }
        }
        let key = keyStorage
        var length = 0
        func append(_ range: Range<Int>) {
            let count = range.count
            (key + length).copyMemory(from: line.baseAddress! + range.lowerBound, byteCount: count)
            length += count
        }
        key.storeBytes(of: kind.rawValue, as: UInt8.self)
        length = 1
        append(name)
        key.storeBytes(of: UInt8(ascii: "|"), toByteOffset: length, as: UInt8.self)
        key.storeBytes(of: UInt8(ascii: "#"), toByteOffset: length + 1, as: UInt8.self)
        length += 2
        for position in 0..<tagCount {
            if position > 0 {
                key.storeBytes(of: UInt8(ascii: ","), toByteOffset: length, as: UInt8.self)
                length += 1
            }
            append(tagStorage[position])
        }
        keyLength = length
        keyHash = Self.nameHash(UnsafeRawBufferPointer(start: key + 1, count: length - 1), kind: kind, seed: seed)
    }

    /// Sorts `elements` in place by `areInIncreasingOrder`, allocating nothing: insertion sort up
    /// to 16 elements (lines carry a handful of tags, usually in order already), heapsort beyond.
    ///
    /// A client chooses the tags, so the worst case is what matters: insertion sort took 13.7 ms
    /// of loop time for one 8 KiB line of reverse-ordered tags. Heapsort's worst case is
    /// O(n log n) comparisons, and it needs no buffer. Not stable, which is of no consequence
    /// for tags: equal tags are equal bytes.
    ///
    /// - Complexity: at most about 2n log2 n comparisons.
    @_spi(Testing)
    @inline(__always)
    public static func sortInPlace<Element>(
        _ elements: UnsafeMutableBufferPointer<Element>, by areInIncreasingOrder: (Element, Element) -> Bool
    ) {
        let count = elements.count
        if count <= 16 {
            guard count > 1 else { return }
            for position in 1..<count {
                let element = elements[position]
                var hole = position
                while hole > 0 && areInIncreasingOrder(element, elements[hole - 1]) {
                    elements[hole] = elements[hole - 1]
                    hole -= 1
                }
                elements[hole] = element
            }
            return
        }
        // Moves the element at `root` down the max-heap held in elements[0..<end].
        func siftDown(_ root: Int, _ end: Int) {
            var parent = root
            let element = elements[parent]
            while true {
                var child = 2 * parent + 1
                guard child < end else { break }
                if child + 1 < end && areInIncreasingOrder(elements[child], elements[child + 1]) { child += 1 }
                guard areInIncreasingOrder(element, elements[child]) else { break }
                elements[parent] = elements[child]
                parent = child
            }
            elements[parent] = element
        }
        for root in stride(from: count / 2 - 1, through: 0, by: -1) { siftDown(root, count) }
        for end in stride(from: count - 1, to: 0, by: -1) {
            elements.swapAt(0, end)
            siftDown(0, end)
        }
    }

    private static func less(_ line: UnsafeRawBufferPointer, _ a: Range<Int>, _ b: Range<Int>) -> Bool {
        let shared = min(a.count, b.count)
        let order = memcmpBytes(line.baseAddress! + a.lowerBound, line.baseAddress! + b.lowerBound, shared)
        return order != 0 ? order < 0 : a.count < b.count
    }

    // MARK: Fields

    @inline(__always)
    private func index(of byte: UInt8, in line: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
        firstIndex(of: byte, in: line, from: start, to: end)
    }

    @inline(__always)
    private static func kind(_ line: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> MetricKind? {
        switch end - start {
        case 1:
            switch line[start] {
            case UInt8(ascii: "c"): .counter
            case UInt8(ascii: "g"): .gauge
            case UInt8(ascii: "h"): .histogram
            case UInt8(ascii: "d"): .distribution
            case UInt8(ascii: "s"): .set
            default: nil
            }
        case 2: line[start] == UInt8(ascii: "m") && line[start + 1] == UInt8(ascii: "s") ? .timer : nil
        default: nil
        }
    }

    /// The value of `line[start..<end]` if it is 1 to 15 digits and nothing else, the most
    /// common value (a count of 1, a time in whole milliseconds), parsed inline; else nil, and
    /// `number(_:_:_:)` parses it.
    @inline(__always)
    private static func wholeNumber(_ line: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Double? {
        guard start < end && end - start <= 15 else { return nil }
        var whole: UInt64 = 0
        var position = start
        repeat {
            let digit = line[position] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            whole = whole &* 10 &+ UInt64(digit)
            position += 1
        } while position < end
        // Exact: 15 digits stay below 2^53.
        return Double(whole)
    }

    /// A finite decimal number: `[+-]digits[.digits][e[+-]digits]`, with at least one digit
    /// before the exponent. Exact (Clinger's fast path) when the digits fit 2^53 and the power of
    /// ten is at most 22; otherwise the standard library's conversion, which allocates.
    static func number(_ line: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Double? {
        var position = start
        var negative = false
        if position < end && (line[position] == UInt8(ascii: "+") || line[position] == UInt8(ascii: "-")) {
            negative = line[position] == UInt8(ascii: "-")
            position += 1
        }
        var mantissa: UInt64 = 0
        var digits = 0
        var significant = 0
        var exponent = 0
        var exact = true
        func digit(_ byte: UInt8) -> UInt64? { byte &- 48 < 10 ? UInt64(byte &- 48) : nil }
        while position < end, let d = digit(line[position]) {
            if significant < 19 {
                mantissa = mantissa &* 10 &+ d
                if mantissa != 0 { significant += 1 }
            } else {
                exponent += 1
                exact = false
            }
            digits += 1
            position += 1
        }
        if position < end && line[position] == UInt8(ascii: ".") {
            position += 1
            while position < end, let d = digit(line[position]) {
                if significant < 19 {
                    mantissa = mantissa &* 10 &+ d
                    if mantissa != 0 { significant += 1 }
                    exponent -= 1
                } else {
                    exact = false
                }
                digits += 1
                position += 1
            }
        }
        guard digits > 0 else { return nil }
        if position < end && (line[position] == UInt8(ascii: "e") || line[position] == UInt8(ascii: "E")) {
            position += 1
            var negativeExponent = false
            if position < end && (line[position] == UInt8(ascii: "+") || line[position] == UInt8(ascii: "-")) {
                negativeExponent = line[position] == UInt8(ascii: "-")
                position += 1
            }
            var written = 0
            var exponentDigits = 0
            while position < end, let d = digit(line[position]) {
                if written < 100_000 { written = written * 10 + Int(d) }
                exponentDigits += 1
                position += 1
            }
            guard exponentDigits > 0 else { return nil }
            exponent += negativeExponent ? -written : written
        }
        guard position == end else { return nil }
        if exact && mantissa < (1 << 53) && exponent >= -22 && exponent <= 22 {
            let magnitude = Double(mantissa)
            if exponent == 0 { return negative ? -magnitude : magnitude }
            let scaled = exponent < 0 ? magnitude / powersOfTen[-exponent] : magnitude * powersOfTen[exponent]
            return negative ? -scaled : scaled
        }
        if mantissa == 0 { return negative ? -0.0 : 0 }
        // Rare: more than 15 significant digits or a large exponent.
        guard let parsed = Double(String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<end]), as: UTF8.self)),
            parsed.isFinite
        else { return nil }
        return parsed
    }

    static let powersOfTen: [Double] = (0...22).map { power in
        var value = 1.0
        for _ in 0..<power { value *= 10 }
        return value
    }

    // MARK: Hashing and UTF-8

    /// The process's hash seed: keys hash differently in each run, so that a sender cannot
    /// choose names that collide.
    @_spi(Testing) public static let seed: UInt64 = UInt64.random(in: 1...UInt64.max)

    /// A 64-bit hash of `bytes`, eight bytes at a time (a multiply-xorshift mix).
    @inline(__always)
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 { hash(bytes, seed: seed) }

    /// The hash of a canonical key (its kind's byte, then the rest), with the process's seed: the
    /// hash of the bytes after the kind's, which the kind then changes. A tagless line's key is
    /// its kind and its name, so its hash is the name's, taken in the line itself
    /// (`nameHash(_:kind:seed:)`), with no copy of the key made first, and before the kind is
    /// known (it follows the name).
    @inline(__always)
    public static func keyHash(_ key: UnsafeRawBufferPointer) -> UInt64 { keyHash(key, seed: seed) }

    /// `keyHash(_:)` with the seed given.
    @inline(__always)
    static func keyHash(_ key: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        guard let kind = key.first.flatMap(MetricKind.init(rawValue:)) else { return hash(key, seed: seed) }
        return nameHash(UnsafeRawBufferPointer(rebasing: key[1...]), kind: kind, seed: seed)
    }

    /// The hash of the key whose kind is `kind` and whose bytes after the kind's are `name`.
    @inline(__always)
    static func nameHash(_ name: UnsafeRawBufferPointer, kind: MetricKind, seed: UInt64) -> UInt64 {
        finish(hashWords(name, seed: seed), count: name.count, kind: kind)
    }

    /// `hash(_:)` with the seed given: a parser keeps a copy, as reading the static one checks
    /// that it was initialized (a call to `swift_once`) every time.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        finish(hashWords(bytes, seed: seed), count: bytes.count, tweak: 0)
    }

    /// `bytes` mixed into `seed` word by word, the last word zero-padded: a hash before
    /// `finish(_:count:tweak:)`.
    @inline(__always)
    static func hashWords(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var h = seed
        var position = 0
        let count = bytes.count
        while position + 8 <= count {
            h = mix(h, bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
            position += 8
        }
        if position < count {
            var word: UInt64 = 0
            #if _endian(little)
                if count >= 8 {
                    // The last eight bytes, shifted so that only the rest remains: the same word
                    // as the bytes assembled one by one, in one load.
                    let last = bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                    word = last >> (8 * UInt64(8 - (count - position)))
                    position = count
                }
            #endif
            var shift: UInt64 = 0
            while position < count {
                word |= UInt64(bytes[position]) << shift
                shift += 8
                position += 1
            }
            h = mix(h, word)
        }
        return h
    }

    /// One word into a hash (a multiply-xorshift step).
    @inline(__always)
    static func mix(_ h: UInt64, _ word: UInt64) -> UInt64 {
        let product = (h ^ word) &* 0xBF58_476D_1CE4_E5B9
        return product ^ (product >> 31)
    }

    /// The hash of `count` bytes whose words are mixed into `h`, and of `tweak`: the count and
    /// the tweak last, so that a hash can be taken while the end of the bytes, and what follows
    /// them, are still being looked for.
    @inline(__always)
    static func finish(_ h: UInt64, count: Int, tweak: UInt64) -> UInt64 {
        var h = h ^ (UInt64(count) &* 0x9E37_79B9_7F4A_7C15) ^ tweak
        h = (h ^ (h >> 30)) &* 0x94D0_49BB_1331_11EB
        return h ^ (h >> 31)
    }

    /// `finish(_:count:tweak:)` for a name of kind `kind`.
    @inline(__always)
    static func finish(_ h: UInt64, count: Int, kind: MetricKind) -> UInt64 {
        finish(h, count: count, tweak: (UInt64(kind.rawValue) &+ 1) &* 0xD6E8_FEB8_6659_FD93)
    }

    /// Whether `bytes` are UTF-8: eight ASCII bytes at a time, then a full check of the rest.
    func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var position = 0
        let count = bytes.count
        while position + 8 <= count {
            if bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { break }
            position += 8
        }
        // Fewer than eight left, all ASCII so far: the last eight bytes (some already checked) in
        // one load.
        if position + 8 > count && count >= 8
            && bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self) & 0x8080_8080_8080_8080 == 0
        {
            return true
        }
        while position < count {
            let lead = bytes[position]
            if lead < 0x80 {
                position += 1
                continue
            }
            let length: Int
            var minimum: UInt32
            var scalar: UInt32
            switch lead {
            case 0xC2...0xDF: (length, minimum, scalar) = (2, 0x80, UInt32(lead & 0x1F))
            case 0xE0...0xEF: (length, minimum, scalar) = (3, 0x800, UInt32(lead & 0x0F))
            case 0xF0...0xF4: (length, minimum, scalar) = (4, 0x10000, UInt32(lead & 0x07))
            default: return false
            }
            guard position + length <= count else { return false }
            for offset in 1..<length {
                let continuation = bytes[position + offset]
                guard continuation & 0xC0 == 0x80 else { return false }
                scalar = scalar << 6 | UInt32(continuation & 0x3F)
            }
            guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return false }
            position += length
        }
        return true
    }
}

/// The top bit of each zero byte of `word`, and maybe of bytes above the lowest zero one: the
/// lowest set bit marks the first zero byte exactly. `word - 0x01…` borrows into a byte's top
/// bit only from a zero byte, and a borrow runs upwards only, so no byte below the first zero
/// one is marked.
@inline(__always)
func zeroByteMarks(_ word: UInt64) -> UInt64 {
    (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
}

/// The position of the first `byte` in `bytes[start..<end]`, or `end`: eight bytes at a time.
@_spi(Testing)
@inline(__always)
public func firstIndex(of byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
    var position = start
    #if _endian(little)
        // A byte of `word` is zero where `bytes` holds `byte`.
        let pattern = UInt64(byte) &* 0x0101_0101_0101_0101
        while position + 8 <= end {
            let zeros = zeroByteMarks(bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self) ^ pattern)
            if zeros != 0 { return position + zeros.trailingZeroBitCount / 8 }
            position += 8
        }
    #endif
    while position < end && bytes[position] != byte { position += 1 }
    return position
}

/// The position of the first `byte` or `other` in `bytes[start..<end]`, or `end`: eight bytes
/// at a time, as `firstIndex(of:in:from:to:)` (the lowest marked byte of either search is the
/// first of both).
@_spi(Testing)
@inline(__always)
public func firstIndex(
    of byte: UInt8, or other: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int, to end: Int
) -> Int {
    var position = start
    #if _endian(little)
        let pattern = UInt64(byte) &* 0x0101_0101_0101_0101
        let otherPattern = UInt64(other) &* 0x0101_0101_0101_0101
        while position + 8 <= end {
            let word = bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)
            let zeros = zeroByteMarks(word ^ pattern) | zeroByteMarks(word ^ otherPattern)
            if zeros != 0 { return position + zeros.trailingZeroBitCount / 8 }
            position += 8
        }
    #endif
    while position < end && bytes[position] != byte && bytes[position] != other { position += 1 }
    return position
}

/// Whether the `count` bytes at `a` and at `b` are equal: eight at a time, and the last eight
/// (or four) in one load that may overlap the bytes already compared.
@inline(__always)
func equalBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
    if count >= 8 {
        var position = 0
        while position &+ 8 < count {
            if a.loadUnaligned(fromByteOffset: position, as: UInt64.self)
                != b.loadUnaligned(fromByteOffset: position, as: UInt64.self)
            {
                return false
            }
            position &+= 8
        }
        return a.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
            == b.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
    }
    if count >= 4 {
        return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
            && a.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
                == b.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
    }
    var position = 0
    while position < count {
        if a.load(fromByteOffset: position, as: UInt8.self) != b.load(fromByteOffset: position, as: UInt8.self) {
            return false
        }
        position += 1
    }
    return true
}

/// `memcmp` without importing the C library (the fuzz target builds this file alone).
@inline(__always)
func memcmpBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Int {
    var position = 0
    while position + 8 <= count {
        let x = a.loadUnaligned(fromByteOffset: position, as: UInt64.self)
        let y = b.loadUnaligned(fromByteOffset: position, as: UInt64.self)
        if x != y { return x.bigEndian < y.bigEndian ? -1 : 1 }
        position += 8
    }
    while position < count {
        let x = a.load(fromByteOffset: position, as: UInt8.self)
        let y = b.load(fromByteOffset: position, as: UInt8.self)
        if x != y { return x < y ? -1 : 1 }
        position += 1
    }
    return 0
}

/// The plain lines (`StatsDParser.plainLine(_:from:)`) of one datagram, as
/// `Ingest.ingest(datagram:truncated:)` and `SeriesTable.recordPlainCounters(_:first:at:)`
/// read them: lines end with a newline, and a truncated datagram's last line is not plain.
struct PlainLines {
    let datagram: UnsafeRawBufferPointer
    /// The datagram lost its tail.
    let truncated: Bool
    /// The parser's.
    let maxLineLength: Int
    /// The parser's `seed`.
    let seed: UInt64

    /// The plain line at `start`, or nil if there is none there: the datagram's end, a line of
    /// another shape, one longer than `maxLineLength`, a truncated datagram's last line, or one
    /// that starts with `_` (a DogStatsD event or service check such as `_e{1,1}:5|c` looks
    /// plain).
    @inline(__always)
    func line(at start: Int) -> SeriesTable.PlainLine? {
        guard start < datagram.count, datagram[start] != UInt8(ascii: "_"),
            let line = StatsDParser.plainLine(datagram, from: start, maxLineLength: maxLineLength, seed: seed),
            line.lineEnd < datagram.count || !truncated
        else { return nil }
        return (
            line.kind, UnsafeRawBufferPointer(rebasing: datagram[start..<line.nameEnd]), line.value, line.hash,
            line.lineEnd
        )
    }
}

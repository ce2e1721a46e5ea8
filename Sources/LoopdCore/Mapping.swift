// Mapping rules: a StatsD name in, a series name and tags out, or the line dropped. Standard
// library only (the fuzz target compiles it with the parser); regular expressions are the
// standard library's `Regex`.

/// One mapping rule: a pattern on a line's name (and optionally its type), and what the line
/// becomes when the pattern matches.
///
/// A glob pattern is dot-separated components; in a component, `*` matches any run of bytes but
/// a `.` (so `api.*.time` matches `api.users.time` and not `api.a.b.time`), and each `*` is a
/// capture, `$1` for the first. A regex pattern matches anywhere in the name (as in
/// statsd_exporter: anchor it with `^` and `$` to match the whole name); its groups are the
/// captures. `name` and each label's value are templates: `$1`…`$9` or `${12}` stand for
/// captures, `$0` for what the whole pattern matched, `$$` for a `$`.
public struct MappingRule: Sendable {
    /// How `match` is read.
    public enum MatchType: String, Sendable, CaseIterable {
        /// Dot-separated components, `*` matching within one component.
        case glob
        /// A regular expression (the standard library's `Regex` syntax), found anywhere in the name.
        case regex
    }

    /// What a matching line becomes.
    public enum Action: String, Sendable, CaseIterable {
        /// Recorded under the rule's name and labels.
        case map
        /// Not recorded; counted in `Ingest.Counts.mappingDropped`.
        case drop
    }

    /// The pattern, as written.
    public let match: String
    /// How the pattern is read.
    public let matchType: MatchType
    /// When set, the rule applies to lines of these kinds only.
    public let kinds: [MetricKind]?
    /// What a matching line becomes.
    public let action: Action
    /// The series name template; nil keeps the line's name.
    public let name: String?
    /// Labels added to the line's tags (a label replaces a tag of the same key), templates
    /// in their values, in the order written.
    public let labels: [(key: String, value: String)]
    /// The percentiles reported for the series this rule maps, overriding the global ones.
    public let percentiles: [Double]?
    /// The bucket bounds of the Prometheus histograms of the series this rule maps (sampled
    /// kinds), overriding the global ones.
    public let buckets: [Double]?

    /// A glob's components and its number of `*`; empty for a regex.
    private let globComponents: [[UInt8]]
    private let globStars: Int
    /// A regex, compiled; nil for a glob. Kept apart from the glob's fields rather than in an
    /// enum: a class reference packed with an enum's tag bits is not a pointer that
    /// LeakSanitizer recognises, and it reported the rule's regex as leaked.
    private let regex: RegexBox?
    private let nameTemplate: Template?
    private let labelTemplates: [(key: [UInt8], value: Template)]

    /// Checks and compiles a rule; throws `MappingError` naming what is wrong.
    public init(
        match: String, matchType: MatchType = .glob, kinds: [MetricKind]? = nil, action: Action = .map,
        name: String? = nil, labels: [(key: String, value: String)] = [], percentiles: [Double]? = nil,
        buckets: [Double]? = nil
    ) throws(MappingError) {
        guard !match.isEmpty else { throw MappingError("match: the pattern is empty") }
        switch matchType {
        case .glob:
            let components = match.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
            guard components.allSatisfy({ !$0.isEmpty }) else {
                throw MappingError(
                    "match \(Mapper.shown(match)): a glob has no empty component (no '..', no leading or trailing '.')"
                )
            }
            if let bad = match.utf8.first(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "|") }) {
                throw MappingError(
                    "match \(Mapper.shown(match)): a name never contains \(Character(Unicode.Scalar(bad)).debugDescription)"
                )
            }
            let stars = match.utf8.count(where: { $0 == UInt8(ascii: "*") })
            guard stars <= MappingRule.maxCaptures else {
                throw MappingError(
                    "match \(Mapper.shown(match)): at most \(MappingRule.maxCaptures) '*', got \(stars)")
            }
            (globComponents, globStars, regex) = (components.map(Array.init), stars, nil)
        case .regex:
            do {
                (globComponents, globStars) = ([], 0)
                regex = RegexBox(try Regex(match), pattern: match)
            } catch {
                throw MappingError("match \(Mapper.shown(match)): not a regular expression: \(error)")
            }
        }
        let captures = regex?.captureCount ?? globStars
        if action == .drop && (name != nil || !labels.isEmpty || percentiles != nil || buckets != nil) {
            throw MappingError("action drop: a rule that drops takes no name, labels, percentiles or buckets")
        }
        if let name {
            let template = try Template(name, what: "name", captures: captures)
            guard !template.parts.isEmpty else { throw MappingError("name: empty") }
            if Mapper.hasControlCharacter(name) {
                throw MappingError("name \(Mapper.shown(name)): a name cannot contain control characters")
            }
            if let bad = template.literalBytes.first(where: { $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "|") }) {
                throw MappingError(
                    "name \(Mapper.shown(name)): a name cannot contain \(Character(Unicode.Scalar(bad)).debugDescription)"
                )
            }
            nameTemplate = template
        } else {
            nameTemplate = nil
        }
        var seen = Set<String>()
        labelTemplates = try labels.map { label throws(MappingError) in
            guard !label.key.isEmpty,
                label.key.utf8.allSatisfy({
                    $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "|") && $0 > 0x20
                })
            else {
                throw MappingError(
                    "labels: the key \(Mapper.shown(label.key)) must be non-empty, without ':', ',', '|', spaces or control characters"
                )
            }
            guard seen.insert(label.key).inserted else { throw MappingError("labels: \(label.key) given twice") }
            if Mapper.hasControlCharacter(label.value) {
                throw MappingError(
                    "labels.\(label.key) \(Mapper.shown(label.value)): a value cannot contain control characters")
            }
            if label.value.utf8.contains(where: { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "|") }) {
                throw MappingError(
                    "labels.\(label.key) \(Mapper.shown(label.value)): a value cannot contain ',' or '|' (a tag would split)"
                )
            }
            return (Array(label.key.utf8), try Template(label.value, what: "labels.\(label.key)", captures: captures))
        }
        if let percentiles { try Self.checkPercentiles(percentiles, what: "percentiles") }
        if let buckets, let problem = PrometheusOptions.bucketsProblem(buckets) {
            throw MappingError("buckets: \(problem)")
        }
        (self.match, self.matchType, self.kinds, self.action) = (match, matchType, kinds, action)
        (self.name, self.labels, self.percentiles, self.buckets) = (name, labels, percentiles, buckets)
    }

    /// The most captures a glob may have (`*`); `$n` beyond a pattern's captures is refused.
    public static let maxCaptures = 32

    /// The most percentiles a list may hold.
    public static let maxPercentiles = 32

    /// Checks a percentile list: at most `maxPercentiles`, each in (0, 100], no repeats.
    public static func checkPercentiles(_ percentiles: [Double], what: String) throws(MappingError) {
        guard percentiles.count <= maxPercentiles else {
            throw MappingError("\(what): at most \(maxPercentiles) percentiles, got \(percentiles.count)")
        }
        for (position, p) in percentiles.enumerated() {
            guard p > 0 && p <= 100 else {
                throw MappingError("\(what): each percentile must be in (0, 100], got \(p)")
            }
            guard !percentiles[..<position].contains(p) else { throw MappingError("\(what): \(p) given twice") }
        }
    }

    /// The captures of `name` if the rule applies to a line of `kind` named `name`.
    func captures(kind: MetricKind, name: UnsafeRawBufferPointer) -> [Range<Int>]? {
        if let kinds, !kinds.contains(kind) { return nil }
        guard let box = regex else { return Self.glob(globComponents, stars: globStars, name) }
        let text = String(decoding: name, as: UTF8.self)
        guard let match = try? box.regex.firstMatch(in: text) else { return nil }
        var ranges = [Range<Int>]()
        for group in match.output {
            // A group that took no part in the match captures nothing.
            guard let range = group.range else {
                ranges.append(0..<0)
                continue
            }
            let start = text.utf8.distance(from: text.utf8.startIndex, to: range.lowerBound)
            ranges.append(start..<(start + text.utf8.distance(from: range.lowerBound, to: range.upperBound)))
        }
        return ranges
    }

    /// Matches a name component by component; within one, `*` matches any bytes (there are no
    /// dots in a component): the classic wildcard match, which backtracks to the last `*` only,
    /// so that it is O(pattern × name) whatever the pattern.
    private static func glob(_ components: [[UInt8]], stars: Int, _ name: UnsafeRawBufferPointer) -> [Range<Int>]? {
        var captures = [0..<name.count]
        captures.reserveCapacity(stars + 1)
        var start = 0
        for (index, pattern) in components.enumerated() {
            var end = start
            while end < name.count && name[end] != UInt8(ascii: ".") { end += 1 }
            let isLast = index == components.count - 1
            guard isLast == (end == name.count) else { return nil }
            guard matchComponent(pattern, name, start, end, &captures) else { return nil }
            start = end + 1
        }
        return captures
    }

    private static func matchComponent(
        _ pattern: [UInt8], _ name: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ captures: inout [Range<Int>]
    ) -> Bool {
        let first = captures.count
        var p = 0
        var n = start
        var star = -1  // The pattern index of the last '*', and where its match began.
        var starMatch = 0
        while n < end {
            if p < pattern.count && pattern[p] == UInt8(ascii: "*") {
                captures.append(n..<n)
                star = p
                starMatch = n
                p += 1
            } else if p < pattern.count && pattern[p] == name[n] {
                p += 1
                n += 1
            } else if star >= 0 {
                // Let the last '*' take one byte more, and drop what followed it.
                starMatch += 1
                n = starMatch
                p = star + 1
                let starIndex = first + pattern[..<star].count(where: { $0 == UInt8(ascii: "*") })
                captures.removeSubrange((starIndex + 1)...)
                captures[starIndex] = captures[starIndex].lowerBound..<n
            } else {
                return false
            }
        }
        while p < pattern.count && pattern[p] == UInt8(ascii: "*") {
            captures.append(end..<end)
            p += 1
        }
        return p == pattern.count
    }

    /// The name and the added labels for a line whose captures are `captures` (from
    /// `captures(kind:name:)`). Bytes of a capture that would break a tag (`,`, `|`) become
    /// `_` in labels.
    func expand(name: UnsafeRawBufferPointer, captures: [Range<Int>]) -> (
        name: [UInt8]?, labels: [(key: [UInt8], value: [UInt8])]
    ) {
        let expanded = nameTemplate.map { $0.expand(name, captures, cleaning: false) }
        let labels = labelTemplates.map { ($0.key, $0.value.expand(name, captures, cleaning: true)) }
        return (expanded, labels)
    }

}

/// A compiled regular expression and its number of groups. `Regex` is not `Sendable`; a rule's
/// is only read after it is built.
private final class RegexBox: @unchecked Sendable {
    let regex: Regex<AnyRegexOutput>
    let captureCount: Int

    init(_ regex: Regex<AnyRegexOutput>, pattern: String) {
        self.regex = regex
        captureCount = Self.groups(in: pattern)
    }

    /// The capturing groups of a pattern: each `(` outside a bracket expression and not
    /// escaped, but `(?` ones other than named groups (`(?<name>`, `(?P<name>`, `(?'name'`).
    static func groups(in pattern: String) -> Int {
        let bytes = Array(pattern.utf8)
        var count = 0
        var index = 0
        var inClass = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\\") {
                index += 2
                continue
            }
            if inClass {
                if byte == UInt8(ascii: "]") { inClass = false }
            } else if byte == UInt8(ascii: "[") {
                inClass = true
                // A ']' first in the class is a member, not its end.
                if index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "]") { index += 1 }
            } else if byte == UInt8(ascii: "(") {
                let rest = bytes[(index + 1)...]
                if rest.first != UInt8(ascii: "?") {
                    count += 1
                } else if rest.starts(with: "?P<".utf8) || rest.starts(with: "?'".utf8)
                    || (rest.starts(with: "?<".utf8) && !rest.starts(with: "?<=".utf8)
                        && !rest.starts(with: "?<!".utf8))
                {
                    count += 1
                }
            }
            index += 1
        }
        return count
    }
}

/// A template: literal bytes and capture references.
private struct Template: Sendable {
    enum Part: Sendable {
        case literal([UInt8])
        case capture(Int)
    }
    let parts: [Part]

    var literalBytes: [UInt8] {
        parts.flatMap { part -> [UInt8] in
            if case let .literal(bytes) = part { return bytes }
            return []
        }
    }

    init(_ text: String, what: String, captures: Int) throws(MappingError) {
        var parts = [Part]()
        var literal = [UInt8]()
        let bytes = Array(text.utf8)
        var index = 0
        func flush() {
            if !literal.isEmpty { parts.append(.literal(literal)) }
            literal = []
        }
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "$") else {
                literal.append(bytes[index])
                index += 1
                continue
            }
            index += 1
            var number = 0
            if index < bytes.count && bytes[index] == UInt8(ascii: "$") {
                literal.append(UInt8(ascii: "$"))
                index += 1
                continue
            } else if index < bytes.count && bytes[index] == UInt8(ascii: "{") {
                var end = index + 1
                while end < bytes.count && bytes[end] >= 0x30 && bytes[end] <= 0x39 && end - index < 4 {
                    number = number * 10 + Int(bytes[end] - 0x30)
                    end += 1
                }
                guard end > index + 1, end < bytes.count, bytes[end] == UInt8(ascii: "}") else {
                    throw MappingError("\(what) \(Mapper.shown(text)): '${' must be followed by digits and '}'")
                }
                index = end + 1
            } else if index < bytes.count && bytes[index] >= 0x30 && bytes[index] <= 0x39 {
                number = Int(bytes[index] - 0x30)
                index += 1
                // statsd_exporter reads `$10` as capture 10 and `$1_x` as a capture named `1_x`;
                // read here as `$1` then text, such a name would differ silently.
                if index < bytes.count, Self.isWordByte(bytes[index]) {
                    throw MappingError(
                        "\(what) \(Mapper.shown(text)): $\(number) followed by \(Character(Unicode.Scalar(bytes[index])).debugDescription) is ambiguous: write ${\(number)} then the text, or ${n} for capture n"
                    )
                }
            } else {
                throw MappingError("\(what) \(Mapper.shown(text)): '$' must be followed by 0-9, {n} or $")
            }
            guard number <= captures else {
                throw MappingError(
                    "\(what) \(Mapper.shown(text)): $\(number) names no capture (the pattern has \(captures))")
            }
            flush()
            parts.append(.capture(number))
        }
        flush()
        self.parts = parts
    }

    /// A letter, a digit or `_`: what statsd_exporter reads as part of a `$name`.
    static func isWordByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == UInt8(ascii: "_")
    }

    func expand(_ name: UnsafeRawBufferPointer, _ captures: [Range<Int>], cleaning: Bool) -> [UInt8] {
        var out = [UInt8]()
        for part in parts {
            switch part {
            case let .literal(bytes): out += bytes
            case let .capture(index):
                guard index < captures.count else { continue }
                for byte in name[captures[index]] {
                    out.append(
                        cleaning && (byte == UInt8(ascii: ",") || byte == UInt8(ascii: "|")) ? UInt8(ascii: "_") : byte)
                }
            }
        }
        return out
    }
}

/// A mapping rule that cannot be used, and why.
public struct MappingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, naming the key and the value.
    public var description: String

    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

/// What a line's key becomes before it is recorded: an ordered list of mapping rules (the
/// first that matches decides), then the namespace every series gets (a global prefix, a
/// prefix per kind, and tags added by the server). A line that no rule matches is recorded as
/// it came, in the namespace.
public struct Mapper: Sendable {
    /// The rules, in order.
    public let rules: [MappingRule]
    /// Put before every series' name, then a `.` (empty: none).
    public let prefix: String
    /// Put before the names of series of a kind, after `prefix`, then a `.`.
    public let kindPrefixes: [MetricKind: String]
    /// Tags added to every series that has no tag of the same key (`key:value` or `key`).
    public let tags: [String]

    /// Creates a mapper with `rules`, tried in order, and a namespace.
    public init(
        rules: [MappingRule] = [], prefix: String = "", kindPrefixes: [MetricKind: String] = [:], tags: [String] = []
    ) {
        (self.rules, self.prefix, self.kindPrefixes, self.tags) = (rules, prefix, kindPrefixes, tags)
        // The key of each added tag, and the prefix of each kind, once.
        tagKeys = tags.map { Array($0.utf8.prefix { $0 != UInt8(ascii: ":") }) }
        namePrefixes = MetricKind.allCases.map { kind in
            [prefix, kindPrefixes[kind] ?? ""].filter { !$0.isEmpty }.map { Array($0.utf8) + [UInt8(ascii: ".")] }
                .reduce([], +)
        }
    }

    private let tagKeys: [[UInt8]]
    /// By kind's raw value: what goes before the name.
    private let namePrefixes: [[UInt8]]

    /// Whether every line is recorded as it came: no rule, no namespace.
    public var isIdentity: Bool { rules.isEmpty && prefix.isEmpty && kindPrefixes.isEmpty && tags.isEmpty }

    /// What is wrong with a prefix (for a message naming its setting), or nil: it must not hold
    /// `:`, `|`, `#`, `,` or a space, nor make loopd's own names.
    public static func prefixProblem(_ prefix: String) -> String? {
        if prefix.utf8.count > maxPrefixBytes {
            return "must be at most \(maxPrefixBytes) bytes, got \(prefix.utf8.count)"
        }
        if prefix.utf8.contains(where: { ":|#, \t\n".utf8.contains($0) }) {
            return "must not contain ':', '|', '#', ',' or spaces, got \(shown(prefix))"
        }
        if hasControlCharacter(prefix) {
            return "must not contain control characters or line separators, got \(shown(prefix))"
        }
        if prefix.hasPrefix(".") || prefix.hasSuffix(".") || prefix.contains("..") {
            return
                "must not start or end with '.' or hold '..' (a '.' is added after it), got \(shown(prefix))"
        }
        let bytes = Array(prefix.utf8)
        if bytes.withUnsafeBytes({ StatsDParser.isReserved($0, nameEnd: $0.count) }) {
            return "would make every name one of loopd's own (loopd.*), got \(shown(prefix))"
        }
        return nil
    }

    /// What is wrong with a tag to add (`key:value` or `key`), or nil.
    public static func tagProblem(_ tag: String) -> String? {
        if tag.utf8.count > maxTagBytes { return "must be at most \(maxTagBytes) bytes, got \(tag.utf8.count)" }
        guard let first = tag.utf8.first, first != UInt8(ascii: ":"),
            !tag.utf8.contains(where: { ",|# \t\n".utf8.contains($0) }), !hasControlCharacter(tag)
        else {
            return
                "must be key:value or key, without ',', '|', '#', spaces or control characters, got \(shown(tag))"
        }
        return nil
    }

    /// The longest prefix, global or of a kind, in bytes.
    public static let maxPrefixBytes = 256
    /// The longest tag the server adds, in bytes.
    public static let maxTagBytes = 256
    /// The most tags the server adds to every series.
    public static let maxTags = 64

    /// Whether `text` holds a control character (C0, DEL or C1) or a Unicode line or paragraph
    /// separator: what no output should carry from a config file.
    public static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains {
            $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x2029
        }
    }

    /// `text` quoted and escaped for a message, cut to its first 80 characters (then `…`), so
    /// that a huge or hostile value neither floods a log nor writes into it.
    public static func shown(_ text: String) -> String {
        let limit = 80
        guard text.count > limit else { return text.debugDescription }
        return String(text.prefix(limit)).debugDescription + "…"
    }

    /// What a line becomes.
    public enum Result: Equatable, Sendable {
        /// No rule matched and there is no namespace: recorded as it came.
        case unchanged
        /// Dropped by rule `rule`.
        case drop(rule: Int)
        /// Recorded under `key` (a canonical key, as the parser builds one), by rule `rule` (-1:
        /// no rule matched; the namespace made the key).
        case mapped(key: [UInt8], rule: Int)
        /// What rule `rule` (-1: the namespace) made is not a name a line could have: empty, or
        /// one of loopd's own.
        case invalid(LineError, rule: Int)
    }

    /// Maps a line by its canonical key (the kind's raw value, the name, and `|#` and the tags
    /// sorted bytewise, joined by `,`).
    public func map(key: UnsafeRawBufferPointer) -> Result {
        guard let kind = MetricKind(rawValue: key[0]) else { return .unchanged }
        var nameEnd = 1
        while nameEnd < key.count && key[nameEnd] != UInt8(ascii: "|") { nameEnd += 1 }
        let name = UnsafeRawBufferPointer(rebasing: key[1..<nameEnd])
        var rule = -1
        var newName: [UInt8]?
        var labels: [(key: [UInt8], value: [UInt8])] = []
        for (index, candidate) in rules.enumerated() {
            guard let captures = candidate.captures(kind: kind, name: name) else { continue }
            if candidate.action == .drop { return .drop(rule: index) }
            (newName, labels) = candidate.expand(name: name, captures: captures)
            rule = index
            break
        }
        let namePrefix = namePrefixes[Int(kind.rawValue)]
        guard rule >= 0 || !namePrefix.isEmpty || !tags.isEmpty else { return .unchanged }
        let mappedName = namePrefix + (newName ?? Array(name))
        guard !(newName?.isEmpty ?? false) else { return .invalid(.emptyName, rule: rule) }
        let reserved = mappedName.withUnsafeBytes { StatsDParser.isReserved($0, nameEnd: $0.count) }
        guard !reserved else { return .invalid(.reservedName, rule: rule) }
        // The line's tags, less those a label replaces, then the labels, then the added tags whose
        // key none of those has; sorted bytewise.
        var tags = [[UInt8]]()
        if nameEnd < key.count {
            for tag in key[(nameEnd + 2)...].split(separator: UInt8(ascii: ",")) {
                let tagKey = tag.prefix { $0 != UInt8(ascii: ":") }
                if !labels.contains(where: { $0.key.elementsEqual(tagKey) }) { tags.append(Array(tag)) }
            }
        }
        for label in labels { tags.append(label.key + [UInt8(ascii: ":")] + label.value) }
        for (added, addedKey) in zip(self.tags, tagKeys)
        where !tags.contains(where: { $0.prefix { $0 != UInt8(ascii: ":") }.elementsEqual(addedKey) }) {
            tags.append(Array(added.utf8))
        }
        tags.sort { $0.lexicographicallyPrecedes($1) }
        var mapped = [kind.rawValue] + mappedName
        if !tags.isEmpty {
            mapped += [UInt8(ascii: "|"), UInt8(ascii: "#")]
            for (position, tag) in tags.enumerated() {
                if position > 0 { mapped.append(UInt8(ascii: ",")) }
                mapped += tag
            }
        }
        return .mapped(key: mapped, rule: rule)
    }
}

/// What the mapping rules made of each key seen lately, so that rules run once per distinct
/// key, not per line: an open-addressing table over the keys' bytes, like the series table's.
///
/// Bounded: when it holds `capacity` keys it is emptied (counted in `clears`) and fills again.
struct MappingCache {
    /// What the rules made of one key.
    struct Entry {
        /// `.mapped`'s key is in `mappedBytes[mappedStart..<mappedEnd]`, with hash `mappedHash`.
        var result: Kind
        var rule: Int32
        var mappedStart = 0
        var mappedEnd = 0
        var mappedHash: UInt64 = 0
    }

    enum Kind {
        case unchanged, drop, mapped
        case invalid(LineError)
    }

    /// The most keys held.
    let capacity: Int
    /// The most bytes of keys, original and mapped, held: keys are up to a line long, so that a
    /// count alone would let the cache hold gigabytes.
    static let maxBytes = 64 << 20
    /// How many times the cache was emptied because it was full.
    private(set) var clears: UInt64 = 0
    private var keyBytes: [UInt8] = []
    private var keyEnds: [Int] = []
    private(set) var mappedBytes: [UInt8] = []
    private(set) var entries: [Entry] = []
    private var slots = [Int32](repeating: -1, count: 64)

    init(capacity: Int) { self.capacity = capacity }

    /// The number of keys held.
    var count: Int { entries.count }

    /// The bytes the cache's storage holds (capacities).
    var storageBytes: Int {
        keyBytes.capacity + mappedBytes.capacity + 8 * keyEnds.capacity + 4 * slots.capacity
            + MemoryLayout<Entry>.stride * entries.capacity
    }

    /// The entry of `key`, if held.
    func find(_ key: UnsafeRawBufferPointer, hash: UInt64) -> Int? {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let entry = Int(slots[slot])
            if entry < 0 { return nil }
            let start = entry == 0 ? 0 : keyEnds[entry - 1]
            if keyEnds[entry] - start == key.count
                && keyBytes.withUnsafeBytes({ equalBytes($0.baseAddress! + start, key.baseAddress!, key.count) })
            {
                return entry
            }
            slot = (slot + 1) & mask
        }
    }

    /// Adds what `mapper` makes of `key` (not held) and returns its entry.
    mutating func add(_ key: UnsafeRawBufferPointer, hash: UInt64, _ mapper: Mapper) -> Int {
        if entries.count >= capacity || keyBytes.count + mappedBytes.count > Self.maxBytes { clear(counted: true) }
        var entry: Entry
        switch mapper.map(key: key) {
        case .unchanged: entry = Entry(result: .unchanged, rule: -1)
        case let .drop(rule): entry = Entry(result: .drop, rule: Int32(rule))
        case let .invalid(error, rule): entry = Entry(result: .invalid(error), rule: Int32(rule))
        case let .mapped(mapped, rule):
            entry = Entry(result: .mapped, rule: Int32(rule), mappedStart: mappedBytes.count)
            mappedBytes += mapped
            entry.mappedEnd = mappedBytes.count
            entry.mappedHash = mapped.withUnsafeBytes { StatsDParser.keyHash($0) }
        }
        let index = entries.count
        keyBytes.append(contentsOf: key)
        keyEnds.append(keyBytes.count)
        entries.append(entry)
        if entries.count * 2 > slots.count {
            rebuild(slotCount: slots.count * 2)
        } else {
            place(index, hash: hash)
        }
        return index
    }

    private mutating func place(_ index: Int, hash: UInt64) {
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while slots[slot] >= 0 { slot = (slot + 1) & mask }
        slots[slot] = Int32(index)
    }

    private mutating func rebuild(slotCount: Int) {
        slots = [Int32](repeating: -1, count: slotCount)
        for index in entries.indices {
            let start = index == 0 ? 0 : keyEnds[index - 1]
            let hash = keyBytes.withUnsafeBytes {
                StatsDParser.keyHash(UnsafeRawBufferPointer(rebasing: $0[start..<keyEnds[index]]))
            }
            place(index, hash: hash)
        }
    }

    /// Forgets every key (after a reload, or when full).
    mutating func clear(counted: Bool) {
        if counted { clears &+= 1 }
        keyBytes.removeAll(keepingCapacity: true)
        keyEnds.removeAll(keepingCapacity: true)
        mappedBytes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        slots = [Int32](repeating: -1, count: 64)
    }
}

/// The YAML that loopd's config file is written in: block mappings and sequences, flow lists and
/// maps (`[a, b]`, `{k: v}`), plain, single-quoted and double-quoted scalars, and comments; one
/// document. Each node carries its line, for messages.
///
/// What a config file has no use for is refused with its line rather than half-read: anchors
/// and aliases (`&a`, `*a`), tags (`!!str`), block scalars (`|`, `>`), complex keys (`? `),
/// directives (`%YAML`), several documents, scalars that continue on the next line, and tabs in
/// indentation. A key given twice in one mapping is refused too. Scalars are kept as written
/// (a number is its text); a plain `~`, `null` or nothing is marked as null.
///
/// The parser reads the text once, in O(n); nesting deeper than `maxDepth` is refused, so that
/// no file can exhaust the stack.
public enum YAML {
    /// A node and the line (from 1) where it starts.
    public indirect enum Node: Equatable, Sendable {
        /// A scalar's text; `isNull` for a plain `~`, `null` (any case YAML allows) or nothing.
        case scalar(String, line: Int, isNull: Bool)
        case sequence([Node], line: Int)
        case mapping([Pair], line: Int)

        /// The line the node starts on.
        public var line: Int {
            switch self {
            case let .scalar(_, line, _), let .sequence(_, line), let .mapping(_, line): line
            }
        }

        /// The scalar's text; nil for a sequence or a mapping.
        public var string: String? {
            if case let .scalar(text, _, _) = self { return text }
            return nil
        }

        /// Whether the node is a null scalar.
        public var isNull: Bool {
            if case let .scalar(_, _, isNull) = self { return isNull }
            return false
        }
    }

    /// A mapping's key and value.
    public struct Pair: Equatable, Sendable {
        public var key: Node
        public var value: Node
    }

    /// What is wrong, and on which line.
    public struct Error: Swift.Error, CustomStringConvertible, Equatable {
        /// The line (from 1).
        public var line: Int
        /// What is wrong there.
        public var reason: String
        /// `line N: reason`.
        public var description: String { "line \(line): \(reason)" }
    }

    /// The deepest nesting of lists and maps read.
    public static let maxDepth = 64

    /// The document of `text`, or nil if it has none (only comments and blank lines).
    public static func parse(_ text: String) throws(Error) -> Node? {
        try refuseControlCharacters(text)
        var parser = Parser(Array(text.utf8))
        return try parser.document()
    }

    /// Throws at the first control character (but tab, line feed and carriage return) or line
    /// break other than those two: YAML refuses the one, and reads the other as a line break
    /// where this reader would not.
    static func refuseControlCharacters(_ text: String) throws(Error) {
        var line = 1
        var afterCarriageReturn = false
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A:
                if !afterCarriageReturn { line += 1 }
                afterCarriageReturn = false
                continue
            case 0x0D:
                line += 1
                afterCarriageReturn = true
                continue
            case 0x09: break
            case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029:
                let code = String(scalar.value, radix: 16, uppercase: true)
                throw Error(
                    line: line,
                    reason:
                        "U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) is a control character or a line break YAML reads as such: not allowed in a config file (write it as an escape in a double-quoted value)"
                )
            default: break
            }
            afterCarriageReturn = false
        }
    }
}

private struct Parser {
    let bytes: [UInt8]
    var position = 0
    /// The line of `position` (from 1), and where that line starts.
    var line = 1
    var lineStart = 0
    var depth = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        // A byte order mark is not content.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { position = 3 }
        lineStart = position
    }

    typealias Node = YAML.Node

    func fail(_ reason: String, line: Int? = nil) -> YAML.Error {
        YAML.Error(line: line ?? self.line, reason: reason)
    }

    var current: UInt8? { position < bytes.count ? bytes[position] : nil }
    func peek(_ offset: Int) -> UInt8? { position + offset < bytes.count ? bytes[position + offset] : nil }
    var column: Int { position - lineStart }

    static func isBreak(_ byte: UInt8?) -> Bool { byte == nil || byte == 0x0A || byte == 0x0D }
    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }
    static func isBlank(_ byte: UInt8?) -> Bool { byte == 0x20 || byte == 0x09 }
    static func isSpaceOrEnd(_ byte: UInt8?) -> Bool { isBreak(byte) || isBlank(byte) }

    // MARK: Lines

    /// Skips blanks, and a comment, to the end of the line (not past it).
    mutating func skipToLineEnd() {
        while Self.isBlank(current) { position += 1 }
        if current == UInt8(ascii: "#") {
            while !Self.isBreak(current) { position += 1 }
        }
    }

    /// Whether only blanks and a comment remain on the line.
    mutating func atLineEnd() -> Bool {
        skipToLineEnd()
        return Self.isBreak(current)
    }

    /// Steps past the line break at `position`.
    mutating func breakLine() {
        if current == 0x0D { position += 1 }
        if current == 0x0A { position += 1 }
        line += 1
        lineStart = position
    }

    /// Moves to the first character of the next line with content (skipping blank and comment
    /// lines), and returns its column; nil at the end of the text. Must be at a line end.
    mutating func nextContentLine() throws(YAML.Error) -> Int? {
        while true {
            skipToLineEnd()
            guard current != nil else { return nil }
            breakLine()
            while current == 0x20 { position += 1 }
            if current == 0x09 {
                // A tab after the indentation is a separator only on a line with no content.
                let tab = position
                skipToLineEnd()
                if Self.isBreak(current) { continue }
                position = tab
                throw fail("a tab in the indentation: YAML indents with spaces only")
            }
            if Self.isBreak(current) || current == UInt8(ascii: "#") { continue }
            return column
        }
    }

    // MARK: Document

    mutating func document() throws(YAML.Error) -> Node? {
        // The first content line (the text may start with one), indented with spaces only.
        while current == 0x20 { position += 1 }
        if current == 0x09 {
            let tab = position
            skipToLineEnd()
            if !Self.isBreak(current) {
                position = tab
                throw fail("a tab in the indentation: YAML indents with spaces only")
            }
        }
        var column: Int? = column
        if Self.isBreak(current) || current == UInt8(ascii: "#") { column = try nextContentLine() }
        guard var start = column else { return nil }
        if current == UInt8(ascii: "%") { throw fail("directives (%) are not read: leave them out") }
        if startsMarker("---") {
            position += 3
            guard atLineEnd() else { throw fail("content after --- on its line: start it on the next line") }
            guard let next = try nextContentLine() else { return nil }
            start = next
        }
        if startsMarker("...") { return nil }
        let node = try blockNode(column: start)
        guard atLineEnd() else { throw fail("unexpected text after the value") }
        if let next = try nextContentLine() {
            if startsMarker("...") {
                position += 3
                if atLineEnd(), try nextContentLine() == nil { return node }
            }
            if startsMarker("---") { throw fail("a second document: a config file has one") }
            throw fail(
                next > start
                    ? "unexpected indentation" : "unexpected text: a line at this indentation continues nothing")
        }
        return node
    }

    /// Whether a document marker (`---`, `...`) starts a line here.
    func startsMarker(_ marker: String) -> Bool {
        column == 0 && bytes[position...].starts(with: marker.utf8)
            && Self.isSpaceOrEnd(peek(marker.utf8.count))
    }

    // MARK: Block nodes

    /// The node starting at `position`, the first content of its line or after a `- `, whose
    /// block (if it is one) is at `column`.
    mutating func blockNode(column: Int) throws(YAML.Error) -> Node {
        depth += 1
        defer { depth -= 1 }
        guard depth <= YAML.maxDepth else { throw fail("nested deeper than \(YAML.maxDepth) levels") }
        if current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) { return try blockSequence(column: column) }
        if current == UInt8(ascii: "?") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("complex keys (? ) are not read: write key: value")
        }
        let startLine = line
        if current == UInt8(ascii: "[") || current == UInt8(ascii: "{") {
            let node = try flowNode()
            try refuseKeyAfter("a flow list or map")
            return node
        }
        try refuseUnsupported()
        let scalar = try scalar(inFlow: false)
        skipBlanks()
        if current == UInt8(ascii: ":") && Self.isSpaceOrEnd(peek(1)) {
            return try blockMapping(column: column, firstKey: scalar, line: startLine)
        }
        return scalar
    }

    mutating func skipBlanks() {
        while Self.isBlank(current) { position += 1 }
    }

    /// A flow collection cannot be a key here.
    mutating func refuseKeyAfter(_ what: String) throws(YAML.Error) {
        skipBlanks()
        if current == UInt8(ascii: ":") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("\(what) cannot be a key")
        }
    }

    /// Throws for the indicators of what is not read.
    func refuseUnsupported() throws(YAML.Error) {
        if current == UInt8(ascii: "?") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("complex keys (? ) are not read: write key: value, or quote a value that starts with ?")
        }
        switch current {
        case UInt8(ascii: "&"), UInt8(ascii: "*"):
            throw fail("anchors and aliases (& and *) are not read: quote a value that starts with one")
        case UInt8(ascii: "!"): throw fail("tags (!) are not read: quote a value that starts with !")
        case UInt8(ascii: "|"), UInt8(ascii: ">"):
            throw fail("block scalars (| and >) are not read: write the value on one line, quoted if need be")
        case UInt8(ascii: "@"), UInt8(ascii: "`"): throw fail("a plain value cannot start with @ or `: quote it")
        case UInt8(ascii: "%"): throw fail("a plain value cannot start with %: quote it")
        case UInt8(ascii: "]"), UInt8(ascii: "}"): throw fail("a ] or } closes nothing here")
        default: return
        }
    }

    mutating func blockMapping(column: Int, firstKey: Node, line: Int) throws(YAML.Error) -> Node {
        var pairs: [YAML.Pair] = []
        var keyLines: [String: Int] = [:]
        var key = firstKey
        while true {
            // At the `:` after the key.
            position += 1
            guard let keyText = key.string else { throw fail("a key must be a scalar") }
            if let first = keyLines[keyText] {
                throw fail(
                    "the key \(keyText.debugDescription) is given twice (first on line \(first))", line: key.line)
            }
            keyLines[keyText] = key.line
            let value: Node
            if atLineEnd() {
                let saved = (position, self.line, lineStart)
                let next = try nextContentLine()
                if let next, next > column {
                    value = try blockNode(column: next)
                } else if next == column && current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) {
                    // A list may sit at its key's indentation.
                    value = try blockSequence(column: column)
                } else {
                    // No value: the next line is the next key's, or the map's end.
                    (position, self.line, lineStart) = saved
                    value = .scalar("", line: key.line, isNull: true)
                }
            } else {
                value = try inlineValue()
            }
            pairs.append(YAML.Pair(key: key, value: value))
            // The next key, at this mapping's column.
            guard atLineEnd() else { throw fail("unexpected text after the value") }
            let saved = (position, self.line, lineStart)
            guard let next = try nextContentLine(), next >= column, !startsMarker("---"), !startsMarker("...") else {
                (position, self.line, lineStart) = saved
                return .mapping(pairs, line: line)
            }
            guard next == column else {
                throw fail("unexpected indentation: a key of the map above is at column \(column + 1)")
            }
            if current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) {
                throw fail("a list item where a key of the map above was expected")
            }
            if current == UInt8(ascii: "[") || current == UInt8(ascii: "{") {
                throw fail("a flow list or map cannot be a key")
            }
            try refuseUnsupported()
            if current == UInt8(ascii: "?") && Self.isSpaceOrEnd(peek(1)) {
                throw fail("complex keys (? ) are not read: write key: value")
            }
            key = try scalar(inFlow: false)
            skipBlanks()
            guard current == UInt8(ascii: ":") && Self.isSpaceOrEnd(peek(1)) else {
                throw fail("expected key: value")
            }
        }
    }

    /// A value on its key's line: a flow collection or a scalar.
    mutating func inlineValue() throws(YAML.Error) -> Node {
        if current == UInt8(ascii: "[") || current == UInt8(ascii: "{") {
            depth += 1
            defer { depth -= 1 }
            guard depth <= YAML.maxDepth else { throw fail("nested deeper than \(YAML.maxDepth) levels") }
            let node = try flowNode()
            try refuseKeyAfter("a flow list or map")
            return node
        }
        if current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("a list cannot start on its key's line: put its items on the lines below")
        }
        try refuseUnsupported()
        let node = try scalar(inFlow: false)
        skipBlanks()
        if current == UInt8(ascii: ":") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("a map cannot start on its key's line: put it on the lines below, indented, or quote the value")
        }
        return node
    }

    mutating func blockSequence(column: Int) throws(YAML.Error) -> Node {
        let startLine = line
        var items: [Node] = []
        while true {
            // At the `-`.
            position += 1
            let itemLine = line
            if atLineEnd() {
                let saved = (position, line, lineStart)
                if let next = try nextContentLine(), next > column {
                    items.append(try blockNode(column: next))
                } else {
                    (position, line, lineStart) = saved
                    items.append(.scalar("", line: itemLine, isNull: true))
                }
            } else {
                items.append(try blockNode(column: self.column))
            }
            guard atLineEnd() else { throw fail("unexpected text after the value") }
            let saved = (position, line, lineStart)
            guard let next = try nextContentLine(), next >= column, !startsMarker("---"), !startsMarker("...") else {
                (position, line, lineStart) = saved
                return .sequence(items, line: startLine)
            }
            if next == column && current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) { continue }
            if next == column {
                // A key of the map this list is the value of, at the same indentation.
                (position, line, lineStart) = saved
                return .sequence(items, line: startLine)
            }
            throw fail("unexpected indentation: the list's items are at column \(column + 1)")
        }
    }

    // MARK: Flow nodes

    /// Skips blanks, comments and line breaks inside a flow collection.
    mutating func skipFlowSpace(opened: Int) throws(YAML.Error) {
        while true {
            skipToLineEnd()
            guard current != nil else { throw fail("a [ or { opened on this line is not closed", line: opened) }
            guard Self.isBreak(current) else { return }
            breakLine()
        }
    }

    mutating func flowNode() throws(YAML.Error) -> Node {
        let opened = line
        let isList = current == UInt8(ascii: "[")
        let close = isList ? UInt8(ascii: "]") : UInt8(ascii: "}")
        position += 1
        var items: [Node] = []
        var pairs: [YAML.Pair] = []
        var keyLines: [String: Int] = [:]
        while true {
            try skipFlowSpace(opened: opened)
            if current == close {
                position += 1
                return isList ? .sequence(items, line: opened) : .mapping(pairs, line: opened)
            }
            let entry = try flowEntry(opened: opened)
            try skipFlowSpace(opened: opened)
            if isList {
                if current == UInt8(ascii: ":") {
                    throw fail("key: value inside a [ ] list: use { } for a map")
                }
                items.append(entry)
            } else {
                guard let keyText = entry.string else { throw fail("a key must be a scalar") }
                guard current == UInt8(ascii: ":") else { throw fail("expected key: value inside { }") }
                position += 1
                try skipFlowSpace(opened: opened)
                let value: Node =
                    current == UInt8(ascii: ",") || current == close
                    ? .scalar("", line: line, isNull: true) : try flowEntry(opened: opened)
                if let first = keyLines[keyText] {
                    throw fail(
                        "the key \(keyText.debugDescription) is given twice (first on line \(first))", line: entry.line)
                }
                keyLines[keyText] = entry.line
                pairs.append(YAML.Pair(key: entry, value: value))
                try skipFlowSpace(opened: opened)
            }
            if current == UInt8(ascii: ",") {
                position += 1
            } else if current != close {
                throw fail(
                    "expected , or \(Character(Unicode.Scalar(close))) in the list or map opened on line \(opened)")
            }
        }
    }

    mutating func flowEntry(opened: Int) throws(YAML.Error) -> Node {
        if current == UInt8(ascii: "[") || current == UInt8(ascii: "{") {
            depth += 1
            defer { depth -= 1 }
            guard depth <= YAML.maxDepth else { throw fail("nested deeper than \(YAML.maxDepth) levels") }
            return try flowNode()
        }
        if current == UInt8(ascii: "-") && Self.isSpaceOrEnd(peek(1)) {
            throw fail("a block list item (- ) inside [ ] or { }")
        }
        if current == UInt8(ascii: ",") {
            throw fail("an empty entry (,,) in the list or map opened on line \(opened)")
        }
        try refuseUnsupported()
        return try scalar(inFlow: true)
    }

    // MARK: Scalars

    mutating func scalar(inFlow: Bool) throws(YAML.Error) -> Node {
        let startLine = line
        switch current {
        case UInt8(ascii: "'"): return .scalar(try singleQuoted(), line: startLine, isNull: false)
        case UInt8(ascii: "\""): return .scalar(try doubleQuoted(), line: startLine, isNull: false)
        default:
            let text = try plain(inFlow: inFlow)
            let isNull = ["", "~", "null", "Null", "NULL"].contains(text)
            return .scalar(text, line: startLine, isNull: isNull)
        }
    }

    /// A plain scalar: to a `: ` or ` #`, the line's end, or in a flow collection a `,` or
    /// bracket. Its trailing blanks are not part of it.
    mutating func plain(inFlow: Bool) throws(YAML.Error) -> String {
        let start = position
        var end = position
        while let byte = current, !Self.isBreak(byte) {
            if byte == UInt8(ascii: ":") && (Self.isSpaceOrEnd(peek(1)) || inFlow && Self.isFlowIndicator(peek(1))) {
                break
            }
            if byte == UInt8(ascii: "#") && position > start && Self.isBlank(bytes[position - 1]) { break }
            if inFlow && Self.isFlowIndicator(byte) { break }
            position += 1
            if !Self.isBlank(byte) { end = position }
        }
        position = end
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    static func isFlowIndicator(_ byte: UInt8?) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
            || byte == UInt8(ascii: "{") || byte == UInt8(ascii: "}")
    }

    mutating func singleQuoted() throws(YAML.Error) -> String {
        position += 1
        var text: [UInt8] = []
        while true {
            guard let byte = current, !Self.isBreak(byte) else {
                throw fail("a quoted value must end on its line (a ' is missing)")
            }
            position += 1
            if byte == UInt8(ascii: "'") {
                guard current == UInt8(ascii: "'") else { break }
                position += 1
            }
            text.append(byte)
        }
        return String(decoding: text, as: UTF8.self)
    }

    mutating func doubleQuoted() throws(YAML.Error) -> String {
        position += 1
        var text: [UInt8] = []
        while true {
            guard let byte = current, !Self.isBreak(byte) else {
                throw fail("a quoted value must end on its line (a \" is missing)")
            }
            position += 1
            if byte == UInt8(ascii: "\"") { break }
            guard byte == UInt8(ascii: "\\") else {
                text.append(byte)
                continue
            }
            guard let escape = current, !Self.isBreak(escape) else {
                throw fail("a \\ at the end of a quoted value's line: write the value on one line")
            }
            position += 1
            let simple: [UInt8: UInt8] = [
                UInt8(ascii: "0"): 0, UInt8(ascii: "a"): 7, UInt8(ascii: "b"): 8, UInt8(ascii: "t"): 9, 0x09: 9,
                UInt8(ascii: "n"): 10, UInt8(ascii: "v"): 11, UInt8(ascii: "f"): 12, UInt8(ascii: "r"): 13,
                UInt8(ascii: "e"): 27, 0x20: 0x20, UInt8(ascii: "\""): 0x22, UInt8(ascii: "/"): 0x2F,
                UInt8(ascii: "\\"): 0x5C,
            ]
            if let value = simple[escape] {
                text.append(value)
                continue
            }
            let digits: Int
            switch escape {
            case UInt8(ascii: "x"): digits = 2
            case UInt8(ascii: "u"): digits = 4
            case UInt8(ascii: "U"): digits = 8
            case UInt8(ascii: "N"), UInt8(ascii: "_"), UInt8(ascii: "L"), UInt8(ascii: "P"):
                let named: [UInt8: String] = [
                    UInt8(ascii: "N"): "\u{85}", UInt8(ascii: "_"): "\u{A0}", UInt8(ascii: "L"): "\u{2028}",
                    UInt8(ascii: "P"): "\u{2029}",
                ]
                text += Array(named[escape]!.utf8)
                continue
            default:
                throw fail(
                    escape < 0x80
                        ? "\\\(Character(Unicode.Scalar(escape))) is not an escape YAML knows"
                        : "a \\ before a non-ASCII character is not an escape YAML knows")
            }
            guard digits > 0 else { continue }
            guard position + digits <= bytes.count,
                bytes[position..<position + digits].allSatisfy({ Self.isHexDigit($0) }),
                let code = UInt32(String(decoding: bytes[position..<position + digits], as: UTF8.self), radix: 16),
                let scalar = Unicode.Scalar(code)
            else {
                throw fail("\\\(Character(Unicode.Scalar(escape))) takes \(digits) hexadecimal digits of a character")
            }
            position += digits
            text += Array(String(Character(scalar)).utf8)
        }
        return String(decoding: text, as: UTF8.self)
    }
}

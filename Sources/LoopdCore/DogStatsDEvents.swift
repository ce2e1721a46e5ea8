// DogStatsD's two datagrams that are not metrics: events (`_e{…}`) and service checks (`_sc|…`).

/// A DogStatsD event, as a client sent it:
/// `_e{<title bytes>,<text bytes>}:<title>|<text>[|d:<unix seconds>][|h:<host>][|k:<aggregation key>]`
/// `[|p:<priority>][|s:<source type>][|t:<alert type>][|#<tags>]`; other fields (`c:`, `card:`)
/// are accepted and ignored. `\n` in the title and text (a client's escaped line feed) is read
/// as a line feed.
public struct DogStatsDEvent: Sendable, Equatable {
    /// The title.
    public var title: String
    /// The text.
    public var text: String
    /// `d:`: when it happened, in seconds since 1970, as sent.
    public var timestamp: Int64?
    /// `h:`: the host it is about.
    public var hostname: String?
    /// `k:`: the key events are grouped by.
    public var aggregationKey: String?
    /// `p:`: `normal` or `low`, as sent.
    public var priority: String?
    /// `s:`: the source type.
    public var sourceType: String?
    /// `t:`: `error`, `warning`, `info` or `success`, as sent.
    public var alertType: String?
    /// `#`: the tags, as sent, in order.
    public var tags: [String] = []

    /// An event with a title and a text.
    public init(title: String, text: String) {
        self.title = title
        self.text = text
    }

    /// Whether a line is an event: it starts with `_e{`.
    public static func isEvent(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= 3 && line[0] == UInt8(ascii: "_") && line[1] == UInt8(ascii: "e") && line[2] == UInt8(ascii: "{")
    }

    /// Parses an event line (one for which `isEvent` is true); nil if it is malformed: lengths
    /// that are not numbers or do not match the title and text, or a title or text cut short.
    /// A `d:` that is not an integer is ignored, as DogStatsD's agent ignores it.
    public static func parse(_ line: UnsafeRawBufferPointer) -> DogStatsDEvent? {
        let bytes = Array(line)
        guard isEvent(line), let close = bytes.firstIndex(of: UInt8(ascii: "}")),
            let comma = bytes[3..<close].firstIndex(of: UInt8(ascii: ",")),
            let titleLength = Int(decimal: bytes[3..<comma]), let textLength = Int(decimal: bytes[(comma + 1)..<close]),
            close + 1 < bytes.count, bytes[close + 1] == UInt8(ascii: ":")
        else { return nil }
        let titleStart = close + 2
        let (titleEnd, overflowA) = titleStart.addingReportingOverflow(titleLength)
        let (textEnd, overflowB) = (titleEnd + 1).addingReportingOverflow(textLength)
        guard !overflowA, !overflowB, titleLength > 0, textEnd <= bytes.count,
            bytes[titleEnd] == UInt8(ascii: "|"), textEnd == bytes.count || bytes[textEnd] == UInt8(ascii: "|")
        else { return nil }
        var event = DogStatsDEvent(
            title: unescaped(bytes[titleStart..<titleEnd]), text: unescaped(bytes[(titleEnd + 1)..<textEnd]))
        for field in fields(bytes[textEnd...]) {
            let value = String(decoding: field.dropFirst(2), as: UTF8.self)
            switch (field.first, field.dropFirst().first) {
            case (UInt8(ascii: "d"), UInt8(ascii: ":")): event.timestamp = Int64(value)  // Not a number: none.
            case (UInt8(ascii: "h"), UInt8(ascii: ":")): event.hostname = value
            case (UInt8(ascii: "k"), UInt8(ascii: ":")): event.aggregationKey = value
            case (UInt8(ascii: "p"), UInt8(ascii: ":")): event.priority = value
            case (UInt8(ascii: "s"), UInt8(ascii: ":")): event.sourceType = value
            case (UInt8(ascii: "t"), UInt8(ascii: ":")): event.alertType = value
            case (UInt8(ascii: "#"), _): event.tags += tagList(field.dropFirst())
            default: break
            }
        }
        return event
    }
}

/// A DogStatsD service check, as a client sent it:
/// `_sc|<name>|<status>[|d:<unix seconds>][|h:<host>][|#<tags>][|m:<message>]`, status 0 (OK),
/// 1 (warning), 2 (critical) or 3 (unknown); other fields (`c:`, `card:`) are accepted and
/// ignored. In the message, `\n` is a line feed and `m\:` is `m:`.
public struct DogStatsDServiceCheck: Sendable, Equatable {
    /// The check's name.
    public var name: String
    /// 0 OK, 1 warning, 2 critical, 3 unknown.
    public var status: Int
    /// `d:`: when it ran, in seconds since 1970, as sent.
    public var timestamp: Int64?
    /// `h:`: the host it is about.
    public var hostname: String?
    /// `#`: the tags, as sent, in order.
    public var tags: [String] = []
    /// `m:`: the message.
    public var message: String?

    /// A service check with a name and a status.
    public init(name: String, status: Int) {
        self.name = name
        self.status = status
    }

    /// Whether a line is a service check: it starts with `_sc|`.
    public static func isServiceCheck(_ line: UnsafeRawBufferPointer) -> Bool {
        line.count >= 4 && line[0] == UInt8(ascii: "_") && line[1] == UInt8(ascii: "s")
            && line[2] == UInt8(ascii: "c") && line[3] == UInt8(ascii: "|")
    }

    /// Parses a service check line (one for which `isServiceCheck` is true); nil if it is
    /// malformed: no name, or a status other than 0 to 3. A `d:` that is not an integer is
    /// ignored, as DogStatsD's agent ignores it.
    public static func parse(_ line: UnsafeRawBufferPointer) -> DogStatsDServiceCheck? {
        let bytes = Array(line)
        guard isServiceCheck(line) else { return nil }
        let fields = fields(bytes[3...])
        guard fields.count >= 2, !fields[0].isEmpty, fields[1].count == 1,
            (UInt8(ascii: "0")...UInt8(ascii: "3")).contains(fields[1][fields[1].startIndex])
        else { return nil }
        var check = DogStatsDServiceCheck(
            name: String(decoding: fields[0], as: UTF8.self), status: Int(fields[1][fields[1].startIndex] - 48))
        for field in fields.dropFirst(2) {
            let value = String(decoding: field.dropFirst(2), as: UTF8.self)
            switch (field.first, field.dropFirst().first) {
            case (UInt8(ascii: "d"), UInt8(ascii: ":")): check.timestamp = Int64(value)  // Not a number: none.
            case (UInt8(ascii: "h"), UInt8(ascii: ":")): check.hostname = value
            case (UInt8(ascii: "m"), UInt8(ascii: ":")):
                check.message = unescaped(field.dropFirst(2)).replacing("m\\:", with: "m:")
            case (UInt8(ascii: "#"), _): check.tags += tagList(field.dropFirst())
            default: break
            }
        }
        return check
    }
}

/// The `|`-separated fields after `bytes`' first `|` (`bytes` starts at a `|` or is empty).
private func fields(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
    guard bytes.first == UInt8(ascii: "|") else { return [] }
    return bytes.dropFirst().split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
}

/// A `#` field's tags, empty ones left out.
private func tagList(_ field: ArraySlice<UInt8>) -> [String] {
    field.split(separator: UInt8(ascii: ",")).map { String(decoding: $0, as: UTF8.self) }
}

/// Text with a client's escaped line feeds (`\n`, two bytes) read as line feeds.
private func unescaped(_ bytes: ArraySlice<UInt8>) -> String {
    String(decoding: bytes, as: UTF8.self).replacing("\\n", with: "\n")
}

extension Int {
    /// A non-negative decimal integer of at most 9 digits, or nil.
    fileprivate init?(decimal bytes: ArraySlice<UInt8>) {
        guard !bytes.isEmpty, bytes.count <= 9, bytes.allSatisfy({ $0 &- 48 < 10 }) else { return nil }
        self = bytes.reduce(0) { $0 * 10 + Int($1 - 48) }
    }
}

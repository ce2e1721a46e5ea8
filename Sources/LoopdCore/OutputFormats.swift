// The three output formats of a flush, written as bytes: JSON lines, Graphite plaintext and
// Prometheus' text exposition format.

/// The JSON-lines output: one object per flush, on one line.
///
/// `{"timestamp":…,"interval":10,"counters":[…],"gauges":[…],"timers":[…],"sets":[…]}`, where
/// each series is `{"name":"…","tags":["k:v",…],…}`: counters and gauges carry `value`, sets
/// `count`, and timers (with histograms and distributions, told apart by `type`) carry `count`
/// (scaled by sample rates), `samples`, `sum`, `min`, `max`, `mean`, `p50`, `p90`, `p95` and
/// `p99`. Counters and gauges appear in every flush until they expire (a counter without data
/// shows 0); timers and sets only in a flush whose interval had data for them. loopd's own
/// metrics are among the counters and gauges, named `loopd.*`.
public enum JSONLinesFormat {
    /// The flush as one JSON object and a newline.
    public static func format(_ flush: Flush, _ summaries: [Summary]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(64 + summaries.count * 64)
        out.append(string: "{\"timestamp\":")
        out.append(number: (flush.timestamp * 1000).rounded() / 1000)
        out.append(string: ",\"interval\":")
        out.append(number: flush.intervalSeconds)
        func open(_ key: String) {
            out.append(string: ",\"\(key)\":[")
        }
        func series(_ summary: Summary, _ first: inout Bool) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(string: "{\"name\":")
            out.append(jsonString: flush.name(summary.series))
            out.append(string: ",\"tags\":[")
            for (position, tag) in flush.tags(summary.series).enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(jsonString: tag)
            }
            out.append(UInt8(ascii: "]"))
        }
        func internalMetric(_ metric: InternalMetric, _ first: inout Bool) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(string: "{\"name\":")
            out.append(jsonString: ArraySlice(metric.name.utf8))
            out.append(string: ",\"tags\":[],\"value\":")
            out.append(number: metric.value)
            out.append(UInt8(ascii: "}"))
        }
        for kind in [MetricKind.counter, .gauge] {
            open(kind == .counter ? "counters" : "gauges")
            var first = true
            for summary in summaries where summary.kind == kind {
                series(summary, &first)
                out.append(string: ",\"value\":")
                out.append(number: summary.value)
                out.append(UInt8(ascii: "}"))
            }
            for metric in flush.internalMetrics where metric.kind == kind { internalMetric(metric, &first) }
            out.append(UInt8(ascii: "]"))
        }
        open("timers")
        var first = true
        for summary in summaries where summary.kind.isSampled {
            guard let stats = summary.stats else { continue }
            series(summary, &first)
            out.append(string: ",\"type\":\"\(summary.kind.typeField)\",\"count\":")
            out.append(number: summary.value)
            out.append(string: ",\"samples\":")
            out.append(number: Double(stats.samples))
            for (name, value) in [
                ("sum", stats.sum), ("min", stats.min), ("max", stats.max), ("mean", stats.mean), ("p50", stats.p50),
                ("p90", stats.p90), ("p95", stats.p95), ("p99", stats.p99),
            ] {
                out.append(string: ",\"\(name)\":")
                out.append(number: value)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        open("sets")
        first = true
        for summary in summaries where summary.kind == .set && summary.hasData {
            series(summary, &first)
            out.append(string: ",\"count\":")
            out.append(number: summary.value)
            out.append(UInt8(ascii: "}"))
        }
        out.append(string: "]}\n")
        return out
    }
}

/// The Graphite plaintext output: `path value timestamp` lines.
///
/// A series' path is its name, then its tags in Graphite's form (`;key=value`; a tag without a
/// value becomes `;key=true`), with spaces and `;` in names and tags replaced by `_`. Counters,
/// gauges and sets send their value (a counter: the interval's count); timers, histograms and
/// distributions send `name.count`, `.sum`, `.min`, `.max`, `.mean`, `.p50`, `.p90`, `.p95` and
/// `.p99` when their interval had samples. loopd's own metrics are sent as `loopd.*`.
public enum GraphiteFormat {
    /// The flush as plaintext lines.
    public static func format(_ flush: Flush, _ summaries: [Summary]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(summaries.count * 48)
        var timestamp = [UInt8]()
        timestamp.append(number: flush.timestamp.rounded(.down))
        func line(_ name: ArraySlice<UInt8>, _ suffix: String, _ tags: [ArraySlice<UInt8>], _ value: Double) {
            out.append(graphite: name)
            out.append(string: suffix)
            for tag in tags {
                out.append(UInt8(ascii: ";"))
                if let colon = tag.firstIndex(of: UInt8(ascii: ":")) {
                    out.append(graphite: tag[..<colon])
                    out.append(UInt8(ascii: "="))
                    out.append(graphite: tag[(colon + 1)...])
                } else {
                    out.append(graphite: tag)
                    out.append(string: "=true")
                }
            }
            out.append(UInt8(ascii: " "))
            out.append(number: value)
            out.append(UInt8(ascii: " "))
            out.append(contentsOf: timestamp)
            out.append(UInt8(ascii: "\n"))
        }
        for summary in summaries {
            let name = flush.name(summary.series)
            let tags = flush.tags(summary.series)
            switch summary.kind {
            case .counter, .gauge: line(name, "", tags, summary.value)
            case .set: if summary.hasData { line(name, "", tags, summary.value) }
            case .timer, .histogram, .distribution:
                guard let stats = summary.stats else { continue }
                for (suffix, value) in [
                    (".count", summary.value), (".sum", stats.sum), (".min", stats.min), (".max", stats.max),
                    (".mean", stats.mean), (".p50", stats.p50), (".p90", stats.p90), (".p95", stats.p95),
                    (".p99", stats.p99),
                ] {
                    line(name, suffix, tags, value)
                }
            }
        }
        for metric in flush.internalMetrics { line(ArraySlice(metric.name.utf8), "", [], metric.value) }
        return out
    }
}

/// The Prometheus text exposition format (version 0.0.4), served at `GET /metrics`.
///
/// Names have every byte outside `[a-zA-Z0-9_:]` replaced by `_` (and a leading digit
/// prefixed with `_`); tags become labels (`key:value` → `key="value"`, a tag without a value →
/// `key="true"`), their names renamed to ones Prometheus accepts and does not reserve (see
/// `labelName(_:kind:)`). Counters are cumulative (`counter`, the count since the series was
/// created, of positive increments only: a Prometheus counter never decreases, so negative values
/// are left out and counted in `Ingest.Counts.negativeCounterValues`);
/// gauges and sets are `gauge`s (a set: the distinct members of the last interval); timers,
/// histograms and distributions are `summary`s: the last interval's quantiles (none after an
/// interval without samples), with `_sum` and `_count` since creation. A name that a series of another kind has
/// already taken (a summary's `_sum` and `_count` included) is skipped, as Prometheus allows one
/// type per name, and so is a series whose name and labels repeat an earlier one's: whatever
/// the tags, the exposition is one Prometheus can scrape. `exposition(_:_:)` says how many series
/// were left out.
public enum PrometheusFormat {
    /// The flush as an exposition.
    public static func format(_ flush: Flush, _ summaries: [Summary]) -> [UInt8] {
        exposition(flush, summaries).bytes
    }

    /// The flush as an exposition, and the number of series left out of it: those whose name a
    /// series of another type holds, and those whose name and labels repeat a series shown.
    public static func exposition(_ flush: Flush, _ summaries: [Summary]) -> (bytes: [UInt8], leftOut: Int) {
        struct Entry {
            var name: [UInt8]
            var labels: [UInt8]
            var summary: Summary?
            var metric: InternalMetric?
            var kind: MetricKind
        }
        var entries = [Entry]()
        entries.reserveCapacity(summaries.count + flush.internalMetrics.count)
        for summary in summaries {
            entries.append(
                Entry(
                    name: sanitizedName(flush.name(summary.series)),
                    labels: labels(flush.tags(summary.series), kind: summary.kind).labels, summary: summary,
                    metric: nil, kind: summary.kind))
        }
        for metric in flush.internalMetrics {
            entries.append(
                Entry(
                    name: sanitizedName(ArraySlice(metric.name.utf8)), labels: [], summary: nil, metric: metric,
                    kind: metric.kind))
        }
        // One family per name: the first series of a name decides its type, and a summary's
        // `_sum` and `_count` are its names too. A series with the name and labels of one already
        // kept (names and labels can meet once sanitized) would repeat it: it is left out.
        var owners = [[UInt8]: [UInt8]]()  // A sample's name → the family's name.
        var families = [[UInt8]: MetricKind]()
        var kept = Set<[UInt8]>()
        let offered = entries.count
        entries = entries.filter { entry in
            let family = Self.family(entry.kind)
            if let owner = families[entry.name] {
                guard owner == family else { return false }
            } else {
                let names =
                    family == .timer
                    ? [entry.name, entry.name + "_sum".utf8, entry.name + "_count".utf8] : [entry.name]
                guard names.allSatisfy({ owners[$0] == nil }) else { return false }
                families[entry.name] = family
                for name in names { owners[name] = entry.name }
            }
            return kept.insert(entry.name + [UInt8(ascii: "{")] + entry.labels).inserted
        }
        let leftOut = offered - entries.count
        // Group each name's series together, in first-seen order of names.
        var order = [[UInt8]: Int]()
        for entry in entries where order[entry.name] == nil { order[entry.name] = order.count }
        entries = entries.enumerated().sorted {
            let (a, b) = (order[$0.element.name]!, order[$1.element.name]!)
            return a != b ? a < b : $0.offset < $1.offset
        }.map(\.element)

        var out = [UInt8]()
        out.reserveCapacity(entries.count * 64)
        var currentName: [UInt8]? = nil
        for entry in entries {
            let family = Self.family(entry.kind)
            if currentName != entry.name {
                currentName = entry.name
                out.append(string: "# TYPE ")
                out.append(contentsOf: entry.name)
                out.append(string: family == .counter ? " counter\n" : family == .gauge ? " gauge\n" : " summary\n")
            }
            func sample(_ suffix: String, _ extra: String?, _ value: Double) {
                out.append(contentsOf: entry.name)
                out.append(string: suffix)
                if !entry.labels.isEmpty || extra != nil {
                    out.append(UInt8(ascii: "{"))
                    out.append(contentsOf: entry.labels)
                    if let extra {
                        if !entry.labels.isEmpty { out.append(UInt8(ascii: ",")) }
                        out.append(string: extra)
                    }
                    out.append(UInt8(ascii: "}"))
                }
                out.append(UInt8(ascii: " "))
                out.append(prometheusNumber: value)
                out.append(UInt8(ascii: "\n"))
            }
            if let metric = entry.metric {
                sample("", nil, metric.kind == .counter ? metric.total : metric.value)
                continue
            }
            let summary = entry.summary!
            switch family {
            case .counter: sample("", nil, summary.total)
            case .gauge: sample("", nil, summary.value)
            default:
                // An interval without samples has no quantiles: they are left out (a summary
                // may have none), never shown as NaN.
                if let stats = summary.stats {
                    for (quantile, value) in [
                        ("0.5", stats.p50), ("0.9", stats.p90), ("0.95", stats.p95), ("0.99", stats.p99),
                    ] {
                        sample("", "quantile=\"\(quantile)\"", value)
                    }
                }
                sample("_sum", nil, summary.totalSum)
                sample("_count", nil, summary.total)
            }
        }
        return (out, leftOut)
    }

    static func sanitizedName(_ name: ArraySlice<UInt8>) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(name.count + 1)
        if let first = name.first, first &- 48 < 10 { out.append(UInt8(ascii: "_")) }
        for byte in name { out.append(isNameByte(byte) ? byte : UInt8(ascii: "_")) }
        return out.isEmpty ? Array("_".utf8) : out
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: ":"):
            true
        default: false
        }
    }

    /// The Prometheus type a kind is shown as: `.counter`, `.gauge`, or `.timer` for a summary.
    static func family(_ kind: MetricKind) -> MetricKind {
        kind.isSampled ? .timer : kind == .set ? .gauge : kind
    }

    /// The labels of a series of `kind` with `tags`, and how many of its tags they rename or
    /// leave out (see `labelName(_:kind:)`; of tags whose names meet once renamed, the first in
    /// sorted order is kept). Values are escaped: `\\`, `\"` and `\n`.
    static func labels(_ tags: [ArraySlice<UInt8>], kind: MetricKind) -> (labels: [UInt8], changed: Int) {
        var out = [UInt8]()
        var seen = Set<[UInt8]>()
        var changed = 0
        for tag in tags {
            let colon = tag.firstIndex(of: UInt8(ascii: ":"))
            let sent = tag[..<(colon ?? tag.endIndex)]
            let name = labelName(sent, kind: kind)
            guard seen.insert(name).inserted else {  // A label appears once.
                changed += 1
                continue
            }
            if !name.elementsEqual(sent) { changed += 1 }
            if !out.isEmpty { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: name)
            out.append(string: "=\"")
            let value = colon.map { tag[($0 + 1)...] } ?? ArraySlice("true".utf8)
            for byte in value {
                switch byte {
                case UInt8(ascii: "\\"): out.append(string: "\\\\")
                case UInt8(ascii: "\""): out.append(string: "\\\"")
                case UInt8(ascii: "\n"): out.append(string: "\\n")
                default: out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        return (out, changed)
    }

    /// How many tags of the series whose canonical key is `key` Prometheus' labels rename or
    /// leave out.
    static func changedLabels(key: ArraySlice<UInt8>) -> Int {
        guard let kind = key.first.flatMap(MetricKind.init(rawValue:)) else { return 0 }
        let tags = Flush.tags(ofKey: key)
        return tags.isEmpty ? 0 : labels(tags, kind: kind).changed
    }

    /// A tag's name as a label name, which Prometheus wants to match `[a-zA-Z_][a-zA-Z0-9_]*`
    /// and not to start with `__` (its own labels, such as `__name__`, do):
    /// - a byte outside `[a-zA-Z0-9_]` becomes `_` (a UTF-8 character, one `_` per byte);
    /// - a leading digit gets a `_` before it, and an empty name is `_`;
    /// - leading underscores become one: `__name__` is `_name__`;
    /// - on a summary, `quantile` (the label of its quantiles) is `_quantile`.
    static func labelName(_ sent: ArraySlice<UInt8>, kind: MetricKind) -> [UInt8] {
        var name = [UInt8]()
        name.reserveCapacity(sent.count + 1)
        if let first = sent.first, first &- 48 < 10 { name.append(UInt8(ascii: "_")) }
        for byte in sent { name.append(isNameByte(byte) && byte != UInt8(ascii: ":") ? byte : UInt8(ascii: "_")) }
        let underscores = name.prefix { $0 == UInt8(ascii: "_") }.count
        if underscores > 1 { name.removeFirst(underscores - 1) }
        if name.isEmpty { name = [UInt8(ascii: "_")] }
        if kind.isSampled && name.elementsEqual("quantile".utf8) { name.insert(UInt8(ascii: "_"), at: 0) }
        return name
    }
}

extension [UInt8] {
    mutating func append(string: String) { append(contentsOf: string.utf8) }

    /// A number as JSON, Graphite and Prometheus read it: an integer without a fraction when it
    /// is one, else Swift's shortest round-trip form; `null` if not finite.
    mutating func append(number value: Double) {
        guard value.isFinite else { return append(string: "null") }
        if value == value.rounded(), abs(value) < 1e15 {
            var integer = Int64(value)
            if integer < 0 || (integer == 0 && value.sign == .minus) {
                append(UInt8(ascii: "-"))
                integer = -integer
            }
            let first = count
            repeat {
                append(UInt8(48 + integer % 10))
                integer /= 10
            } while integer > 0
            self[first...].reverse()
            return
        }
        append(string: value.description)
    }

    mutating func append(prometheusNumber value: Double) {
        if value.isNaN { return append(string: "NaN") }
        if value.isInfinite { return append(string: value < 0 ? "-Inf" : "+Inf") }
        append(number: value)
    }

    mutating func append(jsonString bytes: ArraySlice<UInt8>) {
        append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): append(string: "\\\"")
            case UInt8(ascii: "\\"): append(string: "\\\\")
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                append(string: "\\u00")
                append(hex[Int(byte >> 4)])
                append(hex[Int(byte & 15)])
            default: append(byte)
            }
        }
        append(UInt8(ascii: "\""))
    }

    mutating func append(graphite bytes: ArraySlice<UInt8>) {
        for byte in bytes {
            append(byte == UInt8(ascii: " ") || byte == UInt8(ascii: ";") || byte < 0x20 ? UInt8(ascii: "_") : byte)
        }
    }
}

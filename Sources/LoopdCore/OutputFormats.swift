// Two of the output formats of a flush, written as bytes: JSON lines and Graphite plaintext
// (Prometheus' text format is in PrometheusFormat.swift), and the byte writers all three share.

/// The JSON-lines output: one object per flush, on one line.
///
/// `{"timestamp":…,"interval":10,"counters":[…],"gauges":[…],"timers":[…],"sets":[…]}`, where
/// each series is `{"name":"…","tags":["k:v",…],…}`: counters carry `value` and `rate` (per
/// second of the interval), gauges `value`, sets `count`, and timers (with histograms and
/// distributions, told apart by `type`) carry `count` (scaled by sample rates), `samples`,
/// `sum`, `min`, `max`, `mean`, `stddev`, `sum_squares`, `count_ps` (the count per second),
/// a field per percentile (`p50`, `p99_9`), and `approximate: true` when the percentiles come
/// from a quantile sketch. A number that would not be finite (`sum_squares` of samples beyond
/// ±1.3e154, a rate over a tiny interval) is left out. Counters and gauges appear in every flush until they expire (a counter without data
/// shows 0); timers and sets only in a flush whose interval had data for them. loopd's own
/// metrics are among the counters and gauges, named `loopd.*`. Then the interval's DogStatsD
/// `events` (`title`, `text`, `tags`, and `timestamp`, `hostname`, `aggregation_key`,
/// `priority`, `source_type` and `alert_type` when sent) and `service_checks` (`name`,
/// `status`, `tags`, and `timestamp`, `hostname` and `message` when sent), in arrival order.
public enum JSONLinesFormat {
    /// The flush as one JSON object and a newline.
    public static func format(_ flush: Flush, _ summaries: [Summary]) -> [UInt8] { write(flush, summaries).bytes }

    /// `format(_:_:)`, as it was written: the line is not copied into an array (with 100,000
    /// series, about 6 MiB).
    public static func write(_ flush: Flush, _ summaries: [Summary]) -> WrittenBytes {
        let out = OutputBytes(capacity: 64 + summaries.count * 80)
        out.append(ascii: "{\"timestamp\":")
        out.append(number: (flush.timestamp * 1000).rounded() / 1000)
        out.append(ascii: ",\"interval\":")
        out.append(number: flush.intervalSeconds)
        func open(_ key: String) {
            out.append(string: ",\"\(key)\":[")
        }
        func series(_ series: Int, _ first: inout Bool) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(ascii: "{\"name\":")
            flush.withNameAndTags(series) { name, tags in
                out.append(jsonString: name)
                out.append(ascii: ",\"tags\":[")
                // Each tag between commas as a string of its own (an empty one is not a tag).
                var written = false
                func tag(_ range: Range<Int>) {
                    guard !range.isEmpty else { return }
                    if written { out.append(UInt8(ascii: ",")) }
                    out.append(jsonString: UnsafeRawBufferPointer(rebasing: tags[range]))
                    written = true
                }
                var start = 0
                for end in tags.indices where tags[end] == UInt8(ascii: ",") {
                    tag(start..<end)
                    start = end + 1
                }
                tag(start..<tags.count)
            }
            out.append(UInt8(ascii: "]"))
        }
        func tagArray(_ tags: [String]) {
            out.append(ascii: ",\"tags\":[")
            for (position, tag) in tags.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(jsonString: ArraySlice(tag.utf8))
            }
            out.append(UInt8(ascii: "]"))
        }
        func internalMetric(_ metric: InternalMetric, _ first: inout Bool) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(ascii: "{\"name\":")
            out.append(jsonString: ArraySlice(metric.name.utf8))
            out.append(ascii: ",\"tags\":[],\"value\":")
            out.append(number: metric.value)
            if metric.kind == .counter, (metric.value / flush.intervalSeconds).isFinite {
                out.append(ascii: ",\"rate\":")
                out.append(number: metric.value / flush.intervalSeconds)
            }
            out.append(UInt8(ascii: "}"))
        }
        // The loops read the summaries in place: iterating them would copy each (and retain
        // its arrays) once per loop. One pass writes the counters and finds the other kinds'
        // summaries, which come after them.
        var gauges: [Int] = []
        var sampled: [Int] = []
        var sets: [Int] = []
        func valueSeries(_ index: Int, _ first: inout Bool) {
            series(summaries[index].series, &first)
            let value = summaries[index].value
            out.append(ascii: ",\"value\":")
            out.append(number: value)
            if summaries[index].kind == .counter, (value / flush.intervalSeconds).isFinite {
                out.append(ascii: ",\"rate\":")
                out.append(number: value / flush.intervalSeconds)
            }
            out.append(UInt8(ascii: "}"))
        }
        open("counters")
        var first = true
        for index in summaries.indices {
            switch summaries[index].kind {
            case .counter: valueSeries(index, &first)
            case .gauge: gauges.append(index)
            case .timer, .histogram, .distribution: sampled.append(index)
            case .set: if summaries[index].hasData { sets.append(index) }
            }
        }
        for metric in flush.internalMetrics where metric.kind == .counter { internalMetric(metric, &first) }
        out.append(UInt8(ascii: "]"))
        open("gauges")
        first = true
        for index in gauges { valueSeries(index, &first) }
        for metric in flush.internalMetrics where metric.kind == .gauge { internalMetric(metric, &first) }
        out.append(UInt8(ascii: "]"))
        open("timers")
        first = true
        for index in sampled {
            let summary = summaries[index]
            guard let stats = summary.stats else { continue }
            series(summary.series, &first)
            out.append(string: ",\"type\":\"\(summary.kind.typeField)\",\"count\":")
            out.append(number: summary.value)
            out.append(ascii: ",\"samples\":")
            out.append(number: Double(stats.samples))
            for (name, value) in [
                ("sum", stats.sum), ("min", stats.min), ("max", stats.max), ("mean", stats.mean),
                ("stddev", stats.stddev), ("sum_squares", stats.sumSquares),
                ("count_ps", summary.value / flush.intervalSeconds),
            ] where value.isFinite {
                out.append(string: ",\"\(name)\":")
                out.append(number: value)
            }
            for percentile in stats.percentiles {
                out.append(string: ",\"\(percentile.name)\":")
                out.append(number: percentile.value)
            }
            if stats.approximate { out.append(ascii: ",\"approximate\":true") }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        open("sets")
        first = true
        for index in sets {
            series(summaries[index].series, &first)
            out.append(ascii: ",\"count\":")
            out.append(number: summaries[index].value)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        func field(_ key: String, _ value: String?) {
            guard let value else { return }
            out.append(string: ",\"\(key)\":")
            out.append(jsonString: ArraySlice(value.utf8))
        }
        open("events")
        for (position, event) in flush.events.enumerated() {
            out.append(string: position > 0 ? ",{" : "{")
            out.append(ascii: "\"title\":")
            out.append(jsonString: ArraySlice(event.title.utf8))
            field("text", event.text)
            if let timestamp = event.timestamp { out.append(string: ",\"timestamp\":\(timestamp)") }
            field("hostname", event.hostname)
            field("aggregation_key", event.aggregationKey)
            field("priority", event.priority)
            field("source_type", event.sourceType)
            field("alert_type", event.alertType)
            tagArray(event.tags)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        open("service_checks")
        for (position, check) in flush.serviceChecks.enumerated() {
            out.append(string: position > 0 ? ",{" : "{")
            out.append(ascii: "\"name\":")
            out.append(jsonString: ArraySlice(check.name.utf8))
            out.append(string: ",\"status\":\(check.status)")
            if let timestamp = check.timestamp { out.append(string: ",\"timestamp\":\(timestamp)") }
            field("hostname", check.hostname)
            tagArray(check.tags)
            field("message", check.message)
            out.append(UInt8(ascii: "}"))
        }
        out.append(ascii: "]}\n")
        return WrittenBytes(out)
    }
}

/// The Graphite plaintext output: `path value timestamp` lines.
///
/// A series' path is its name cleaned by `path(_:)`, then its tags in Graphite's form
/// (`;key=value`, each part cleaned by `tagPart(_:)`; a tag without a value becomes
/// `;key=true`, a tag named `name`, Graphite's own, `;_name=…`, and of tags whose keys meet
/// once cleaned only the first is sent). Counters,
/// gauges and sets send their value (a counter: the interval's count); timers, histograms and
/// distributions send `name.count`, `.count_ps`, `.sum`, `.sum_squares`, `.min`, `.max`,
/// `.mean`, `.stddev` and a line per percentile (`.p50`, `.p99_9`) when their interval had
/// samples. loopd's own metrics are sent as `loopd.*`.
public enum GraphiteFormat {
    /// How series are laid out in Graphite's tree.
    public enum Layout: String, Sendable, CaseIterable {
        /// loopd's: a counter's, gauge's or set's value at its name; a timer's statistics under
        /// it (`name.count`, `name.p99`).
        case loopd
        /// etsy StatsD's default (its legacy namespace), so that dashboards made for it keep
        /// working: `stats.<name>` (a counter's rate per second) and `stats_counts.<name>` (its
        /// count), `stats.gauges.<name>`, `stats.sets.<name>.count`, and
        /// `stats.timers.<name>.<stat>` for timers, histograms and distributions, with etsy's
        /// statistics: per percentile p, `count_p`, `mean_p`, `upper_p`, `sum_p`, `sum_squares_p`
        /// (of the lowest p% of the samples), then `std`, `upper`, `lower`, `count`, `count_ps`,
        /// `sum`, `sum_squares`, `mean` and `median`. A timer without samples in the interval
        /// sends `count` and `count_ps` 0, as etsy's does. loopd's own metrics are laid out as
        /// counters and gauges (`stats_counts.loopd.lines_received`). The summaries must come
        /// from `Flush.summaries(trimmed: true)`.
        case etsy
    }

    /// The flush as plaintext lines.
    public static func format(_ flush: Flush, _ summaries: [Summary], layout: Layout = .loopd) -> [UInt8] {
        let out = OutputBytes(capacity: summaries.count * 48)
        let timestampText = OutputBytes(capacity: 0)
        timestampText.append(number: flush.timestamp.rounded(.down))
        let timestamp = timestampText.bytes
        func line(
            _ name: ArraySlice<UInt8>, _ suffix: String, _ tags: [ArraySlice<UInt8>], _ value: Double,
            prefix: String = ""
        ) {
            out.append(string: prefix)
            out.append(contentsOf: path(name))
            out.append(string: suffix)
            var keys: [[UInt8]] = []
            for tag in tags {
                let colon = tag.firstIndex(of: UInt8(ascii: ":"))
                var key = tagPart(tag[..<(colon ?? tag.endIndex)])
                if key.elementsEqual("name".utf8) { key.insert(UInt8(ascii: "_"), at: 0) }
                // Graphite keeps one value per key: of tags whose keys meet once cleaned, the
                // first (in sorted order) is sent.
                guard !keys.contains(key) else { continue }
                keys.append(key)
                out.append(UInt8(ascii: ";"))
                out.append(contentsOf: key)
                out.append(UInt8(ascii: "="))
                out.append(contentsOf: colon.map { tagPart(tag[($0 + 1)...]) } ?? Array("true".utf8))
            }
            out.append(UInt8(ascii: " "))
            out.append(number: value)
            out.append(UInt8(ascii: " "))
            out.append(contentsOf: timestamp)
            out.append(UInt8(ascii: "\n"))
        }
        if layout == .etsy {
            etsy(flush, summaries, line)
            return out.bytes
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
                    (".count", summary.value), (".count_ps", summary.value / flush.intervalSeconds),
                    (".sum", stats.sum), (".sum_squares", stats.sumSquares), (".min", stats.min), (".max", stats.max),
                    (".mean", stats.mean), (".stddev", stats.stddev),
                ] where value.isFinite {
                    line(name, suffix, tags, value)
                }
                for percentile in stats.percentiles { line(name, "." + percentile.name, tags, percentile.value) }
            }
        }
        for metric in flush.internalMetrics { line(ArraySlice(metric.name.utf8), "", [], metric.value) }
        return out.bytes
    }

    /// The etsy layout's lines (see `Layout.etsy`).
    private static func etsy(
        _ flush: Flush, _ summaries: [Summary],
        _ line: (ArraySlice<UInt8>, String, [ArraySlice<UInt8>], Double, String) -> Void
    ) {
        let seconds = flush.intervalSeconds
        func counter(_ name: ArraySlice<UInt8>, _ tags: [ArraySlice<UInt8>], _ value: Double) {
            if (value / seconds).isFinite { line(name, "", tags, value / seconds, "stats.") }
            line(name, "", tags, value, "stats_counts.")
        }
        for summary in summaries {
            let name = flush.name(summary.series)
            let tags = flush.tags(summary.series)
            switch summary.kind {
            case .counter: counter(name, tags, summary.value)
            case .gauge: line(name, "", tags, summary.value, "stats.gauges.")
            case .set: if summary.hasData { line(name, ".count", tags, summary.value, "stats.sets.") }
            case .timer, .histogram, .distribution:
                guard let stats = summary.stats else {
                    line(name, ".count", tags, 0, "stats.timers.")
                    line(name, ".count_ps", tags, 0, "stats.timers.")
                    continue
                }
                var values: [(String, Double)] = []
                for trimmed in stats.trimmed {
                    let suffix = SampleStats.Percentile(p: trimmed.p, value: 0).name.dropFirst()
                    values += [
                        ("count_\(suffix)", Double(trimmed.count)),
                        ("mean_\(suffix)", trimmed.sum / Double(trimmed.count)),
                        ("upper_\(suffix)", trimmed.upper), ("sum_\(suffix)", trimmed.sum),
                        ("sum_squares_\(suffix)", trimmed.sumSquares),
                    ]
                }
                // etsy's sums, mean and deviation are of the samples as received; its count is
                // scaled by sample rates.
                let unscaled =
                    stats.unscaled
                    ?? SampleStats.Unscaled(sum: stats.sum, sumSquares: stats.sumSquares, stddev: stats.stddev)
                values += [
                    ("std", unscaled.stddev), ("upper", stats.max), ("lower", stats.min), ("count", summary.value),
                    ("count_ps", summary.value / seconds), ("sum", unscaled.sum), ("sum_squares", unscaled.sumSquares),
                    ("mean", unscaled.sum / Double(stats.samples)), ("median", stats.median ?? .nan),
                ]
                for (stat, value) in values where value.isFinite {
                    line(name, "." + stat, tags, value, "stats.timers.")
                }
            }
        }
        for metric in flush.internalMetrics {
            let name = ArraySlice(metric.name.utf8)
            if metric.kind == .counter {
                counter(name, [], metric.value)
            } else {
                line(name, "", [], metric.value, "stats.gauges.")
            }
        }
    }

    /// A StatsD name as a Graphite path, which carbon stores as a whisper file whose
    /// directories are the path's dot-separated nodes:
    /// - a byte outside `[a-zA-Z0-9_.-]` becomes `_` (one per byte of a UTF-8 character),
    ///   except `/`, which becomes `-` (as etsy's StatsD does): no name can reach another
    ///   directory, split the line, or hold what Graphite reads as a glob (`*?[]{}`) or a tag
    ///   (`;`);
    /// - runs of dots become one and leading and trailing dots go, so that no node is empty;
    /// - a node longer than `maxNode` bytes (a file name has at most 255) is cut to
    ///   `maxNode - 9` bytes, then `_` and 8 hex digits of a hash of the whole node;
    /// - an empty path is `_`.
    public static func path(_ name: ArraySlice<UInt8>) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(name.count)
        for byte in name {
            if byte == UInt8(ascii: ".") {
                if let last = out.last, last != UInt8(ascii: ".") { out.append(byte) }
            } else {
                out.append(cleaned(byte))
            }
        }
        if out.last == UInt8(ascii: ".") { out.removeLast() }
        guard !out.isEmpty else { return [UInt8(ascii: "_")] }
        // A node is a file or directory name, at most 255 bytes with whisper's ".wsp": a longer
        // one is cut, and keeps a hash of its whole self so that long nodes stay apart.
        guard out.count > maxNode else { return out }
        var shortened = [UInt8]()
        shortened.reserveCapacity(out.count)
        for node in out.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            if !shortened.isEmpty { shortened.append(UInt8(ascii: ".")) }
            guard node.count > maxNode else {
                shortened.append(contentsOf: node)
                continue
            }
            var hash: UInt32 = 2_166_136_261  // FNV-1a: the same path in every run.
            for byte in node { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
            shortened.append(contentsOf: node.prefix(maxNode - 9))
            shortened.append(UInt8(ascii: "_"))
            for shift in stride(from: 28, through: 0, by: -4) {
                shortened.append(Array("0123456789abcdef".utf8)[Int((hash >> UInt32(shift)) & 15)])
            }
        }
        return shortened
    }

    /// The longest node `path(_:)` makes, in bytes.
    public static let maxNode = 200

    /// A tag's name or value as Graphite's tag syntax takes it: as `path(_:)` cleans a byte
    /// (dots are kept as they are); empty is `_`.
    public static func tagPart(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.isEmpty ? [UInt8(ascii: "_")] : bytes.map { $0 == UInt8(ascii: ".") ? $0 : cleaned($0) }
    }

    private static func cleaned(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            byte
        case UInt8(ascii: "/"): UInt8(ascii: "-")
        default: UInt8(ascii: "_")
        }
    }
}

// Prometheus' text exposition format (version 0.0.4): names and labels Prometheus takes and
// its linter accepts, counters with `_total`, timers as histograms (or summaries) in seconds.

/// How the Prometheus exposition shows timers, histograms and distributions.
public struct PrometheusOptions: Sendable, Equatable {
    /// The Prometheus type of the sampled kinds (`ms`, `h`, `d`).
    public enum Timers: String, Sendable, Equatable, CaseIterable {
        /// Histograms: a cumulative count per bucket since the series was created, with `_sum`
        /// and `_count`. Prometheus can aggregate them across instances and compute any
        /// quantile over any window (`histogram_quantile`).
        case histogram
        /// Summaries: the quantiles 0.5, 0.9, 0.95 and 0.99 of the last flush interval's
        /// samples (left out after an interval without samples), with `_sum` and `_count` since
        /// the series was created.
        case summary
    }

    /// The Prometheus type of timers, histograms and distributions.
    public var timers: Timers
    /// The histograms' bucket upper bounds, ascending (`+Inf` is added): in seconds for timers,
    /// as sent for histograms and distributions.
    public var buckets: [Double]
    /// The flush interval in seconds, which the summaries' help text names as their window.
    public var flushInterval: Double

    /// Prometheus' client libraries' default buckets, in seconds: 5 ms to 10 s.
    public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// The most buckets a histogram may have.
    public static let maxBuckets = 64

    /// Creates options.
    ///
    /// - Precondition: `buckets` is valid for `bucketList(_:)`: 1 to `maxBuckets` finite
    ///   bounds, strictly ascending.
    public init(timers: Timers = .histogram, buckets: [Double] = defaultBuckets, flushInterval: Double = 10) {
        if let problem = Self.bucketsProblem(buckets) { fatalError("PrometheusOptions(buckets:): \(problem)") }
        self.timers = timers
        self.buckets = buckets
        self.flushInterval = flushInterval
    }

    /// The bounds `Flush.summaries(bucketBounds:)` must be given for `PrometheusExposition`:
    /// the buckets for histograms, none for summaries.
    public var bucketBounds: [Double] { timers == .histogram ? buckets : [] }

    /// A bucket list that is not one: what is wrong with it.
    public struct InvalidBuckets: Error, CustomStringConvertible, Equatable {
        /// What is wrong, naming the bound at fault.
        public var description: String
    }

    /// Parses a comma-separated bucket list (`0.005,0.01,0.1,1`).
    ///
    /// - Throws: `InvalidBuckets` for an empty list, an entry that is not a finite number, bounds
    ///   not strictly ascending, or more than `maxBuckets`.
    public static func bucketList(_ text: String) throws(InvalidBuckets) -> [Double] {
        var bounds = [Double]()
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = entry.trimmingSpaces
            // Decimal only: Double(_:) also reads hexadecimal ("0x10") and words ("infinity").
            guard
                trimmed.utf8.allSatisfy({ $0 &- 48 < 10 || $0 == 0x2E || $0 == 0x2B || $0 == 0x2D || $0 | 0x20 == 0x65 }
                ),
                let bound = Double(trimmed)
            else {
                throw InvalidBuckets(description: "\"\(trimmed)\" is not a number")
            }
            bounds.append(bound)
        }
        if let problem = bucketsProblem(bounds) { throw InvalidBuckets(description: problem) }
        return bounds
    }

    static func bucketsProblem(_ bounds: [Double]) -> String? {
        guard !bounds.isEmpty else { return "at least one bound is needed" }
        guard bounds.count <= maxBuckets else { return "at most \(maxBuckets) bounds, got \(bounds.count)" }
        if let bad = bounds.first(where: { !$0.isFinite }) { return "bounds must be finite, got \(bad)" }
        for (lower, upper) in zip(bounds, bounds.dropFirst()) where upper <= lower {
            return "bounds must be strictly ascending, got \(upper) after \(lower)"
        }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var trimmed = self
        while trimmed.first == " " { trimmed = trimmed.dropFirst() }
        while trimmed.last == " " { trimmed = trimmed.dropLast() }
        return trimmed
    }
}

/// Bytes as a dictionary key, hashed in one pass (an `[UInt8]` key is hashed byte by byte, which
/// was most of an exposition's time with 100,000 series).
struct ByteKey: Hashable {
    var bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}

/// Renders flushes in Prometheus' text exposition format (version 0.0.4), served at
/// `GET /metrics`, keeping the histograms' cumulative buckets from one flush to the next.
///
/// Every family has `# HELP` (the StatsD name and type it shows, and its window) and `# TYPE`,
/// and passes `promtool check metrics`, whatever the names and tags sent:
/// - **Counters** are `counter`s named `…_total`: the count since the series was created, of
///   positive increments only (a Prometheus counter never decreases; negative values are left
///   out and counted in `Ingest.Counts.negativeCounterValues`).
/// - **Gauges** are `gauge`s; **sets** are `gauge`s of the last interval's distinct members.
/// - **Timers, histograms, distributions** are `histogram`s (or `summary`s, see
///   `PrometheusOptions.Timers`). Timers (`ms`) are shown in seconds, named `…_seconds` (a
///   trailing `ms` or `milliseconds` word of the name is dropped); histograms and distributions
///   as sent. A sampled line counts 1/rate times in `_count`, `_sum` and the buckets.
/// - **Names** (see `familyName(_:_:)`) are lower case, with every byte outside `[a-z0-9_]`
///   replaced by `_`, and a word Prometheus' linter reads as a unit or a type joined to the word
///   before it. **Labels** (see `labelName(_:)`): tag names likewise, `le` and `quantile`
///   prefixed with `_`.
/// - **Collisions**: a family takes its name and the names of its samples (`_bucket`, `_sum`,
///   `_count`). A series whose name and labels, once cleaned, are those of a series shown is
///   merged into it if both are counters or histograms of one unit (`a.b` and `a-b`: the counts
///   add up); otherwise, and when its family name another type holds, it is left out.
///   `render(_:_:)` returns both numbers.
///
/// Confined to one thread at a time (loopd's flush queue): `render` mutates.
///
/// - Memory: in histogram form, one `Double` per bucket and the key's bytes per sampled
///   series, kept until the series leaves the table.
public final class PrometheusExposition {
    /// How timers are shown.
    public let options: PrometheusOptions
    /// Histograms: each sampled series' bucket bounds and cumulative bucket counts (without
    /// `+Inf`, which is its `_count`), by canonical key.
    private var cumulative: [ByteKey: (total: Double, bounds: [Double], buckets: [Double], expired: Bool)] = [:]
    /// Counters and histograms shown that merge several series, by name and labels: what each
    /// of their series counted at the last flush, and what series gone from them had counted.
    private var shown: [ByteKey: Shown] = [:]
    /// Each series' family name and labels, by canonical key: cleaned once while it lives.
    private var names: [ByteKey: (name: [UInt8], labels: [UInt8])] = [:]

    /// A counter's or histogram's numbers: its count, its sum and its cumulative buckets, with
    /// their bounds.
    struct Counted {
        var total = 0.0
        var sum = 0.0
        var buckets: [Double] = []
        var bounds: [Double] = []
        /// Whether the series expired at this flush: the table that goes on removed it, and a
        /// series of its key at the next flush is created anew. Not added by `+=`.
        var expired = false

        /// Adds `rhs`, its buckets carried over to `lhs`'s bounds if they differ (see
        /// `PrometheusExposition.carry`).
        static func += (lhs: inout Counted, rhs: Counted) {
            lhs.total += rhs.total
            lhs.sum += rhs.sum
            if lhs.buckets.isEmpty && lhs.bounds.isEmpty {
                lhs.buckets = rhs.buckets
                lhs.bounds = rhs.bounds
                return
            }
            let added = rhs.bounds == lhs.bounds ? rhs.buckets : carry(rhs.buckets, from: rhs.bounds, to: lhs.bounds)
            for index in lhs.buckets.indices where index < added.count { lhs.buckets[index] += added[index] }
        }

        var isFinite: Bool { total.isFinite && sum.isFinite }
    }

    /// Cumulative bucket counts of `old` bounds carried over to `new` ones: a bound in both keeps
    /// its count, and a new bound takes the count of the highest old bound below it (0 if none),
    /// which may leave out samples between the two but never makes a bucket go down or exceed
    /// the next one.
    static func carry(_ counts: [Double], from old: [Double], to new: [Double]) -> [Double] {
        var carried = [Double]()
        carried.reserveCapacity(new.count)
        var below = 0.0
        var index = 0
        for bound in new {
            while index < old.count && index < counts.count && old[index] <= bound {
                below = counts[index]
                index += 1
            }
            carried.append(below)
        }
        return carried
    }

    /// A counter or histogram shown that merges several series: what they had counted at the
    /// last flush, and what series that left it had counted, which it keeps showing so that it
    /// never goes down.
    struct Shown {
        /// The series shown in it at the last flush.
        var series: [ByteKey: Counted] = [:]
        /// Series still in the table but not shown in it (left out, their bounds differing from
        /// its), with what they had counted when last shown: counted until they come back.
        var absent: [ByteKey: Counted] = [:]
        /// What series that left it for good (expired, or expired and created anew) had counted.
        var gone = Counted()

        /// What to show for `series` now (with `bounds`), and the state for the next flush;
        /// `inTable` tells which series the table still holds.
        static func next(
            _ previous: Shown?, _ series: [(ByteKey, Counted)], bounds: [Double], inTable: (ByteKey) -> Bool
        ) -> (Counted, Shown) {
            var state = Shown()
            state.gone = previous?.gone ?? Counted()
            for (key, counted) in series { state.series[key] = counted }
            var earlier = previous?.absent ?? [:]
            for (key, counted) in previous?.series ?? [:] { earlier[key] = counted }
            for (key, counted) in earlier {
                if let now = state.series[key] {
                    // A series that expired and came back starts from zero, and what it had
                    // counted stays counted. (It counts up while it lives: less means the
                    // same.) Otherwise `now` holds it all.
                    if counted.expired || now.total < counted.total { state.gone += counted }
                } else if inTable(key) {
                    state.absent[key] = counted
                } else {
                    state.gone += counted
                }
            }
            var total = Counted(buckets: [Double](repeating: 0, count: bounds.count), bounds: bounds)
            total += state.gone
            for (_, counted) in state.absent { total += counted }
            for (_, counted) in series { total += counted }
            // Past the largest number, start again from what the series count.
            guard total.isFinite else {
                state.gone = Counted()
                state.absent = [:]
                var fresh = Counted(buckets: [Double](repeating: 0, count: bounds.count), bounds: bounds)
                for (_, counted) in series { fresh += counted }
                return (fresh, state)
            }
            return (total, state)
        }
    }

    /// A renderer with no histogram counts yet.
    public init(options: PrometheusOptions = PrometheusOptions()) {
        self.options = options
    }

    /// The Prometheus type a StatsD kind is shown as.
    public enum Family: String, Sendable {
        case counter, gauge, histogram, summary
    }

    /// The family a kind is shown as.
    public func family(_ kind: MetricKind) -> Family {
        switch kind {
        case .counter: .counter
        case .gauge, .set: .gauge
        case .timer, .histogram, .distribution: options.timers == .histogram ? .histogram : .summary
        }
    }

    /// The flush as an exposition; the number of series left out of it (those whose name a
    /// family of another type holds, and those whose name and labels repeat a series shown and
    /// cannot be merged into it); and the number merged into a series shown (counters, and
    /// histograms of one unit, whose name and labels meet once cleaned: their counts and sums
    /// add up).
    ///
    /// - Precondition: `summaries` come from `flush.summaries(bucketBounds: options.bucketBounds)`.
    public func render(_ flush: Flush, _ summaries: [Summary]) -> (bytes: [UInt8], leftOut: Int, merged: Int) {
        if !options.bucketBounds.isEmpty { accumulate(flush, summaries) }

        struct Entry {
            var name: [UInt8]
            var family: Family
            var labels: [UInt8]
            var summary: Summary?
            var metric: InternalMetric?
            var sourceName: ArraySlice<UInt8>
            var kind: MetricKind
            /// Counters and histograms: the count since creation, and for histograms the sum
            /// (in the unit shown) and the cumulative buckets, with those of the series merged
            /// into this one added.
            var total = 0.0
            var sum = 0.0
            var buckets: [Double] = []
            /// Histograms: the bounds of `buckets`.
            var bounds: [Double] = []
        }
        var entries = [Entry]()
        entries.reserveCapacity(summaries.count + flush.internalMetrics.count)
        // Names and labels are cleaned once per series, and kept while the series lives.
        var nextNames = [ByteKey: (name: [UInt8], labels: [UInt8])](minimumCapacity: summaries.count)
        for summary in summaries {
            let family = self.family(summary.kind)
            let source = flush.name(summary.series)
            let canonical = ByteKey(Array(flush.table.key(summary.series)))
            let cleaned =
                names[canonical]
                ?? (
                    PrometheusFormat.familyName(source, summary.kind, family),
                    PrometheusFormat.labels(flush.tags(summary.series)).labels
                )
            nextNames[canonical] = cleaned
            var entry = Entry(
                name: cleaned.name, family: family, labels: cleaned.labels, summary: summary, metric: nil,
                sourceName: source, kind: summary.kind)
            entry.total = summary.total
            // Timers are sent in milliseconds and shown in seconds (divided: 70 / 1000 is 0.07,
            // where 70 * 0.001 is not).
            entry.sum = summary.totalSum / (summary.kind == .timer ? 1000 : 1)
            if family == .histogram {
                entry.buckets = cumulative[canonical]?.buckets ?? []
                entry.bounds = summary.bucketBounds
            }
            entries.append(entry)
        }
        names = nextNames
        for metric in flush.internalMetrics {
            let family = self.family(metric.kind)
            let source = ArraySlice(metric.name.utf8)
            entries.append(
                Entry(
                    name: PrometheusFormat.familyName(source, metric.kind, family), family: family, labels: [],
                    summary: nil, metric: metric, sourceName: source, kind: metric.kind))
        }
        // One family per name: the first series of a name decides its type, and a family's
        // sample names (`_bucket`, `_sum`, `_count`) are its names too. A series with the name
        // and labels of one already kept (names and labels can meet once cleaned) is merged
        // into it if both are counters, or histograms of one unit (counts and sums add up);
        // otherwise it would repeat it, and it is left out.
        var taken = Set<ByteKey>(minimumCapacity: entries.count * 2)  // Every family's sample names.
        var families = [ByteKey: (family: Family, group: Int)](minimumCapacity: entries.count)
        var kept = [ByteKey: Int](minimumCapacity: entries.count)  // Name and labels → index in `shown`.
        var shown = [Entry]()
        shown.reserveCapacity(entries.count)
        var groups = [Int]()  // Each shown entry's family, in first-seen order of families.
        groups.reserveCapacity(entries.count)
        var parts = [[(ByteKey, Counted)]]()  // Each shown entry's counters or histograms.
        parts.reserveCapacity(entries.count)
        var leftOut = 0
        var merged = 0
        for entry in entries {
            let group: Int
            if let owner = families[ByteKey(entry.name)] {
                guard owner.family == entry.family else {
                    leftOut += 1
                    continue
                }
                group = owner.group
            } else {
                let names = PrometheusFormat.sampleNames(entry.name, entry.family).map(ByteKey.init)
                guard names.allSatisfy({ !taken.contains($0) }) else {
                    leftOut += 1
                    continue
                }
                group = families.count
                families[ByteKey(entry.name)] = (entry.family, group)
                taken.formUnion(names)
            }
            let key = ByteKey(entry.name + [UInt8(ascii: "{")] + entry.labels)
            // The series' own numbers, for those that never go down.
            var counted: (ByteKey, Counted)?
            if entry.metric == nil && (entry.family == .counter || entry.family == .histogram) {
                let series = entry.summary!.series
                counted = (
                    ByteKey(Array(flush.table.key(series))),
                    Counted(
                        total: entry.total, sum: entry.sum, buckets: entry.buckets, bounds: entry.bounds,
                        expired: flush.table.removesAfterEnd(series))
                )
            }
            guard let index = kept[key] else {
                kept[key] = shown.count
                shown.append(entry)
                groups.append(group)
                parts.append(counted.map { [$0] } ?? [])
                continue
            }
            let first = shown[index]
            let mergeable =
                first.metric == nil && entry.metric == nil
                && (entry.family == .counter
                    || (entry.family == .histogram && (first.kind == .timer) == (entry.kind == .timer)
                        && first.bounds == entry.bounds))
            // A merge must keep every number finite, as each series' are.
            guard mergeable, (first.total + entry.total).isFinite, (first.sum + entry.sum).isFinite else {
                leftOut += 1
                continue
            }
            shown[index].total += entry.total
            shown[index].sum += entry.sum
            if let counted { parts[index].append(counted) }
            merged += 1
        }
        // Counters and histograms never go down while shown: when a series merged into one
        // expires, what it had counted stays counted, until the one shown goes too.
        // Only merged ones keep a state: a lone series that expires starts again from zero, a
        // restart Prometheus knows.
        var nextShown = [ByteKey: Shown]()
        for index in shown.indices where !parts[index].isEmpty {
            let key = ByteKey(shown[index].name + [UInt8(ascii: "{")] + shown[index].labels)
            let previous = self.shown[key]
            guard parts[index].count > 1 || previous != nil else { continue }
            let (total, state) = Shown.next(previous, parts[index], bounds: shown[index].bounds) {
                nextNames[$0] != nil
            }
            (shown[index].total, shown[index].sum, shown[index].buckets) = (total.total, total.sum, total.buckets)
            if state.series.count > 1 || state.gone.total > 0 || !state.absent.isEmpty { nextShown[key] = state }
        }
        self.shown = nextShown
        // Group each family's series together, in first-seen order of families (a counting
        // sort: arrival order within a family).
        var starts = [Int](repeating: 0, count: families.count + 1)
        for group in groups { starts[group + 1] += 1 }
        for group in 0..<families.count { starts[group + 1] += starts[group] }
        var slots = [Int](repeating: 0, count: shown.count)
        for (index, group) in groups.enumerated() {
            slots[starts[group]] = index
            starts[group] += 1
        }
        entries = slots.map { shown[$0] }

        let out = OutputBytes(capacity: entries.count * 64)
        var currentName: [UInt8]? = nil
        for entry in entries {
            if currentName != entry.name {
                currentName = entry.name
                out.append(ascii: "# HELP ")
                out.append(contentsOf: entry.name)
                out.append(UInt8(ascii: " "))
                help(entry.sourceName, entry.kind, entry.family, isOwn: entry.metric != nil, into: out)
                out.append(ascii: "\n# TYPE ")
                out.append(contentsOf: entry.name)
                out.append(UInt8(ascii: " "))
                out.append(string: entry.family.rawValue)
                out.append(UInt8(ascii: "\n"))
            }
            // `extra` writes one more label after the series' own (`le`, `quantile`).
            func sample(_ suffix: String, _ value: Double, extra: ((OutputBytes) -> Void)? = nil) {
                out.append(contentsOf: entry.name)
                out.append(string: suffix)
                if !entry.labels.isEmpty || extra != nil {
                    out.append(UInt8(ascii: "{"))
                    out.append(contentsOf: entry.labels)
                    if let extra {
                        if !entry.labels.isEmpty { out.append(UInt8(ascii: ",")) }
                        extra(out)
                    }
                    out.append(UInt8(ascii: "}"))
                }
                out.append(UInt8(ascii: " "))
                out.append(prometheusNumber: value)
                out.append(UInt8(ascii: "\n"))
            }
            if let metric = entry.metric {
                sample("", metric.kind == .counter ? metric.total : metric.value)
                continue
            }
            let summary = entry.summary!
            let unit = summary.kind == .timer ? 1000.0 : 1
            switch entry.family {
            case .counter: sample("", entry.total)
            case .gauge: sample("", summary.value)
            case .histogram:
                for (bound, count) in zip(entry.bounds, entry.buckets) {
                    // Never above `+Inf` (the count), which the rounding of sums could cross.
                    sample("_bucket", Swift.min(count, entry.total)) { out in
                        out.append(ascii: "le=\"")
                        out.append(number: bound)
                        out.append(UInt8(ascii: "\""))
                    }
                }
                sample("_bucket", entry.total) { $0.append(ascii: "le=\"+Inf\"") }
                sample("_sum", entry.sum)
                sample("_count", entry.total)
            case .summary:
                // An interval without samples has no quantiles: they are left out (a summary
                // may have none), never shown as NaN.
                if let stats = summary.stats {
                    for percentile in stats.percentiles {
                        sample("", percentile.value / unit) {
                            $0.append(string: "quantile=\"\(Self.quantile(percentile.p))\"")
                        }
                    }
                }
                sample("_sum", summary.totalSum / unit)
                sample("_count", summary.total)
            }
        }
        return (out.bytes, leftOut, merged)
    }

    /// A percentile as a quantile label, in decimal without the rounding of p / 100: 50 is
    /// `0.5`, 99.9 is `0.999`, 100 is `1`.
    static func quantile(_ p: Double) -> String {
        let text = String(p)
        guard !text.contains("e"), let dot = text.firstIndex(of: ".") else { return String(p / 100) }
        var whole = String(text[..<dot])
        while whole.count < 3 { whole = "0" + whole }
        var digits = whole.dropLast(2) + "." + whole.suffix(2) + text[text.index(after: dot)...]
        while digits.last == "0" { digits.removeLast() }
        if digits.last == "." { digits.removeLast() }
        return String(digits)
    }

    /// Adds the interval's bucket counts to each sampled series' and forgets the series the
    /// table no longer holds.
    private func accumulate(_ flush: Flush, _ summaries: [Summary]) {
        var next = [ByteKey: (total: Double, bounds: [Double], buckets: [Double], expired: Bool)](
            minimumCapacity: cumulative.count)
        for summary in summaries where summary.kind.isSampled {
            let key = ByteKey(Array(flush.table.key(summary.series)))
            let bounds = summary.bucketBounds
            precondition(
                !bounds.isEmpty && (summary.stats == nil || summary.buckets.count == bounds.count),
                "PrometheusExposition.render: summaries must come from flush.summaries(bucketBounds: options.bucketBounds)"
            )
            // A series that expired at the last flush is created anew: its buckets start again
            // too, as its count does (a count below the last one means the same). When its
            // bounds change (a reload), its counts are carried over.
            var counts =
                cumulative[key].flatMap { last in
                    guard !last.expired && last.total <= summary.total else { return nil }
                    return last.bounds == bounds
                        ? last.buckets : Self.carry(last.buckets, from: last.bounds, to: bounds)
                } ?? [Double](repeating: 0, count: bounds.count)
            if summary.stats != nil {
                for index in counts.indices { counts[index] += summary.buckets[index] }
            }
            next[key] = (summary.total, bounds, counts, flush.table.removesAfterEnd(summary.series))
        }
        cumulative = next
    }

    /// A family's help text: what it shows, the StatsD name and type it comes from, its unit and
    /// its window.
    private func help(
        _ source: ArraySlice<UInt8>, _ kind: MetricKind, _ family: Family, isOwn: Bool, into out: OutputBytes
    ) {
        let kindName: String
        switch kind {
        case .counter: kindName = "counter"
        case .gauge: kindName = "gauge"
        case .set: kindName = "set"
        case .timer: kindName = "timer"
        case .histogram: kindName = "histogram"
        case .distribution: kindName = "distribution"
        }
        out.append(string: isOwn ? "loopd's own \(kindName) " : "StatsD \(kindName) ")
        PrometheusFormat.appendHelpText(source, into: out)
        switch kind {
        case .counter where isOwn: out.append(ascii: ": the count since loopd started")
        case .counter: out.append(ascii: ": the count since the series was created (positive increments)")
        case .gauge: out.append(ascii: ": the last value")
        case .set: out.append(ascii: ": the distinct members of the last flush interval")
        case .timer, .histogram, .distribution:
            out.append(string: kind == .timer ? ", in seconds: " : ": ")
            if family == .histogram {
                out.append(ascii: "the samples since the series was created")
            } else {
                out.append(ascii: "quantiles of the last flush interval's samples (every ")
                out.append(number: options.flushInterval)
                out.append(ascii: " s); _sum and _count since the series was created")
            }
        }
    }
}

/// Prometheus' text exposition format: the names and labels rules, and a one-off rendering.
public enum PrometheusFormat {
    /// The flush as an exposition rendered with no earlier flush (histograms count this flush's
    /// samples only); loopd keeps a `PrometheusExposition` from one flush to the next.
    public static func format(
        _ flush: Flush, _ summaries: [Summary], options: PrometheusOptions = PrometheusOptions()
    ) -> [UInt8] {
        exposition(flush, summaries, options: options).bytes
    }

    /// The flush as an exposition rendered with no earlier flush, and the number of series left
    /// out (see `PrometheusExposition.render(_:_:)`).
    public static func exposition(
        _ flush: Flush, _ summaries: [Summary], options: PrometheusOptions = PrometheusOptions()
    ) -> (bytes: [UInt8], leftOut: Int, merged: Int) {
        let renderer = PrometheusExposition(options: options)
        if !options.bucketBounds.isEmpty
            && summaries.contains(where: {
                $0.kind.isSampled && ($0.bucketBounds.isEmpty || $0.stats != nil && $0.buckets.isEmpty)
            })
        {
            return renderer.render(flush, flush.summaries(bucketBounds: options.bucketBounds))
        }
        return renderer.render(flush, summaries)
    }

    // MARK: Names

    /// The words Prometheus' linter reads as an abbreviated unit (after a `_`).
    static let unitAbbreviations: Set<[UInt8]> = Set(
        ["s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"].map { Array($0.utf8) })
    /// The words it reads as a metric type (after a `_`).
    static let typeWords: Set<[UInt8]> = Set(["counter", "gauge", "histogram", "summary"].map { Array($0.utf8) })
    /// The units it knows, and their base unit: a word that is a unit, with or without one of
    /// `unitPrefixes`, and not its base unit, is one it asks to replace (anywhere in the name).
    static let units: [String: String] = [
        "amperes": "amperes", "bytes": "bytes", "celsius": "celsius", "grams": "grams", "joules": "joules",
        "kelvin": "kelvin", "meters": "meters", "metres": "metres", "seconds": "seconds", "volts": "volts",
        "minutes": "seconds", "hours": "seconds", "days": "seconds", "weeks": "seconds", "kelvins": "kelvin",
        "fahrenheit": "celsius", "rankine": "celsius", "inches": "meters", "yards": "meters", "miles": "meters",
        "bits": "bytes", "calories": "joules", "pounds": "grams", "ounces": "grams",
    ]
    static let unitPrefixes = [
        "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega", "mibi", "giga",
        "gibi", "tera", "tebi", "peta", "pebi",
    ]

    /// The units other than base units, with or without a prefix (`minutes`, `kilobytes`,
    /// `bits`): a unit with a prefix is never its base unit.
    static let nonBaseUnits: Set<ByteKey> = {
        var words = Set<ByteKey>()
        for (unit, base) in units {
            if unit != base { words.insert(ByteKey(Array(unit.utf8))) }
            for prefix in unitPrefixes { words.insert(ByteKey(Array((prefix + unit).utf8))) }
        }
        return words
    }()

    /// The words a linter reads after a `_`: abbreviated units, types and non-base units.
    static let lintedWords: Set<ByteKey> = nonBaseUnits.union(unitAbbreviations.map(ByteKey.init)).union(
        typeWords.map(ByteKey.init))

    /// Whether a word is a unit other than a base unit (`minutes`, `kilobytes`, `bits`).
    static func isNonBaseUnit(_ word: [UInt8]) -> Bool { nonBaseUnits.contains(ByteKey(word)) }

    /// Whether a word after a `_` makes Prometheus' linter complain.
    static func isLintedWord(_ word: [UInt8]) -> Bool { lintedWords.contains(ByteKey(word)) }

    /// The family name a StatsD name of `kind` shown as `family` gets:
    /// 1. ASCII letters become lower case, and a `_` goes between a lower-case letter and an
    ///    upper-case one (`requestTime` → `request_time`); every byte outside `[a-z0-9_]` becomes
    ///    `_` (`api.v1-b/c` → `api_v1_b_c`; a UTF-8 character gives one `_` per byte).
    /// 2. A timer's trailing `ms` or `milliseconds` word is dropped (`lat.ms` → `lat`).
    /// 3. A word Prometheus' linter reads as an abbreviated unit (`s`, `ms`, `kb`, `h`, …), a type
    ///    (`counter`, `gauge`, `histogram`, `summary`) or a non-base unit (`minutes`, `bits`,
    ///    `kilobytes`, …) is joined to the word before it (`disk.used.kb` → `disk_usedkb`; a
    ///    first word that is a non-base unit, to the word after it, or if it is the only word,
    ///    `value` to it: `minutes` → `minutesvalue`; a first word loses the underscores before
    ///    it, `_ms` → `ms`). So is a last word the
    ///    family's type reserves for others: `total` on a gauge, histogram or summary, `count`
    ///    and `sum` on a gauge, `bucket` on a gauge or summary (alone, it loses the underscores
    ///    before it: `_count` is `count`).
    /// 4. The unit and type suffix: `_seconds` on a timer, `_total` on a counter, unless the name
    ///    already ends so (`total` is `total_total`).
    /// 5. A name that starts with a digit gets a `_` before it; an empty one is `_`.
    ///
    public static func familyName(
        _ source: ArraySlice<UInt8>, _ kind: MetricKind, _ family: PrometheusExposition.Family
    )
        -> [UInt8]
    {
        // 1. Characters, as a list of words with the underscores before each.
        var cleaned = [UInt8]()
        cleaned.reserveCapacity(source.count + 8)
        appendSnakeCase(source, into: &cleaned)
        struct Word {
            var separator: Int  // Underscores before it.
            var text: [UInt8]
        }
        var words = [Word]()
        var index = 0
        while index < cleaned.count {
            var separator = 0
            while index < cleaned.count && cleaned[index] == UInt8(ascii: "_") {
                separator += 1
                index += 1
            }
            var text = [UInt8]()
            while index < cleaned.count && cleaned[index] != UInt8(ascii: "_") {
                text.append(cleaned[index])
                index += 1
            }
            words.append(Word(separator: separator, text: text))
        }
        // 2. A timer's unit word: its values are shown in seconds.
        if kind == .timer, words.count > 1, let last = words.last?.text,
            last.elementsEqual("ms".utf8) || last.elementsEqual("milliseconds".utf8)
        {
            words.removeLast()
        }
        // 3. Joins: each word is checked as it is added, and so is what a join makes.
        var joined = [Word]()
        for var word in words {
            // A first word the linter reads (`_ms`) loses the underscores before it.
            if joined.isEmpty && isLintedWord(word.text) { word.separator = 0 }
            joined.append(word)
            while joined.count > 1 {
                let last = joined[joined.count - 1]
                let first = joined.count == 2 && isNonBaseUnit(joined[0].text)
                guard (last.separator > 0 && isLintedWord(last.text)) || first else { break }
                joined.removeLast()
                joined[joined.count - 1].text += last.text
            }
        }
        // A name whose one word is a unit other than a base unit (`minutes`, or `kilo.bits` once
        // joined) has no word to be joined to: `value` is joined to it.
        if joined.count == 1 && isNonBaseUnit(joined[0].text) { joined[0].text += "value".utf8 }
        let reserved: [String]
        switch family {
        case .counter: reserved = []
        case .gauge: reserved = ["total", "count", "sum", "bucket"]
        case .histogram: reserved = ["total"]
        case .summary: reserved = ["total", "bucket"]
        }
        if let last = joined.last, reserved.contains(where: { last.text.elementsEqual($0.utf8) }) {
            if joined.count > 1 {
                joined.removeLast()
                joined[joined.count - 1].text += last.text
            } else {
                joined[0].separator = 0  // `_total` alone is `total`.
            }
        }
        var name = [UInt8]()
        name.reserveCapacity(cleaned.count + 8)
        for word in joined {
            name.append(contentsOf: repeatElement(UInt8(ascii: "_"), count: word.separator))
            name.append(contentsOf: word.text)
        }
        // 4. Suffixes.
        let suffix = kind == .timer ? "_seconds" : family == .counter ? "_total" : ""
        if !name.reversed().starts(with: suffix.utf8.reversed()) { name.append(contentsOf: suffix.utf8) }
        // 5. The first byte.
        if let first = name.first, first &- 48 < 10 { name.insert(UInt8(ascii: "_"), at: 0) }
        return name.isEmpty ? [UInt8(ascii: "_")] : name
    }

    /// Appends `bytes` in lower case, with a `_` where a lower-case letter meets an upper-case
    /// one, and `_` for every byte outside `[a-zA-Z0-9_]`.
    static func appendSnakeCase(_ bytes: ArraySlice<UInt8>, into out: inout [UInt8]) {
        var previous: UInt8 = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
                out.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                if (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(previous) { out.append(UInt8(ascii: "_")) }
                out.append(byte + 32)
            default: out.append(UInt8(ascii: "_"))
            }
            previous = byte
        }
    }

    /// The sample names a family uses, its own name among them.
    static func sampleNames(_ name: [UInt8], _ family: PrometheusExposition.Family) -> [[UInt8]] {
        switch family {
        case .counter, .gauge: [name]
        case .summary: [name, name + "_sum".utf8, name + "_count".utf8]
        case .histogram: [name, name + "_bucket".utf8, name + "_sum".utf8, name + "_count".utf8]
        }
    }

    /// Help text: `\` and line feeds escaped. (Names are UTF-8: the parser refuses lines that
    /// are not, as Prometheus refuses a scrape with a label value that is not.)
    static func appendHelpText(_ bytes: ArraySlice<UInt8>, into out: OutputBytes) {
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\\"): out.append(ascii: "\\\\")
            case UInt8(ascii: "\n"): out.append(ascii: "\\n")
            default: out.append(byte)
            }
        }
    }

    // MARK: Labels

    /// The labels of a series with `tags`, and how many of its tags they rename or leave out
    /// (see `labelName(_:)`; of tags whose names meet once renamed, the first in sorted order is
    /// kept). Values are escaped: `\\`, `\"` and `\n`.
    static func labels(_ tags: [ArraySlice<UInt8>]) -> (labels: [UInt8], changed: Int) {
        var out = [UInt8]()
        var seen = Set<[UInt8]>()
        var changed = 0
        for tag in tags {
            let colon = tag.firstIndex(of: UInt8(ascii: ":"))
            let sent = tag[..<(colon ?? tag.endIndex)]
            let name = labelName(sent)
            guard seen.insert(name).inserted else {  // A label appears once.
                changed += 1
                continue
            }
            if !name.elementsEqual(sent) { changed += 1 }
            if !out.isEmpty { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: name)
            out.append(contentsOf: "=\"".utf8)
            let value = colon.map { tag[($0 + 1)...] } ?? ArraySlice("true".utf8)
            for byte in value {
                switch byte {
                case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
                case UInt8(ascii: "\n"): out.append(contentsOf: "\\n".utf8)
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
        let tags = Flush.tags(ofKey: key)
        return tags.isEmpty ? 0 : labels(tags).changed
    }

    /// A tag's name as a label name, which Prometheus wants to match `[a-zA-Z_][a-zA-Z0-9_]*`,
    /// not to start with `__` (its own labels, such as `__name__`, do), and its linter wants in
    /// snake case:
    /// - ASCII letters become lower case, with a `_` between a lower-case letter and an
    ///   upper-case one (`podName` → `pod_name`); every other byte outside `[a-z0-9_]` becomes `_`
    ///   (a UTF-8 character, one `_` per byte);
    /// - a leading digit gets a `_` before it, and an empty name is `_`;
    /// - leading underscores become one: `__name__` is `_name__`;
    /// - `le` and `quantile`, the labels of histogram buckets and summary quantiles, are `_le`
    ///   and `_quantile`.
    public static func labelName(_ sent: ArraySlice<UInt8>) -> [UInt8] {
        var name = [UInt8]()
        name.reserveCapacity(sent.count + 2)
        if let first = sent.first, first &- 48 < 10 { name.append(UInt8(ascii: "_")) }
        appendSnakeCase(sent, into: &name)
        let underscores = name.prefix { $0 == UInt8(ascii: "_") }.count
        if underscores > 1 { name.removeFirst(underscores - 1) }
        if name.isEmpty { name = [UInt8(ascii: "_")] }
        if name.elementsEqual("le".utf8) || name.elementsEqual("quantile".utf8) {
            name.insert(UInt8(ascii: "_"), at: 0)
        }
        return name
    }
}

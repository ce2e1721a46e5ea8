// What a flush reports: the ended interval's table summarised series by series. Runs on the
// formatter's thread, off the ingest path.

/// One of loopd's own metrics (`loopd.*`), reported in every flush beside the series.
public struct InternalMetric: Sendable, Equatable {
    /// The name, `loopd.` included.
    public var name: String
    /// A counter (the interval's count, and `total` since start) or a gauge (`value`).
    public var kind: MetricKind
    /// The interval's count for a counter; the value for a gauge.
    public var value: Double
    /// For a counter, the count since start (Prometheus reports this one).
    public var total: Double

    /// Creates a metric.
    public init(name: String, kind: MetricKind, value: Double, total: Double = 0) {
        self.name = name
        self.kind = kind
        self.value = value
        self.total = total
    }
}

/// The statistics of one series' samples over an interval (timers, histograms, distributions).
public struct SampleStats: Sendable, Equatable {
    /// The number of samples received (not scaled by sample rates).
    public var samples: Int
    /// Their sum, each sample counted 1/rate times as the series' count counts it.
    public var sum: Double
    /// The smallest and largest sample.
    public var min, max: Double
    /// `sum` over the count scaled by sample rates: the mean, whatever the rates.
    public var mean: Double
    /// The population standard deviation of the samples, each counted 1/rate times. Not
    /// finite when `sumSquares` is not: outputs leave both out then.
    public var stddev: Double
    /// The sum of the samples' squares, each counted 1/rate times; infinite when a sample's
    /// square overflows (beyond ±1.3e154).
    public var sumSquares: Double
    /// The percentiles asked for, in the order asked: for p, the nearest-rank percentile, the
    /// smallest sample with at least p% of the samples at or below it. Exact for a series with
    /// at most `SeriesTable.exactSamples` samples in the interval; beyond, within
    /// `QuantileSketch.relativeAccuracy` of that sample (`approximate`).
    public var percentiles: [Percentile]
    /// Whether `percentiles` (and a histogram's buckets) come from a quantile sketch.
    public var approximate: Bool
    /// With `Flush.summaries(trimmed: true)`: the median as etsy's StatsD computes it (the
    /// middle sample, or the mean of the two middle ones), and for each percentile p the
    /// statistics of the lowest round(p% of the samples) (etsy's `count_90`, `mean_90`,
    /// `upper_90`, `sum_90`, `sum_squares_90`; a percentile that takes no sample is left out).
    /// From the sketch, within its accuracy, when `approximate`.
    public var median: Double?
    /// See `median`.
    public var trimmed: [Trimmed] = []
    /// With `Flush.summaries(trimmed: true)`: the sum, the sum of squares and the population
    /// standard deviation of the samples as received, unscaled by sample rates, as etsy's
    /// StatsD computes its `sum`, `sum_squares`, `mean` and `std` (its `count` is scaled).
    public var unscaled: Unscaled?

    /// Statistics of the samples as received, unscaled by sample rates.
    public struct Unscaled: Sendable, Equatable {
        /// The sum, the sum of squares and the population standard deviation.
        public var sum, sumSquares, stddev: Double
    }

    /// The statistics of the lowest samples, up to a percentile (etsy's `mean_90` and kin).
    public struct Trimmed: Sendable, Equatable {
        /// The percentile.
        public var p: Double
        /// The number of samples taken: round(p% of the samples), halves up.
        public var count: Int
        /// Their sum and the sum of their squares (samples unscaled by rates, as etsy sums them).
        public var sum, sumSquares: Double
        /// The largest of them.
        public var upper: Double

        /// Creates trimmed statistics.
        public init(p: Double, count: Int, sum: Double, sumSquares: Double, upper: Double) {
            (self.p, self.count, self.sum, self.sumSquares, self.upper) = (p, count, sum, sumSquares, upper)
        }
    }

    /// One percentile.
    public struct Percentile: Sendable, Equatable {
        /// The percentile asked for, in (0, 100].
        public var p: Double
        /// Its value.
        public var value: Double

        /// Creates a percentile.
        public init(p: Double, value: Double) { (self.p, self.value) = (p, value) }

        /// The name outputs give it: `p50`, `p99_9` (a `.` would be a separator in Graphite).
        public var name: String {
            var text = p == p.rounded() ? String(Int(p)) : String(p)
            text = String(text.map { $0 == "." ? "_" : $0 })
            return "p" + text
        }
    }

    /// Creates statistics.
    public init(
        samples: Int, sum: Double, min: Double, max: Double, mean: Double, stddev: Double = 0, sumSquares: Double = 0,
        percentiles: [Percentile], approximate: Bool = false
    ) {
        (self.samples, self.sum, self.min, self.max, self.mean) = (samples, sum, min, max, mean)
        (self.stddev, self.sumSquares, self.percentiles, self.approximate) = (
            stddev, sumSquares, percentiles, approximate
        )
    }

    /// The value of percentile `p`, if it was asked for.
    public func percentile(_ p: Double) -> Double? { percentiles.first { $0.p == p }?.value }
}

/// One series in a flush.
public struct Summary: Sendable, Equatable {
    /// The series' index in the flushed table.
    public var series: Int
    /// Its kind.
    public var kind: MetricKind
    /// Whether a line for it arrived in the interval.
    public var hasData: Bool
    /// Counter: the interval's count (scaled by 1/rate). Gauge: the value. Set: distinct
    /// members in the interval. Sampled kinds: the interval's count, scaled by 1/rate.
    public var value: Double
    /// Counters and sampled kinds: the count since the series was created.
    public var total: Double
    /// Sampled kinds: the sum of values since the series was created, each counted 1/rate times
    /// as `total` counts it.
    public var totalSum: Double
    /// Sampled kinds with samples in the interval: their statistics.
    public var stats: SampleStats?
    /// Sampled kinds with samples in the interval, when `Flush.summaries(bucketBounds:)` was
    /// given bounds: for each of `bucketBounds`, the interval's samples at or below it, scaled
    /// as `value` is (each count times `value / samples`, so that a count of all the samples is
    /// `value`). Empty otherwise.
    public var buckets: [Double] = []
    /// Sampled kinds, when `Flush.summaries(bucketBounds:)` was given bounds: the series' bucket
    /// bounds (its mapping rule's, or those given), whether or not it has samples. Empty
    /// otherwise.
    public var bucketBounds: [Double] = []
}

/// A flushed interval: the table as it stood when the interval ended, and loopd's own metrics.
public struct Flush: Sendable {
    /// The table of the ended interval.
    public let table: SeriesTable
    /// When the interval ended, in seconds since 1970.
    public let timestamp: Double
    /// The interval's length in seconds.
    public let intervalSeconds: Double
    /// loopd's own metrics.
    public let internalMetrics: [InternalMetric]
    /// The interval's DogStatsD events, in arrival order.
    public let events: [DogStatsDEvent]
    /// The interval's DogStatsD service checks, in arrival order.
    public let serviceChecks: [DogStatsDServiceCheck]

    /// Creates a flush.
    public init(
        table: SeriesTable, timestamp: Double, intervalSeconds: Double, internalMetrics: [InternalMetric],
        events: [DogStatsDEvent] = [], serviceChecks: [DogStatsDServiceCheck] = []
    ) {
        self.table = table
        self.timestamp = timestamp
        self.intervalSeconds = intervalSeconds
        self.internalMetrics = internalMetrics
        self.events = events
        self.serviceChecks = serviceChecks
    }

    /// The percentiles reported when none are configured.
    public static let defaultPercentiles: [Double] = [50, 90, 95, 99]

    /// Every series of the table, in table order, with its sampled kinds' statistics and, for
    /// each of `bucketBounds` (ascending; or of its mapping rule's `buckets`, if it has some and
    /// `bucketBounds` is not empty), the interval's samples at or below it. A timer's
    /// samples are compared in seconds (their value / 1000: timers are sent in milliseconds),
    /// the other kinds' as sent. `percentiles` are those of a series whose mapping rule gives
    /// none.
    ///
    /// - Complexity: O(n log n) in the interval's samples (they are sorted), plus O(bounds +
    ///   percentiles) per sampled series, plus O(bins) per sketch.
    public func summaries(
        bucketBounds: [Double] = [], percentiles: [Double] = Flush.defaultPercentiles, trimmed: Bool = false
    ) -> [Summary] {
        var made: [Summary] = []
        summaries(into: &made, bucketBounds: bucketBounds, percentiles: percentiles, trimmed: trimmed)
        return made
    }

    /// `summaries(bucketBounds:percentiles:trimmed:)`, written into `summaries` in place of what
    /// it held. Its storage is reused when no other array shares it and it has room, so that a
    /// flush that keeps the array from one flush to the next takes no new block for its
    /// summaries (184 bytes a series) while the series do not outgrow it. Storage that must grow
    /// takes an eighth more room than the series need, so that a table that grows slowly does
    /// not make it grow at every flush. Storage with room for more than twice the series and
    /// 1,024 more is let go first: it holds no more than that after a flush.
    public func summaries(
        into summaries: inout [Summary], bucketBounds: [Double] = [],
        percentiles: [Double] = Flush.defaultPercentiles, trimmed: Bool = false
    ) {
        var samples = table.samples
        samples.sort { $0.series != $1.series ? $0.series < $1.series : $0.value < $1.value }
        var stats = [Int32: SampleStats]()
        var buckets = [Int32: [Double]]()
        var start = 0
        while start < samples.count {
            var end = start
            let series = samples[start].series
            let index = Int(series)
            while end < samples.count && samples[end].series == series { end += 1 }
            let scaledCount = table.sums[index].current
            let asked = table.seriesOptions(index).percentiles ?? percentiles
            var found: [SampleStats.Percentile] = []
            found.reserveCapacity(asked.count)
            let exactCount = end - start
            let sketch: QuantileSketch? = table.sketches[series].map { sketch in
                var all = sketch
                for sample in samples[start..<end] { all.add(sample.value) }
                return all
            }
            let count = sketch.map { Int($0.count) } ?? exactCount
            for p in asked {
                // The nearest rank: ceil(count * p / 100), at least 1.
                let rank = Swift.max(1, Int((Double(count) * p / 100).rounded(.up)))
                let value =
                    sketch?.quantile(rank: UInt64(Swift.min(rank, count)))
                    ?? samples[start + Swift.min(rank, exactCount) - 1].value
                found.append(SampleStats.Percentile(p: p, value: value))
            }
            // The sum as recorded, in arrival order (see `SeriesTable.intervalSum`).
            let sum = table.intervalSum[index]
            // Values beyond ±1.3e154 overflow the squares (and differences of ±1e308 overflow
            // Welford's update): the deviation is then unknown, shown by no output.
            let m2 = table.intervalM2[index]
            let variance =
                m2.isFinite && table.intervalSumSquares[index].isFinite ? Swift.max(0, m2 / scaledCount) : .nan
            stats[series] = SampleStats(
                samples: count, sum: sum, min: sketch?.min ?? samples[start].value,
                max: sketch?.max ?? samples[end - 1].value, mean: sum / scaledCount, stddev: variance.squareRoot(),
                sumSquares: table.intervalSumSquares[index], percentiles: found, approximate: sketch != nil)
            if trimmed {
                stats[series]!.median = Self.median(samples[start..<end], sketch)
                if let sketch {
                    let (sum, squares) = sketch.lowest(UInt64(count))
                    let mean = sum / Double(count)
                    stats[series]!.unscaled = .init(
                        sum: sum, sumSquares: squares,
                        stddev: Swift.max(0, squares / Double(count) - mean * mean).squareRoot())
                } else {
                    var (sum, squares, deviations) = (0.0, 0.0, 0.0)
                    for sample in samples[start..<end] {
                        sum += sample.value
                        squares += sample.value * sample.value
                    }
                    let mean = sum / Double(count)
                    for sample in samples[start..<end] { deviations += (sample.value - mean) * (sample.value - mean) }
                    stats[series]!.unscaled = .init(
                        sum: sum, sumSquares: squares, stddev: (deviations / Double(count)).squareRoot())
                }
                stats[series]!.trimmed = asked.compactMap { p in
                    // JavaScript's Math.round: halves up; one sample is every percentile's.
                    let n = count == 1 ? 1 : Int((Double(count) * p / 100 + 0.5).rounded(.down))
                    guard n > 0 else { return nil }
                    if let sketch {
                        let (sum, squares) = sketch.lowest(UInt64(n))
                        return .init(
                            p: p, count: n, sum: sum, sumSquares: squares, upper: sketch.quantile(rank: UInt64(n)))
                    }
                    var (sum, squares) = (0.0, 0.0)
                    for sample in samples[start..<(start + n)] {
                        sum += sample.value
                        squares += sample.value * sample.value
                    }
                    return .init(p: p, count: n, sum: sum, sumSquares: squares, upper: samples[start + n - 1].value)
                }
            }
            if !bucketBounds.isEmpty {
                let scale = scaledCount / Double(count)
                let unit = table.kind(index) == .timer ? 1000.0 : 1
                let bounds = table.seriesOptions(index).buckets ?? bucketBounds
                var counts = [Double]()
                counts.reserveCapacity(bounds.count)
                var below = start
                for bound in bounds {
                    if let sketch {
                        counts.append(Double(sketch.count(atOrBelow: bound * unit)) * scale)
                    } else {
                        while below < end && samples[below].value / unit <= bound { below += 1 }
                        counts.append(Double(below - start) * scale)
                    }
                }
                buckets[series] = counts
            }
            start = end
        }
        if summaries.capacity > 2 * table.count + 1024 {
            summaries = []
        } else {
            summaries.removeAll(keepingCapacity: true)
        }
        if summaries.capacity < table.count { summaries.reserveCapacity(table.count + table.count / 8) }
        let interval = table.interval
        // The columns in place: each read of an array checks its bounds.
        table.withCopyColumns { columns in
            for series in 0..<columns.count {
                let kind = columns.kind(series)
                let sums = columns.sums[series]
                let value = kind == .set ? Double(table.setMembers[Int32(series)]?.count ?? 0) : sums.current
                // Only sampled kinds have statistics and buckets: the others look up neither
                // dictionary (each look-up hashes the index).
                let sampled = kind.isSampled
                summaries.append(
                    Summary(
                        series: series, kind: kind, hasData: columns.lastSeen[series] == interval, value: value,
                        total: sums.total, totalSum: columns.totalSum[series],
                        stats: sampled ? stats[Int32(series)] : nil,
                        buckets: sampled ? buckets[Int32(series)] ?? [] : [],
                        bucketBounds: sampled && !bucketBounds.isEmpty
                            ? table.seriesOptions(series).buckets ?? bucketBounds : []))
            }
        }
    }

    /// etsy StatsD's median of sorted samples: the middle one, or the mean of the two middle ones.
    private static func median(_ sorted: ArraySlice<Sample>, _ sketch: QuantileSketch?) -> Double {
        if let sketch {
            let count = sketch.count
            let upper = sketch.quantile(rank: count / 2 + 1)
            return count % 2 == 1 ? upper : (sketch.quantile(rank: count / 2) + upper) / 2
        }
        let middle = sorted.startIndex + sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle].value : (sorted[middle - 1].value + sorted[middle].value) / 2
    }

    /// The name of series `index`: its key without the kind and the tags.
    public func name(_ index: Int) -> ArraySlice<UInt8> {
        let key = table.key(index).dropFirst()
        return key[..<(key.firstIndex(of: UInt8(ascii: "|")) ?? key.endIndex)]
    }

    /// Calls `body` with the name of series `index` and its tags, sorted, each as sent and
    /// separated by commas (empty if it has none), in place: one look-up and no copy, for the
    /// formats that write every series.
    func withNameAndTags<Result>(
        _ index: Int, _ body: (_ name: UnsafeRawBufferPointer, _ tags: UnsafeRawBufferPointer) -> Result
    ) -> Result {
        table.withKey(index) { key in
            // The kind, the name, then `|#` and the tags if there are any. Eight bytes at a
            // time: byte by byte, this search was about 67 instructions a series.
            let bar = firstIndex(of: UInt8(ascii: "|"), in: key, from: 1, to: key.count)
            let tags = Swift.min(bar + 2, key.count)
            return body(UnsafeRawBufferPointer(rebasing: key[1..<bar]), UnsafeRawBufferPointer(rebasing: key[tags...]))
        }
    }

    /// The tags of series `index`, sorted, each as sent (`key:value` or `key`).
    public func tags(_ index: Int) -> [ArraySlice<UInt8>] { Self.tags(ofKey: table.key(index)) }

    /// The tags of a series' canonical key, sorted, each as sent.
    static func tags(ofKey key: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        let key = key.dropFirst()
        guard let bar = key.firstIndex(of: UInt8(ascii: "|")) else { return [] }
        return key[(bar + 2)...].split(separator: UInt8(ascii: ","))
    }
}

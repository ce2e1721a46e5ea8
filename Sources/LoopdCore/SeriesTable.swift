// The series table: every series loopd knows, and what the current interval recorded for it.
// Standard library only (the fuzz target compiles it with the parser).

/// One timer, histogram or distribution sample of the current interval.
public struct Sample: Sendable, Equatable {
    /// The series' index in the table.
    public var series: Int32
    /// The value.
    public var value: Double
}

/// What a mapping rule overrides for the series it maps; nil: the global setting.
public struct SeriesOptions: Sendable, Equatable {
    /// The percentiles to report for a sampled series (timers, histograms, distributions).
    public var percentiles: [Double]?
    /// The bucket bounds of a sampled series' Prometheus histogram.
    public var buckets: [Double]?

    /// Creates options (nil: the global setting).
    public init(percentiles: [Double]? = nil, buckets: [Double]? = nil) {
        self.percentiles = percentiles
        self.buckets = buckets
    }
}

/// Every series loopd knows, indexed by canonical key, and the current interval's aggregates.
///
/// A value type whose storage is a handful of flat arrays, so that a flush is a copy of the
/// struct (the arrays are shared, copy-on-write) and the loop thread goes on recording into its
/// own copy while a formatter reads the old one on another thread.
///
/// - Series are found with an open-addressing hash table over the keys' bytes; recording into
///   a known series allocates nothing (a timer sample appends to one array, which grows
///   geometrically and keeps its capacity from one interval to the next).
/// - No aggregate ever becomes infinite or NaN: a line that would make one so is not recorded
///   (`Outcome.nonFinite`), so that every output carries finite numbers only.
/// - Memory per counter series: its key's bytes, plus 48 bytes of columns and 8 to 16 of index
///   (two to four 4-byte slots). A key is at most the parser's `maxLineLength` bytes, so the key
///   store holds at most `maxSeries` times that.
public struct SeriesTable: Sendable {
    /// The most series the table holds; a line for a new series beyond it is dropped.
    public let maxSeries: Int
    /// The number of the current interval (the first is 1).
    public private(set) var interval: UInt32 = 1

    // Columns, indexed by series. A key is the parser's canonical key: the kind's raw value,
    // the name, and "|#" plus the sorted tags if any.
    private(set) var keyBytes: [UInt8] = []
    /// Where each key ends in `keyBytes`. Full-width offsets: the key store can outgrow 4 GiB
    /// with valid flags (`--max-line 65536` and the default `--max-series` reach it at 65,536
    /// long keys), and 32-bit offsets trapped there.
    private(set) var keyEnds: [KeyOffset] = []
    private var hashes: [UInt32] = []
    /// The interval of the series' last line.
    private(set) var lastSeen: [UInt32] = []
    /// Each series' `current` and `total`, side by side: a counter line writes both, and one
    /// array is one check that it is not shared.
    private(set) var sums: [Sums] = []
    /// Sampled kinds: the sum of the values since the series was created, each value counted
    /// 1/rate times, as the count counts it.
    private(set) var totalSum: [Double] = []
    /// Sampled kinds: this interval's sum of the values, each counted 1/rate times as the count
    /// counts it, in arrival order. Kept here rather than
    /// summed at the flush so that the line that would overflow it is the one refused: summed
    /// in sorted order, finite samples that arrived as +x, -x, +x, -x… could overflow.
    private(set) var intervalSum: [Double] = []
    /// Sampled kinds: this interval's sum of the squares of the values, each counted 1/rate
    /// times. The one aggregate that may not be finite (values beyond ±1.3e154): outputs leave
    /// it out then, with the standard deviation.
    private(set) var intervalSumSquares: [Double] = []
    /// Sampled kinds: this interval's sum of squared differences from the mean, each value
    /// counted 1/rate times (West's weighted form of Welford's update, which loses no precision
    /// to cancellation as sum-of-squares minus squared sum does): the variance is this over the
    /// scaled count.
    private(set) var intervalM2: [Double] = []
    /// Sampled kinds: the samples received in this interval (not scaled). Past `exactSamples`,
    /// a series' further samples go to its sketch.
    private(set) var intervalSamples: [UInt32] = []
    /// A series' two running sums.
    struct Sums: Sendable {
        /// Counters: this interval's sum. Gauges: the value. Sampled kinds: this interval's
        /// count, scaled by 1/rate. Sets: unused.
        var current = 0.0
        /// Counters and sampled kinds: the count since the series was created (Prometheus'
        /// cumulative counters, which never decrease: a counter's negative increments are left
        /// out of it); gauges and sets: unused.
        var total = 0.0
    }

    /// The quantile sketches of the series that received more than `exactSamples` samples in
    /// this interval: their samples beyond the first `exactSamples`.
    private(set) var sketches: [Int32: QuantileSketch] = [:]
    /// Negative counter values recorded since the table was created: they count in the
    /// interval's sum but not in `total`, Prometheus' counter, which never decreases.
    private(set) var negativeCounterValues: UInt64 = 0
    /// Open addressing, linear probing: a series index or -1. Its count is a power of two, at
    /// least twice the number of series.
    private var slots: [Int32] = Array(repeating: -1, count: 64)

    /// Each series' options: an index into `optionSets` (0: the global ones).
    private(set) var options: [UInt16] = []
    /// The option sets that mapping rules give their series; the first has no overrides.
    /// Sets are only added (a reload adds its rules'), so that a series keeps a valid index.
    public private(set) var optionSets: [SeriesOptions] = [SeriesOptions()]
    /// The series that the last `record(_:)` recorded into (-1 before any).
    public private(set) var lastSeries = -1

    /// The samples of the current interval, in arrival order.
    private(set) var samples: [Sample] = []
    /// The hashes of the members of each set series seen in the current interval.
    private(set) var setMembers: [Int32: Set<UInt64>] = [:]

    /// The samples of one series kept exactly per interval; beyond them, a series' samples go
    /// to a `QuantileSketch`, so that a series holds at most this many 16-byte samples plus one
    /// sketch, however many samples it receives.
    public static let exactSamples = 1024

    /// The type of the key store's offsets.
    typealias KeyOffset = Int

    /// The most key bytes the table's offsets can address: more than any valid `--max-series`
    /// times any valid key length.
    @_spi(Testing) public static let keyStoreLimit: Int = Int(KeyOffset.max)

    /// Creates an empty table.
    ///
    /// - Precondition: `maxSeries` is positive.
    public init(maxSeries: Int) {
        guard maxSeries > 0 else { fatalError("SeriesTable(maxSeries:): maxSeries must be > 0, got \(maxSeries)") }
        self.maxSeries = maxSeries
    }

    /// The number of series.
    public var count: Int { keyEnds.count }

    /// The bytes the table's storage holds (capacities, not counts), index and samples included:
    /// what it costs in memory, reported as `loopd.table_bytes`.
    public var storageBytes: Int {
        keyBytes.capacity + 4 * (hashes.capacity + lastSeen.capacity + slots.capacity)
            + MemoryLayout<KeyOffset>.stride * keyEnds.capacity + 2 * options.capacity
            + MemoryLayout<Sums>.stride * sums.capacity + 8 * (totalSum.capacity + intervalSum.capacity)
            + 8 * (intervalSumSquares.capacity + intervalM2.capacity) + 4 * intervalSamples.capacity
            + sketches.reduce(sketches.capacity * 16) { $0 + $1.value.storageBytes }
            + MemoryLayout<Sample>.stride * samples.capacity
            + setMembers.reduce(setMembers.capacity * 32) { $0 + $1.value.capacity * 8 }
    }

    /// The canonical key of series `index`.
    public func key(_ index: Int) -> ArraySlice<UInt8> {
        keyBytes[(index == 0 ? 0 : Int(keyEnds[index - 1]))..<Int(keyEnds[index])]
    }

    /// Calls `body` with the canonical key of series `index`, in place.
    func withKey<Result>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let range = (index == 0 ? 0 : Int(keyEnds[index - 1]))..<Int(keyEnds[index])
        return keyBytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The kind of series `index`.
    public func kind(_ index: Int) -> MetricKind {
        MetricKind(rawValue: keyBytes[index == 0 ? 0 : Int(keyEnds[index - 1])])!
    }

    // MARK: Recording

    /// What `record(_:)` did with a parsed line.
    public enum Outcome: Sendable, Equatable {
        /// Recorded into a series that already existed.
        case recorded
        /// Recorded into a new series.
        case created
        /// Dropped: the line was for a new series and the table holds `maxSeries`.
        case tableFull
        /// Dropped: recording the line would have made one of its series' aggregates (a
        /// counter's sum or total, a gauge's value, a timer's scaled count, sum or total sum)
        /// infinite or NaN. The series is as it was; a new series is not created.
        case nonFinite
    }

    /// Records a parsed line into its series, creating the series if need be.
    public mutating func record(_ line: ParsedLine) -> Outcome {
        let key = line.key
        let hash = line.keyHash
        let hash32 = UInt32(truncatingIfNeeded: hash >> 32)
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let series = Int(slots[slot])
            if series < 0 {
                guard count < maxSeries else { return .tableFull }
                guard let next = Self.aggregates(line, from: Aggregates()) else { return .nonFinite }
                lastSeries = insert(key, hash32, at: slot)
                apply(line, next, to: lastSeries)
                return .created
            }
            if hashes[series] == hash32 && keyEquals(series, key) {
                if line.kind == .counter { return recordCounter(line, into: series) }
                guard let next = Self.aggregates(line, from: aggregates(of: series, kind: line.kind)) else {
                    return .nonFinite
                }
                apply(line, next, to: series)
                lastSeries = series
                return .recorded
            }
            slot = (slot + 1) & mask
        }
    }

    /// The aggregates of `series`, of kind `kind`, as they stand.
    @inline(__always)
    private func aggregates(of series: Int, kind: MetricKind) -> Aggregates {
        var now = Aggregates(
            current: sums[series].current, total: sums[series].total, totalSum: totalSum[series],
            intervalSum: intervalSum[series])
        if kind.isSampled { (now.sumSquares, now.m2) = (intervalSumSquares[series], intervalM2[series]) }
        return now
    }

    // Inlined: a call would copy the whole table (its 168 bytes of fields) out of the
    // `mutating` caller first, with a call to memcpy, on every line.
    @inline(__always)
    private func keyEquals(_ series: Int, _ key: UnsafeRawBufferPointer) -> Bool {
        let start = series == 0 ? 0 : Int(keyEnds[series - 1])
        let end = Int(keyEnds[series])
        guard end - start == key.count else { return false }
        return keyBytes.withUnsafeBytes { equalBytes($0.baseAddress! + start, key.baseAddress!, key.count) }
    }

    /// Whether series `series`'s key is `kind`'s byte and then `name`.
    @inline(__always)
    private func keyEquals(_ series: Int, kind: MetricKind, name: UnsafeRawBufferPointer) -> Bool {
        let start = series == 0 ? 0 : Int(keyEnds[series - 1])
        let end = Int(keyEnds[series])
        guard end - start == name.count + 1 else { return false }
        return keyBytes.withUnsafeBytes {
            $0[start] == kind.rawValue && equalBytes($0.baseAddress! + start + 1, name.baseAddress!, name.count)
        }
    }

    private mutating func insert(_ key: UnsafeRawBufferPointer, _ hash32: UInt32, at slot: Int) -> Int {
        let series = count
        keyBytes.append(contentsOf: key)
        appendColumns(hash32, lastSeen: interval)
        slots[slot] = Int32(series)
        if count * 2 > slots.count { rebuildIndex(capacity: slots.count * 2) }
        return series
    }

    /// A new series' columns, its key's bytes being the last in `keyBytes`.
    private mutating func appendColumns(_ hash32: UInt32, lastSeen seen: UInt32) {
        keyEnds.append(KeyOffset(keyBytes.count))
        hashes.append(hash32)
        lastSeen.append(seen)
        sums.append(Sums())
        totalSum.append(0)
        intervalSum.append(0)
        intervalSumSquares.append(0)
        intervalM2.append(0)
        intervalSamples.append(0)
        options.append(0)
    }

    /// Marks `series` as seen in this interval. Most lines find it marked already: a read then
    /// saves the write's copy-on-write check.
    @inline(__always)
    private mutating func markSeen(_ series: Int) {
        if lastSeen[series] != interval { lastSeen[series] = interval }
    }

    /// Records a counter line into its existing series: the most common line, done here without
    /// the general path's copies of every aggregate and its calls.
    @inline(__always)
    private mutating func recordCounter(_ line: ParsedLine, into series: Int) -> Outcome {
        let sums = Self.counterSums(line.values)
        return addToCounter(
            series, sum: sums.sum / line.sampleRate, increase: sums.increase / line.sampleRate,
            negatives: sums.negatives)
    }

    /// Adds a counter line's scaled sums to its existing series; the series is unchanged if
    /// either aggregate would not be finite.
    @inline(__always)
    private mutating func addToCounter(_ series: Int, sum: Double, increase: Double, negatives: UInt64) -> Outcome {
        let nextCurrent = sums[series].current + sum
        let nextTotal = sums[series].total + increase
        guard nextCurrent.isFinite && nextTotal.isFinite else { return .nonFinite }
        markSeen(series)
        sums[series] = Sums(current: nextCurrent, total: nextTotal)
        negativeCounterValues &+= negatives
        lastSeries = series
        return .recorded
    }

    /// Records the line `name:value|type` (one value, finite and not negative; no rate, no
    /// tags; not a set) into its series, as `record(_:)` would, if the series exists: the path
    /// of a plain line (`StatsDParser.plainLine(_:from:)`), which finds the series by its kind
    /// and its name in the line, with no key made. False, and the table unchanged, if there is
    /// no such series, if an aggregate would not be finite, or if a counter's two sums are too
    /// far apart for the one check this path makes: `record(_:)` then creates the series,
    /// refuses the line or records it.
    @inline(__always)
    @_spi(Testing) public mutating func recordPlain(
        _ kind: MetricKind, name: UnsafeRawBufferPointer, hash: UInt64, value: Double
    ) -> Bool {
        assert(kind != .set && value >= 0 && value.isFinite, "SeriesTable.recordPlain: not a plain line's value")
        let hash32 = UInt32(truncatingIfNeeded: hash &>> 32)
        let mask = slots.count &- 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let series = Int(slots[slot])
            if series < 0 { return false }
            if hashes[series] == hash32 && keyEquals(series, kind: kind, name: name) {
                if kind == .counter {
                    // Its sums are the value itself (not negative; the rate is 1). One check
                    // for both: a difference is finite only if both terms are, and a finite
                    // pair whose difference overflows is left to `record(_:)`.
                    let nextCurrent = sums[series].current + value
                    let nextTotal = sums[series].total + value
                    guard (nextCurrent - nextTotal).isFinite else { return false }
                    markSeen(series)
                    sums[series] = Sums(current: nextCurrent, total: nextTotal)
                    lastSeries = series
                    return true
                }
                return recordPlain(kind, value, hash: hash, into: series)
            }
            slot = (slot &+ 1) & mask
        }
    }

    /// `recordPlain(_:name:hash:value:)` once the series is found, for the kinds other than
    /// counters: the general path, with the line's one value. Not inlined, so that its
    /// closures leave the counter's path to the optimizer.
    @inline(never)
    private mutating func recordPlain(_ kind: MetricKind, _ value: Double, hash: UInt64, into series: Int) -> Bool {
        withUnsafePointer(to: value) { value in
            withUnsafePointer(to: false) { isDelta in
                let line = ParsedLine(
                    kind: kind, sampleRate: 1, values: UnsafeBufferPointer(start: value, count: 1),
                    isDelta: UnsafeBufferPointer(start: isDelta, count: 1),
                    members: UnsafeBufferPointer(start: nil, count: 0),
                    key: UnsafeRawBufferPointer(start: nil, count: 0),
                    keyHash: hash)
                guard let next = Self.aggregates(line, from: aggregates(of: series, kind: kind)) else { return false }
                apply(line, next, to: series)
                lastSeries = series
                return true
            }
        }
    }

    /// A counter line's values: their sum (the interval's), the sum of the positive ones (the
    /// total's, which Prometheus reads as a counter that never decreases), and how many are
    /// negative.
    @inline(__always)
    private static func counterSums(
        _ values: UnsafeBufferPointer<Double>
    ) -> (sum: Double, increase: Double, negatives: UInt64) {
        var sum = 0.0
        var increase = 0.0
        var negatives: UInt64 = 0
        for value in values {
            sum += value
            if value > 0 {
                increase += value
            } else if value < 0 {
                negatives &+= 1
            }
        }
        return (sum, increase, negatives)
    }

    /// A series' numeric aggregates: the columns of the same names.
    private struct Aggregates {
        var current = 0.0
        var total = 0.0
        var totalSum = 0.0
        var intervalSum = 0.0
        var sumSquares = 0.0
        var m2 = 0.0
        /// Counters: the negative values of the line being recorded (not a column).
        var negatives: UInt64 = 0
    }

    /// The aggregates of a series at `now` once `line` is recorded, or nil if
    /// one of them would not be finite. Values are finite (the parser refuses others), so a
    /// sum that overflowed stays infinite: checking the results is enough.
    @inline(__always)
    private static func aggregates(_ line: ParsedLine, from now: Aggregates) -> Aggregates? {
        var next = now
        let rate = line.sampleRate
        switch line.kind {
        case .counter:
            let sums = counterSums(line.values)
            next.negatives = sums.negatives
            next.current += sums.sum / rate
            next.total += sums.increase / rate
            guard next.current.isFinite && next.total.isFinite else { return nil }
        case .gauge:
            for (value, delta) in zip(line.values, line.isDelta) {
                next.current = delta ? next.current + value : value
            }
            guard next.current.isFinite else { return nil }
        case .timer, .histogram, .distribution:
            // A sample sent at rate r stands for 1/r samples: the sums scale as the count does,
            // so that sum / count is the mean whatever the rates.
            let weight = 1 / rate
            var mean = next.current > 0 ? next.intervalSum / next.current : 0
            var scaledCount = next.current
            for value in line.values {
                next.totalSum += value / rate
                next.intervalSum += value / rate
                next.sumSquares += value * value / rate
                scaledCount += weight
                let delta = value - mean
                mean += delta * (weight / scaledCount)
                next.m2 += weight * delta * (value - mean)
            }
            let scaled = Double(line.values.count) / rate
            next.current += scaled
            next.total += scaled
            guard
                next.current.isFinite && next.total.isFinite && next.totalSum.isFinite && next.intervalSum.isFinite
            else { return nil }
        // The squares of values beyond ±1.3e154 overflow: the line is kept, and outputs leave
        // out the sum of squares and the standard deviation while they are not finite.
        case .set: break
        }
        return next
    }

    /// Records `line` into `series`, whose aggregates become `next`.
    private mutating func apply(_ line: ParsedLine, _ next: Aggregates, to series: Int) {
        markSeen(series)
        switch line.kind {
        case .counter:
            sums[series] = Sums(current: next.current, total: next.total)
            negativeCounterValues &+= next.negatives
        case .gauge:
            sums[series].current = next.current
        case .timer, .histogram, .distribution:
            for value in line.values {
                if intervalSamples[series] < Self.exactSamples {
                    samples.append(Sample(series: Int32(series), value: value))
                    intervalSamples[series] &+= 1
                } else {
                    sketches[Int32(series), default: QuantileSketch()].add(value)
                }
            }
            sums[series] = Sums(current: next.current, total: next.total)
            totalSum[series] = next.totalSum
            intervalSum[series] = next.intervalSum
            intervalSumSquares[series] = next.sumSquares
            intervalM2[series] = next.m2
        case .set:
            for member in line.members { setMembers[Int32(series), default: []].insert(member) }
        }
    }

    /// Rebuilds the index from the keys' hashes, with `capacity` slots (a power of two).
    private mutating func rebuildIndex(capacity: Int) {
        var slots = [Int32](repeating: -1, count: capacity)
        let mask = capacity - 1
        for series in 0..<count {
            let keyStart = series == 0 ? 0 : Int(keyEnds[series - 1])
            let hash = keyBytes.withUnsafeBytes {
                StatsDParser.keyHash(UnsafeRawBufferPointer(rebasing: $0[keyStart..<Int(keyEnds[series])]))
            }
            var slot = Int(truncatingIfNeeded: hash) & mask
            while slots[slot] >= 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(series)
        }
        self.slots = slots
    }

    // MARK: Options

    /// The index of `options` in `optionSets`, added if new. Past 65,535 sets (reloads that
    /// each bring new ones), the global options (0).
    public mutating func optionSet(_ options: SeriesOptions) -> UInt16 {
        if let index = optionSets.firstIndex(of: options) { return UInt16(index) }
        guard optionSets.count <= Int(UInt16.max) else { return 0 }
        optionSets.append(options)
        return UInt16(optionSets.count - 1)
    }

    /// Gives series `series` the option set `set` (an index into `optionSets`).
    public mutating func setOptions(_ set: UInt16, series: Int) {
        if options[series] != set { options[series] = set }
    }

    /// The options of series `series`.
    public func seriesOptions(_ series: Int) -> SeriesOptions { optionSets[Int(options[series])] }

    // MARK: Intervals

    /// Ends the current interval: returns the table as it stands (for a formatter to read on any
    /// thread) and starts the next interval, in which counters, samples and sets start empty and
    /// gauges keep their values. Series without a line in the last `expireAfter` intervals are
    /// removed (0: never).
    ///
    /// - Complexity: O(series) on the calling thread (a reset pass, and a rebuild if a series
    ///   expired); formatting the returned table is the formatter's.
    public mutating func endInterval(expireAfter: UInt32) -> SeriesTable {
        let ended = self
        let sampleCapacity = samples.count
        samples = []
        samples.reserveCapacity(sampleCapacity)
        setMembers = [:]
        sketches = [:]
        var expired = 0
        for series in 0..<count {
            if kind(series) != .gauge {
                sums[series].current = 0
                intervalSum[series] = 0
                intervalSumSquares[series] = 0
                intervalM2[series] = 0
                intervalSamples[series] = 0
            }
            if expireAfter > 0 && interval &- lastSeen[series] >= expireAfter { expired += 1 }
        }
        if expired > 0 { removeIdle(expireAfter: expireAfter, keeping: count - expired) }
        interval &+= 1
        return ended
    }

    private mutating func removeIdle(expireAfter: UInt32, keeping: Int) {
        var next = SeriesTable(maxSeries: maxSeries)
        next.interval = interval
        next.negativeCounterValues = negativeCounterValues
        next.keyBytes.reserveCapacity(keyBytes.count)
        var capacity = 64
        while capacity < keeping * 2 { capacity *= 2 }
        for series in 0..<count where interval &- lastSeen[series] < expireAfter {
            next.keyBytes.append(contentsOf: key(series))
            next.keyEnds.append(KeyOffset(next.keyBytes.count))
            next.hashes.append(hashes[series])
            next.lastSeen.append(lastSeen[series])
            next.sums.append(sums[series])
            next.totalSum.append(totalSum[series])
            next.intervalSum.append(intervalSum[series])
            next.options.append(options[series])
            next.intervalSumSquares.append(intervalSumSquares[series])
            next.intervalM2.append(intervalM2[series])
            next.intervalSamples.append(intervalSamples[series])
        }
        next.optionSets = optionSets
        next.samples = samples
        next.rebuildIndex(capacity: capacity)
        self = next
    }

    // MARK: Merging

    /// What `merging(_:state:)` keeps from one flush to the next, so that the totals since
    /// creation of a series (Prometheus' counters and histogram counts) never go down while a
    /// reader still holds it: when one reader's copy of a series expires, or is created anew,
    /// while another's goes on, what the old copy counted stays counted.
    public struct MergeState: Sendable {
        /// The keys of the series followed at the last merge, each at an index into the
        /// arrays below.
        fileprivate var keys = KeyIndex()
        /// At `index * tables + position`: table `position`'s totals of the series at the last
        /// merge (nil: not in it).
        fileprivate var last: [Totals?] = []
        /// At `index`: the totals of copies that are gone, carried into the merged series.
        fileprivate var carried: [Totals] = []
        /// How many tables the last merge took.
        fileprivate var tables = 0

        fileprivate struct Totals: Sendable, Equatable {
            var total: Double
            var totalSum: Double
            static let zero = Totals(total: 0, totalSum: 0)
        }

        /// No series seen yet.
        public init() {}

        /// The series whose totals are followed.
        public var count: Int { keys.count }
    }

    /// Keys by their bytes: an open-addressing index over keys stored end to end, as the
    /// table's own (a merge looks up every series, so no key is copied into an array of its
    /// own, and the hash is the parser's, not `Hashable`'s).
    fileprivate struct KeyIndex: Sendable {
        private var keyBytes: [UInt8] = []
        private var keyEnds: [Int] = []
        private var hashes: [UInt64] = []
        private var slots: [Int32] = [Int32](repeating: -1, count: 64)

        var count: Int { keyEnds.count }

        /// Room for `count` keys in all without growing the index.
        mutating func reserve(_ count: Int, bytes: Int) {
            keyBytes.reserveCapacity(bytes)
            keyEnds.reserveCapacity(count)
            hashes.reserveCapacity(count)
            var capacity = 64
            while capacity < count * 2 { capacity *= 2 }
            if capacity > slots.count { rebuild(capacity: capacity) }
        }

        /// The index of `key` (whose hash is `hash`), if it is there.
        func find(_ key: ArraySlice<UInt8>, hash: UInt64) -> Int? {
            let mask = slots.count - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while true {
                let index = Int(slots[slot])
                if index < 0 { return nil }
                if hashes[index] == hash {
                    let start = index == 0 ? 0 : keyEnds[index - 1]
                    if SeriesTable.bytesEqual(keyBytes[start..<keyEnds[index]], key) { return index }
                }
                slot = (slot + 1) & mask
            }
        }

        /// Adds `key`, which is not there, at the next index.
        mutating func append(_ key: ArraySlice<UInt8>, hash: UInt64) {
            if (count + 1) * 2 > slots.count { rebuild(capacity: slots.count * 2) }
            keyBytes.append(contentsOf: key)
            keyEnds.append(keyBytes.count)
            hashes.append(hash)
            place(count - 1)
        }

        private mutating func place(_ index: Int) {
            let mask = slots.count - 1
            var slot = Int(truncatingIfNeeded: hashes[index]) & mask
            while slots[slot] >= 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(index)
        }

        private mutating func rebuild(capacity: Int) {
            slots = [Int32](repeating: -1, count: capacity)
            for index in 0..<count { place(index) }
        }
    }

    /// `merging(_:)`, with the totals of copies that are gone carried over (see `MergeState`);
    /// `state` is the one the previous merge of the same readers left.
    public static func merging(_ tables: [SeriesTable], state: inout MergeState) -> SeriesTable {
        guard tables.count > 1 else { return merging(tables) }
        let (table, maps) = merge(tables)
        var merged = table
        let width = tables.count
        var next = MergeState()
        next.tables = width
        next.keys.reserve(merged.count, bytes: merged.keyBytes.count)
        next.last.reserveCapacity(merged.count * width)
        next.carried.reserveCapacity(merged.count)
        // Each table's totals by merged series, at `index * width + position`.
        var perTable = [MergeState.Totals?](repeating: nil, count: merged.count * width)
        for (position, table) in tables.enumerated() {
            for series in 0..<table.count where table.kind(series) != .gauge && table.kind(series) != .set {
                perTable[Int(maps[position][series]) * width + position] = .init(
                    total: table.sums[series].total, totalSum: table.totalSum[series])
            }
        }
        for index in 0..<merged.count {
            let kind = merged.kind(index)
            guard kind != .gauge && kind != .set else { continue }
            let key = merged.key(index)
            let hash = key.withUnsafeBytes { StatsDParser.keyHash($0) }
            let now = perTable[(index * width)..<((index + 1) * width)]
            var carried = MergeState.Totals.zero
            if let before = state.keys.find(key, hash: hash) {
                carried = state.carried[before]
                if state.tables == width {
                    for position in 0..<width {
                        // A copy that is gone, or counts less than it did (created anew): what
                        // it counted stays.
                        let new = now[now.startIndex + position]
                        if let old = state.last[before * width + position], new == nil || new!.total < old.total {
                            carried.total += old.total
                            carried.totalSum += old.totalSum
                        }
                    }
                }
            }
            // Saturating, as merging's sums: never infinite.
            merged.sums[index].total = Swift.min(merged.sums[index].total + carried.total, .greatestFiniteMagnitude)
            merged.totalSum[index] = Swift.max(
                Swift.min(merged.totalSum[index] + carried.totalSum, .greatestFiniteMagnitude),
                -.greatestFiniteMagnitude)
            next.keys.append(key, hash: hash)
            next.last.append(contentsOf: now)
            next.carried.append(carried)
        }
        state = next
        return merged
    }

    /// One table holding the series of `tables`: the intervals of several readers, each with a
    /// table of its own, ended together (`endInterval(expireAfter:)` on each). A series in
    /// several tables is one series in the result:
    /// - counters, and the counts and sums of sampled kinds (interval and since creation), add
    ///   up; a sum that would overflow stays at ±1.8e308;
    /// - a gauge takes the value of the table whose line for it came in the latest interval,
    ///   and of those the first in `tables`: gauges set from clients spread over readers in one
    ///   interval take one of their values, unspecified which;
    /// - the samples of sampled kinds come together, and their sketches merge (so a series may
    ///   hold up to `exactSamples` exact samples per table); the standard deviation combines
    ///   exactly (Chan's parallel form);
    /// - the members of sets join.
    ///
    /// The result's `maxSeries` is the sum of the tables'. Equal to the one table if there is
    /// one.
    ///
    /// - Precondition: `tables` is not empty, and the tables ended the same number of intervals.
    public static func merging(_ tables: [SeriesTable]) -> SeriesTable {
        precondition(!tables.isEmpty, "SeriesTable.merging(_:): no table")
        return tables.count == 1 ? tables[0] : merge(tables).table
    }

    /// The merged table, and for each table, the merged index of each of its series.
    private static func merge(_ tables: [SeriesTable]) -> (table: SeriesTable, maps: [[Int32]]) {
        var maps = [[Int32]]()
        maps.reserveCapacity(tables.count)
        var merged = SeriesTable(maxSeries: tables.reduce(0) { $0 + $1.maxSeries })
        merged.interval = tables[0].interval
        merged.optionSets = tables[0].optionSets
        var capacity = 64
        while capacity < tables.reduce(0, { $0 + $1.count }) * 2 { capacity *= 2 }
        merged.slots = [Int32](repeating: -1, count: capacity)
        for table in tables {
            precondition(table.interval == merged.interval, "SeriesTable.merging(_:): tables of other intervals")
            let optionMap = table.optionSets.map { merged.optionSet($0) }
            var mapped = [Int32](repeating: -1, count: table.count)
            for series in 0..<table.count {
                let (index, isNew) = merged.findOrInsert(table.key(series), hash32: table.hashes[series])
                mapped[series] = Int32(index)
                merged.combine(index, isNew: isNew, with: table, series, options: optionMap[Int(table.options[series])])
            }
            for sample in table.samples {
                merged.samples.append(Sample(series: mapped[Int(sample.series)], value: sample.value))
            }
            for (series, sketch) in table.sketches {
                merged.sketches[mapped[Int(series)], default: QuantileSketch()].merge(sketch)
            }
            for (series, members) in table.setMembers {
                merged.setMembers[mapped[Int(series)], default: []].formUnion(members)
            }
            merged.negativeCounterValues &+= table.negativeCounterValues
            maps.append(mapped)
        }
        return (merged, maps)
    }

    /// The series of `key` (whose stored hash is `hash32`), inserted if new. The index must
    /// have room (`merging` sizes it for every series).
    private mutating func findOrInsert(_ key: ArraySlice<UInt8>, hash32: UInt32) -> (Int, Bool) {
        let hash = key.withUnsafeBytes { StatsDParser.keyHash($0) }
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let series = Int(slots[slot])
            if series < 0 {
                let index = count
                keyBytes.append(contentsOf: key)
                appendColumns(hash32, lastSeen: 0)
                slots[slot] = Int32(index)
                return (index, true)
            }
            if hashes[series] == hash32 && Self.bytesEqual(self.key(series), key) { return (series, false) }
            slot = (slot + 1) & mask
        }
    }

    /// Whether two keys hold the same bytes (eight at a time, where `elementsEqual` goes one
    /// by one).
    fileprivate static func bytesEqual(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in equalBytes(a.baseAddress!, b.baseAddress!, a.count) }
        }
    }

    /// Adds series `series` of `table` into series `index`.
    private mutating func combine(_ index: Int, isNew: Bool, with table: SeriesTable, _ series: Int, options: UInt16) {
        func add(_ a: Double, _ b: Double) -> Double {
            let sum = a + b
            return sum.isFinite ? sum : (sum > 0 ? .greatestFiniteMagnitude : -.greatestFiniteMagnitude)
        }
        let seen = table.lastSeen[series]
        if isNew || seen > lastSeen[index] { self.options[index] = options }
        switch kind(index) {
        case .gauge:
            if isNew || seen > lastSeen[index] { sums[index].current = table.sums[series].current }
        case .timer, .histogram, .distribution:
            // Chan et al.'s combination of two parts' squared deviations: exact, whatever the
            // parts' sizes.
            let (weightA, weightB) = (sums[index].current, table.sums[series].current)
            if weightA > 0 && weightB > 0 {
                let delta = table.intervalSum[series] / weightB - intervalSum[index] / weightA
                intervalM2[index] += table.intervalM2[series] + delta * delta * weightA * weightB / (weightA + weightB)
            } else {
                intervalM2[index] += table.intervalM2[series]
            }
            sums[index].current = add(sums[index].current, table.sums[series].current)
            sums[index].total = add(sums[index].total, table.sums[series].total)
            totalSum[index] = add(totalSum[index], table.totalSum[series])
            intervalSum[index] = add(intervalSum[index], table.intervalSum[series])
            intervalSumSquares[index] += table.intervalSumSquares[series]
            intervalSamples[index] &+= table.intervalSamples[series]
        case .counter:
            sums[index].current = add(sums[index].current, table.sums[series].current)
            sums[index].total = add(sums[index].total, table.sums[series].total)
        case .set: break
        }
        if isNew || seen > lastSeen[index] { lastSeen[index] = seen }
    }
}

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
/// - Memory per counter series: its key's bytes, plus 70 bytes of columns and 8 to 16 of index
///   (two to four 4-byte slots). A key is at most the parser's `maxLineLength` bytes, so the key
///   store holds at most `maxSeries` times that.
public struct SeriesTable: Sendable {
    /// The most series the table holds; a line for a new series beyond it is dropped.
    public private(set) var maxSeries: Int
    /// The number of the current interval (the first is 1).
    public private(set) var interval: UInt32 = 1
    /// The table as `endInterval(expireAfter:)` returned it: its `expireAfter`, so that a
    /// merge and the outputs know which series the table that goes on removed (those without a
    /// line in the last `expireAfter` intervals). 0: none (never, or not an ended table). A
    /// merged table has the first table's.
    public private(set) var expireAfter: UInt32 = 0

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

        /// Both sums added to `other`'s, as a merge adds copies of a series.
        @inline(__always)
        func adding(_ other: Sums) -> Sums {
            Sums(current: Self.add(current, other.current), total: Self.add(total, other.total))
        }

        /// `a + b`, except that a sum that would overflow stays at ±1.8e308.
        @inline(__always)
        static func add(_ a: Double, _ b: Double) -> Double {
            let sum = a + b
            return sum.isFinite ? sum : (sum > 0 ? .greatestFiniteMagnitude : -.greatestFiniteMagnitude)
        }
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
    /// Stands for the table's series and where they are. A table made anew or without some of
    /// its series has a lineage of its own, and so does one that adds a series while its
    /// lineage is shared (with a copy of the table, or with a merge that took it); only a table
    /// that holds its lineage alone adds series under it. So tables of one lineage that exist
    /// at the same time hold the same series at the same indices: a merge keeps the lineage of
    /// each table it took, and finds each series of a table of that lineage and series count
    /// at the next merge where it was (see `MergeState`).
    private(set) var lineage = Lineage()
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

    /// The identity of a table's layout (see `lineage`): compared by identity only.
    final class Lineage: Sendable {}

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

    private mutating func insert(_ key: UnsafeRawBufferPointer, _ hash32: UInt32, at slot: Int) -> Int {
        if !isKnownUniquelyReferenced(&lineage) { lineage = Lineage() }
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
        guard let series = plainSeries(kind, name: name, hash: hash) else { return false }
        if kind == .counter {
            // Its sums are the value itself (not negative; the rate is 1). One check for both:
            // a difference is finite only if both terms are, and a finite pair whose difference
            // overflows is left to `record(_:)`.
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

    /// A plain line as `recordPlainCounters(_:first:at:)` reads it: its kind, its name, its one
    /// value (finite and not negative), its hash (`StatsDParser.keyHash(_:)` of its kind's byte
    /// and its name), and where it ends (its newline, or the end of the bytes).
    typealias PlainLine = (kind: MetricKind, name: UnsafeRawBufferPointer, value: Double, hash: UInt64, lineEnd: Int)

    /// Records plain counter lines one after another, each as `recordPlain(_:name:hash:value:)`
    /// would: `first`, the plain line of `lines` at `start`, then each next one of `lines`
    /// just after the last one's end, for as long as they are counters of series the table
    /// holds. The `sums` and `lastSeen` columns are made unshared once for the run, not once a
    /// line, and every column the run reads or writes is reached through a pointer taken once.
    ///
    /// Returns where the run stopped (the start of the first line it did not record, or past
    /// the end of the bytes), how many lines it recorded, and the plain line found there, if
    /// there is one: a line of another kind, of a series the table does not hold, or one whose
    /// sums are too far apart for `recordPlain(_:name:hash:value:)`'s one check. The caller
    /// records these another way (`Ingest` gives a line of another kind to
    /// `recordPlain(_:name:hash:value:)`, and the rest to the full parse).
    @inline(__always)
    mutating func recordPlainCounters(
        _ lines: PlainLines, first: PlainLine, at start: Int
    ) -> (stoppedAt: Int, recorded: Int, stoppedOn: PlainLine?) {
        // The first line's series is looked up before the columns are made unshared: a run
        // whose first series is unknown leaves them as they were.
        guard first.kind == .counter, let series = plainSeries(.counter, name: first.name, hash: first.hash) else {
            return (start, 0, first)
        }
        assert(sums.count == count && lastSeen.count == count, "SeriesTable: a column's count differs from the table's")
        var last = lastSeries
        defer { lastSeries = last }
        return Self.recordPlainCounters(
            lines, first: first, of: series, at: start, interval: interval, last: &last, sums: &sums,
            lastSeen: &lastSeen, slots: slots, hashes: hashes, keyEnds: keyEnds, keyBytes: keyBytes)
    }

    /// `recordPlainCounters(_:first:at:)` once the first line's series is found, on the
    /// columns it writes (`sums`, `lastSeen` and `last`, which becomes `lastSeries`) and reads
    /// (borrowed from the table for the run), through pointers: nothing the loop writes can
    /// then change what it reads, so nothing is read again after each write, and no column is
    /// retained.
    @inline(__always)
    private static func recordPlainCounters(
        _ lines: PlainLines, first: PlainLine, of firstSeries: Int, at start: Int, interval: UInt32,
        last: inout Int, sums: inout [Sums], lastSeen: inout [UInt32], slots: borrowing [Int32],
        hashes: borrowing [UInt32], keyEnds: borrowing [KeyOffset], keyBytes: borrowing [UInt8]
    ) -> (stoppedAt: Int, recorded: Int, stoppedOn: PlainLine?) {
        sums.withUnsafeMutableBufferPointer { sums in
            lastSeen.withUnsafeMutableBufferPointer { lastSeen in
                slots.withUnsafeBufferPointer { slots in
                    hashes.withUnsafeBufferPointer { hashes in
                        keyEnds.withUnsafeBufferPointer { keyEnds in
                            keyBytes.withUnsafeBytes { keyBytes in
                                var line = first
                                var series = firstSeries
                                var position = start
                                var recorded = 0
                                while true {
                                    // As `recordPlain(_:name:hash:value:)`: one check for both sums.
                                    let nextCurrent = sums[series].current + line.value
                                    let nextTotal = sums[series].total + line.value
                                    guard (nextCurrent - nextTotal).isFinite else { return (position, recorded, line) }
                                    lastSeen[series] = interval
                                    sums[series] = Sums(current: nextCurrent, total: nextTotal)
                                    last = series
                                    recorded &+= 1
                                    position = line.lineEnd &+ 1
                                    guard let next = lines.line(at: position) else { return (position, recorded, nil) }
                                    line = next
                                    guard line.kind == .counter,
                                        let found = plainSeries(
                                            .counter, name: line.name, hash: line.hash, slots: slots, hashes: hashes,
                                            keyEnds: keyEnds, keyBytes: keyBytes)
                                    else { return (position, recorded, line) }
                                    series = found
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// `plainSeries(_:name:hash:)`, reading the columns through pointers.
    @inline(__always)
    private static func plainSeries(
        _ kind: MetricKind, name: UnsafeRawBufferPointer, hash: UInt64, slots: UnsafeBufferPointer<Int32>,
        hashes: UnsafeBufferPointer<UInt32>, keyEnds: UnsafeBufferPointer<KeyOffset>, keyBytes: UnsafeRawBufferPointer
    ) -> Int? {
        let hash32 = UInt32(truncatingIfNeeded: hash &>> 32)
        let mask = slots.count &- 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let series = Int(slots[slot])
            if series < 0 { return nil }
            if hashes[series] == hash32 {
                let start = series == 0 ? 0 : keyEnds[series &- 1]
                if keyEnds[series] &- start == name.count &+ 1 && keyBytes[start] == kind.rawValue
                    && equalBytes(keyBytes.baseAddress! + (start &+ 1), name.baseAddress!, name.count)
                {
                    return series
                }
            }
            slot = (slot &+ 1) & mask
        }
    }

    /// The series of the line `name:value|type` of kind `kind`, whose hash is `hash`, or nil if
    /// the table does not hold it.
    @inline(__always)
    private func plainSeries(_ kind: MetricKind, name: UnsafeRawBufferPointer, hash: UInt64) -> Int? {
        slots.withUnsafeBufferPointer { slots in
            hashes.withUnsafeBufferPointer { hashes in
                keyEnds.withUnsafeBufferPointer { keyEnds in
                    keyBytes.withUnsafeBytes { keyBytes in
                        Self.plainSeries(
                            kind, name: name, hash: hash, slots: slots, hashes: hashes, keyEnds: keyEnds,
                            keyBytes: keyBytes)
                    }
                }
            }
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
    ///
    /// - Precondition: `set` is an index into `optionSets` (as `optionSet(_:)` returns).
    public mutating func setOptions(_ set: UInt16, series: Int) {
        precondition(
            Int(set) < optionSets.count,
            "SeriesTable.setOptions(_:series:): set \(set) is not one of the \(optionSets.count) option sets")
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
        var ended = self
        ended.expireAfter = expireAfter
        // Only the lines of sampled kinds write the interval's other columns, and each of them
        // adds a sample or to a sketch: without any, those columns are zero already.
        let sampledInInterval = !samples.isEmpty || !sketches.isEmpty
        let sampleCapacity = samples.count
        samples = []
        samples.reserveCapacity(sampleCapacity)
        setMembers = [:]
        sketches = [:]
        var expired = 0
        let ending = interval
        // The sums are shared with `ended`: the next interval's are written anew, each from the
        // ended one, rather than copied and then reset (a copy, then a check at each write
        // that the column is not shared).
        let endedSums = sums
        sums = [Sums](unsafeUninitializedCapacity: endedSums.count) { next, initialized in
            keyBytes.withUnsafeBufferPointer { keys in
                keyEnds.withUnsafeBufferPointer { keyEnds in
                    lastSeen.withUnsafeBufferPointer { lastSeen in
                        endedSums.withUnsafeBufferPointer { ended in
                            for series in 0..<ended.count {
                                let isGauge = keys[series == 0 ? 0 : keyEnds[series - 1]] == MetricKind.gauge.rawValue
                                // A gauge keeps its value; every other kind starts from zero.
                                (next.baseAddress! + series).initialize(
                                    to: Sums(current: isGauge ? ended[series].current : 0, total: ended[series].total))
                                if Self.isIdle(lastSeen[series], at: ending, expireAfter: expireAfter) { expired += 1 }
                            }
                        }
                    }
                }
            }
            initialized = endedSums.count
        }
        if sampledInInterval {
            // Zero for every series: the other kinds never write these columns.
            intervalSum = [Double](repeating: 0, count: count)
            intervalSumSquares = [Double](repeating: 0, count: count)
            intervalM2 = [Double](repeating: 0, count: count)
            intervalSamples = [UInt32](repeating: 0, count: count)
        }
        if expired > 0 { removeIdle(expireAfter: expireAfter, keeping: count - expired) }
        interval &+= 1
        return ended
    }

    private mutating func removeIdle(expireAfter: UInt32, keeping: Int) {
        var remap = [Int32](repeating: -1, count: count)
        var kept: Int32 = 0
        for series in 0..<count where !Self.isIdle(lastSeen[series], at: interval, expireAfter: expireAfter) {
            remap[series] = kept
            kept += 1
        }
        self = self.keeping(remap, count: keeping)
    }

    /// The table with only the series whose entry in `remap` is not negative (`count` of them),
    /// each at the index `remap` gives, in the same order. Samples, sketches and set members
    /// are not remapped: both callers run when they are empty.
    private func keeping(_ remap: [Int32], count kept: Int) -> SeriesTable {
        var next = SeriesTable(maxSeries: maxSeries)
        next.interval = interval
        next.expireAfter = expireAfter
        next.negativeCounterValues = negativeCounterValues
        next.keyBytes.reserveCapacity(keyBytes.count)
        var capacity = 64
        while capacity < kept * 2 { capacity *= 2 }
        for series in 0..<count where remap[series] >= 0 {
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
        return next
    }

    // MARK: Merging

    /// What `merging(_:state:)` keeps from one flush to the next:
    /// - the merged table itself, which the next merge updates in place rather than builds
    ///   anew: each table's series are found at the index they had in it the last time, so that
    ///   a flush neither hashes nor looks up a series it already knows, nor appends its columns
    ///   again. That index is checked against the series' key, unless the table went on from
    ///   the one at its position in the last merge and neither added nor removed a series since
    ///   (the table's lineage says so): then its series are where they were, unchecked. A merge
    ///   that finds a series in no table removes it, and rebuilds the table then (its columns
    ///   and index);
    /// - the totals since creation of each series (Prometheus' counters and histogram counts),
    ///   so that they never go down while a reader still holds the series: when one reader's
    ///   copy of a series expires while another's goes on, what the expired copy counted stays
    ///   counted, and the copy that reader may create anew later adds to it.
    ///
    /// Memory: the merged table's (its keys, and 70 bytes of columns and 8 to 16 of index per
    /// series), plus 20 bytes per series and 28 per table and series.
    public struct MergeState: Sendable {
        /// The last merge's result. Series that no table holds any more are removed from it.
        fileprivate var merged = SeriesTable(maxSeries: 1)
        /// At `position`: where each series of the table at that position is expected in the
        /// merged table, by its index in that table once the table that goes on removed the
        /// series it let expire.
        fileprivate var maps: [[Int32]] = []
        /// At `position`: the lineage of the table at that position in the last merge. A table
        /// of the same lineage and as many series as `maps` has there at the next merge has each
        /// of those series where it was. (The count tells apart the same ended table merged
        /// again after its reader removed some series, which `maps` already leaves out.)
        fileprivate var lineages: [Lineage] = []
        /// At a merged index: the number of the last merge that found the series in a table.
        fileprivate var found: [UInt32] = []
        /// The number of the merge under way; never 0, the mark of a series not found yet.
        fileprivate var generation: UInt32 = 0
        /// The series the last merge looked up by key, its hint for them missing or wrong: new
        /// series, and those of a table whose series moved other than as its expiries move
        /// them.
        @_spi(Testing) public private(set) var lookups = 0
        /// The series the last merge checked against their keys where it expected them: those of
        /// the tables that added or removed a series since the merge before, or were not at
        /// their position in it.
        @_spi(Testing) public private(set) var checked = 0
        /// At `index * tables + position`: table `position`'s copy of merged series `index` at
        /// the last merge (nil: not in it).
        fileprivate var last: [Copy?] = []
        /// At a merged index: the totals of copies that are gone, carried into the series.
        fileprivate var carried: [Totals] = []
        /// How many tables the last merge took.
        fileprivate var tables = 0
        /// How many copies `last` holds.
        fileprivate var lastCopies = 0
        /// Whether a table of the last merge removed some of its series after it.
        fileprivate var lastRemovedSome = false
        /// How many series carried totals at the last merge (at least: a removal by
        /// `removeUnfound` does not lower it).
        fileprivate var carrying = 0

        fileprivate struct Totals: Sendable, Equatable {
            var total: Double
            var totalSum: Double
            static let zero = Totals(total: 0, totalSum: 0)
        }

        /// One table's copy of a series at a merge.
        fileprivate struct Copy: Sendable {
            var totals: Totals
            /// Whether the table that goes on removed the copy after the merge (it expired): a
            /// copy of the series there at the next merge is another, created anew.
            var removed: Bool
        }

        /// No series seen yet.
        public init() {}

        /// The number of series in the last merge.
        public var count: Int { merged.count }

        /// `tables` merged into the last merge's table, in place; see `merging(_:state:)`.
        fileprivate mutating func merge(_ tables: [SeriesTable]) -> SeriesTable {
            let width = tables.count
            generation = generation == .max ? 1 : generation + 1
            (lookups, checked) = (0, 0)
            if self.tables != width {
                // Positions are other tables now: what each counted before is not comparable.
                last = [Copy?](repeating: nil, count: merged.count * width)
                lastCopies = 0
                self.tables = width
            }
            merged.startMerge(of: tables)
            // Each table's copy of each merged series, at `index * width + position`.
            var now = [Copy?](repeating: nil, count: merged.count * width)
            var maps = [[Int32]]()
            maps.reserveCapacity(width)
            var foundCount = 0
            // The copies of this merge that were copies of the same series at the last, and
            // all of this merge's.
            var (continuing, copies) = (0, 0)
            // Whether the table that goes on from each removed some of its series.
            var removedSome = [Bool](repeating: false, count: width)
            for (position, table) in tables.enumerated() {
                precondition(table.interval == merged.interval, "SeriesTable.merging(_:): tables of other intervals")
                let before = position < self.maps.count ? self.maps[position] : []
                // The table went on from the one at this position in the last merge, and
                // neither added nor removed a series: each is where the last merge found it.
                var mapped = before
                if position < lineages.count && lineages[position] === table.lineage && before.count == table.count {
                    assert(
                        (0..<table.count).allSatisfy { series in
                            table.withKey(series) { merged.keyEquals(Int(before[series]), $0) }
                        }, "SeriesTable.merging(_:state:): a table of the last merge's lineage moved a series")
                } else {
                    mapped = [Int32](repeating: -1, count: table.count)
                    checked += table.count
                    table.keyBytes.withUnsafeBytes { keys in
                        for series in 0..<table.count {
                            let start = series == 0 ? 0 : Int(table.keyEnds[series - 1])
                            let key = UnsafeRawBufferPointer(rebasing: keys[start..<Int(table.keyEnds[series])])
                            let hash32 = table.hashes[series]
                            var index = series < before.count ? Int(before[series]) : -1
                            if index < 0 || !merged.holds(key, hash32, at: index) {
                                index = merged.findOrInsert(key, hash32)
                                lookups += 1
                                if index == found.count {
                                    found.append(0)
                                    carried.append(.zero)
                                    last.append(contentsOf: repeatElement(nil, count: width))
                                    now.append(contentsOf: repeatElement(nil, count: width))
                                }
                            }
                            mapped[series] = Int32(index)
                        }
                    }
                }
                let counted = combine(table, at: position, mapped: mapped, into: &now, found: &foundCount)
                copies += counted.copies
                continuing += counted.continuing
                removedSome[position] = counted.removedSome
                maps.append(mapped)
            }
            lineages = tables.map(\.lineage)
            if foundCount < merged.count { removeUnfound(maps: &maps, now: &now) }
            for (position, table) in tables.enumerated() {
                merged.takeSamples(of: table, mapped: maps[position])
            }
            // Nothing to carry when every copy of the last merge goes on, none was removed, and
            // no series carried anything: the usual flush.
            if continuing < lastCopies || lastRemovedSome || carrying > 0 {
                carryTotals(now)
            } else {
                last = now
            }
            lastCopies = copies
            lastRemovedSome = removedSome.contains(true)
            // The tables that go on removed the series they let expire, and their later series
            // moved down as many places.
            for (position, table) in tables.enumerated() where removedSome[position] {
                maps[position] = (0..<table.count).filter { !table.removesAfterEnd($0) }.map { maps[position][$0] }
            }
            self.maps = maps
            return merged
        }

        /// Adds each series of `table` (the table at `position`) into merged series
        /// `mapped[series]`, as `merging(_:)` says, and keeps its copy's totals in `now`.
        /// Counts the series found first here in `found`. Returns the copies kept in `now`, how
        /// many of them the last merge had too, and whether the table that goes on from `table`
        /// removed some of its series.
        ///
        /// The columns it writes are moved out of the state while the loop runs, and written
        /// through pointers: an array in a stored property paid a check that it is not shared
        /// on every write, and each read of an array a check of its bounds. A pointer does not
        /// check its bounds: the one check left is that each merged index is in the table.
        private mutating func combine(
            _ table: SeriesTable, at position: Int, mapped: [Int32], into now: inout [Copy?],
            found foundCount: inout Int
        ) -> (copies: Int, continuing: Int, removedSome: Bool) {
            let (width, generation) = (tables, generation)
            let (interval, expireAfter) = (table.interval, table.expireAfter)
            let optionMap = table.optionSets.map { merged.optionSet($0) }
            // Timers, histograms and distributions: combined after the loop, as they touch
            // more columns.
            var sampled: [(index: Int, series: Int, isNew: Bool)] = []
            var (copies, continuing, removedSome) = (0, 0, false)
            var target = MergeTarget(
                found: self.found, lastSeen: merged.lastSeen, options: merged.options, sums: merged.sums, now: now)
            (self.found, merged.lastSeen, merged.options, merged.sums, now) = ([], [], [], [], [])
            target.withPointers(last: last) { target in
                mapped.withUnsafeBufferPointer { mapped in
                    optionMap.withUnsafeBufferPointer { optionMap in
                        table.withCopyColumns { copy in
                            for series in 0..<copy.count {
                                let index = Int(mapped[series])
                                // The pointers do not check their bounds: one check here, as
                                // `now` and `last` hold `width` entries per merged series.
                                precondition(
                                    UInt(bitPattern: index) < UInt(target.found.count),
                                    "SeriesTable.merging(_:state:): a series mapped out of the merged table")
                                let isNew = target.found[index] != generation
                                if isNew {
                                    target.found[index] = generation
                                    foundCount += 1
                                }
                                let kind = copy.kind(series)
                                let seen = copy.lastSeen[series]
                                let later = isNew || seen > target.lastSeen[index]
                                if later {
                                    target.lastSeen[index] = seen
                                    target.options[index] = optionMap[Int(copy.options[series])]
                                }
                                switch kind {
                                case .counter:
                                    target.sums[index] =
                                        isNew ? copy.sums[series] : target.sums[index].adding(copy.sums[series])
                                case .gauge:
                                    if later { target.sums[index] = copy.sums[series] }
                                case .timer, .histogram, .distribution:
                                    sampled.append((index, series, isNew))
                                case .set: break
                                }
                                let removed = SeriesTable.isIdle(seen, at: interval, expireAfter: expireAfter)
                                if removed { removedSome = true }
                                if kind != .gauge && kind != .set {
                                    let slot = index * width + position
                                    target.now[slot] = Copy(
                                        totals: Totals(total: copy.sums[series].total, totalSum: copy.totalSum[series]),
                                        removed: removed)
                                    copies += 1
                                    if target.last[slot] != nil { continuing += 1 }
                                }
                            }
                        }
                    }
                }
            }
            (self.found, merged.lastSeen, merged.options, merged.sums, now) =
                (target.found, target.lastSeen, target.options, target.sums, target.now)
            for (index, series, isNew) in sampled {
                merged.combineSampled(index, isNew: isNew, with: table, series)
            }
            return (copies, continuing, removedSome)
        }

        /// The columns `combine` writes, out of the state while it runs.
        private struct MergeTarget {
            var found: [UInt32]
            var lastSeen: [UInt32]
            var options: [UInt16]
            var sums: [Sums]
            var now: [Copy?]

            struct Pointers {
                let found: UnsafeMutableBufferPointer<UInt32>
                let lastSeen: UnsafeMutableBufferPointer<UInt32>
                let options: UnsafeMutableBufferPointer<UInt16>
                let sums: UnsafeMutableBufferPointer<Sums>
                let now: UnsafeMutableBufferPointer<Copy?>
                /// The state's `last`, read only.
                let last: UnsafeBufferPointer<Copy?>
            }

            /// Calls `body` with the columns in place, and `last`.
            @inline(__always)
            mutating func withPointers(last: [Copy?], _ body: (Pointers) -> Void) {
                found.withUnsafeMutableBufferPointer { found in
                    lastSeen.withUnsafeMutableBufferPointer { lastSeen in
                        options.withUnsafeMutableBufferPointer { options in
                            sums.withUnsafeMutableBufferPointer { sums in
                                now.withUnsafeMutableBufferPointer { now in
                                    last.withUnsafeBufferPointer { last in
                                        body(
                                            Pointers(
                                                found: found, lastSeen: lastSeen, options: options, sums: sums,
                                                now: now, last: last))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }

        /// Removes the series that the merge under way did not find, and what was kept for them.
        private mutating func removeUnfound(maps: inout [[Int32]], now: inout [Copy?]) {
            var remap = [Int32](repeating: -1, count: merged.count)
            var kept = 0
            for index in 0..<merged.count where found[index] == generation {
                remap[index] = Int32(kept)
                found[kept] = generation
                carried[kept] = carried[index]
                for position in 0..<tables {
                    last[kept * tables + position] = last[index * tables + position]
                    now[kept * tables + position] = now[index * tables + position]
                }
                kept += 1
            }
            found.removeLast(found.count - kept)
            carried.removeLast(carried.count - kept)
            last.removeLast(last.count - kept * tables)
            now.removeLast(now.count - kept * tables)
            merged = merged.keeping(remap, count: kept)
            for position in maps.indices {
                for series in maps[position].indices { maps[position][series] = remap[Int(maps[position][series])] }
            }
        }

        /// Adds to each merged total what the copies that are gone counted, and keeps each
        /// table's copies (`now`, at `index * tables + position`) for the next merge.
        private mutating func carryTotals(_ now: [Copy?]) {
            let width = tables
            carrying = 0
            for index in 0..<merged.count {
                let kind = merged.kind(index)
                guard kind != .gauge && kind != .set else { continue }
                var carried = self.carried[index]
                var (copies, removed) = (0, 0)
                for position in 0..<width {
                    // A copy that is gone, or was removed and is created anew: what it counted
                    // stays.
                    if let old = last[index * width + position] {
                        copies += 1
                        if old.removed { removed += 1 }
                        if old.removed || now[index * width + position] == nil {
                            carried.total += old.totals.total
                            carried.totalSum += old.totals.totalSum
                        }
                    }
                }
                // Every copy expired after the last merge: the series was gone from every
                // table, and starts again from zero, as when a merge finds it in none.
                if copies > 0 && removed == copies { carried = .zero }
                // Saturating, as merging's sums: never infinite.
                carried.total = Swift.min(carried.total, .greatestFiniteMagnitude)
                carried.totalSum = Swift.max(
                    Swift.min(carried.totalSum, .greatestFiniteMagnitude), -.greatestFiniteMagnitude)
                if carried != self.carried[index] { self.carried[index] = carried }
                // Most series carry nothing.
                guard carried.total != 0 || carried.totalSum != 0 else { continue }
                carrying += 1
                merged.sums[index].total = Swift.min(
                    merged.sums[index].total + carried.total, .greatestFiniteMagnitude)
                merged.totalSum[index] = Swift.max(
                    Swift.min(merged.totalSum[index] + carried.totalSum, .greatestFiniteMagnitude),
                    -.greatestFiniteMagnitude)
            }
            last = now
        }
    }

    /// `merging(_:)`, with the totals of copies that are gone carried over (see `MergeState`);
    /// `state` is the one the previous merge of the same readers left. The merged table is
    /// kept in `state` and updated in place by the next merge: a series keeps its index from
    /// one merge to the next (less the series before it that the merge removes), and a new one
    /// comes last. Tables are told apart by their position in `tables`: each reader's must keep
    /// its position from one merge to the next (a change in their number starts the copies'
    /// bookkeeping over, and what gone copies counted is not carried at that merge).
    public static func merging(_ tables: [SeriesTable], state: inout MergeState) -> SeriesTable {
        guard tables.count > 1 else { return merging(tables) }
        return state.merge(tables)
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
    /// The series come in the order of the first table's, then each next table's new ones.
    /// The result's `maxSeries` is the sum of the tables'. Equal to the one table if there is
    /// one.
    ///
    /// - Precondition: `tables` is not empty, and the tables ended the same number of intervals.
    public static func merging(_ tables: [SeriesTable]) -> SeriesTable {
        precondition(!tables.isEmpty, "SeriesTable.merging(_:): no table")
        guard tables.count > 1 else { return tables[0] }
        var state = MergeState()
        return state.merge(tables)
    }

    /// The columns of a table that a merge reads for each series (its copy of the series), and
    /// a flush's summaries, in place.
    struct CopyColumns {
        let keys: UnsafeBufferPointer<UInt8>
        let keyEnds: UnsafeBufferPointer<KeyOffset>
        let lastSeen: UnsafeBufferPointer<UInt32>
        let options: UnsafeBufferPointer<UInt16>
        let sums: UnsafeBufferPointer<Sums>
        let totalSum: UnsafeBufferPointer<Double>

        var count: Int { keyEnds.count }

        @inline(__always)
        func kind(_ series: Int) -> MetricKind {
            MetricKind(rawValue: keys[series == 0 ? 0 : keyEnds[series - 1]])!
        }
    }

    /// Calls `body` with the columns a merge and a flush's summaries read, in place.
    @inline(__always)
    func withCopyColumns<Result>(_ body: (CopyColumns) -> Result) -> Result {
        keyBytes.withUnsafeBufferPointer { keys in
            keyEnds.withUnsafeBufferPointer { keyEnds in
                lastSeen.withUnsafeBufferPointer { lastSeen in
                    options.withUnsafeBufferPointer { options in
                        sums.withUnsafeBufferPointer { sums in
                            totalSum.withUnsafeBufferPointer { totalSum in
                                body(
                                    CopyColumns(
                                        keys: keys, keyEnds: keyEnds, lastSeen: lastSeen, options: options, sums: sums,
                                        totalSum: totalSum))
                            }
                        }
                    }
                }
            }
        }
    }

    /// Readies the last merge's table for the merge of `tables`: what is per merge (the
    /// interval, the bound, the samples, sketches and set members, the negative values) starts
    /// anew; the series stay, and each is reset when first found (`combine`).
    private mutating func startMerge(of tables: [SeriesTable]) {
        interval = tables[0].interval
        expireAfter = tables[0].expireAfter
        maxSeries = tables.reduce(0) { $0 + $1.maxSeries }
        negativeCounterValues = tables.reduce(0) { $0 &+ $1.negativeCounterValues }
        // Room for this merge's samples, and not much more: a burst's stays no longer than
        // the next merge.
        let sampleCount = tables.reduce(0) { $0 + $1.samples.count }
        if samples.capacity > 2 * Swift.max(sampleCount, 64) { samples = [] }
        samples.removeAll(keepingCapacity: true)
        samples.reserveCapacity(sampleCount)
        sketches = [:]
        setMembers = [:]
        lastSeries = -1
    }

    /// Whether the table that goes on from this ended table removed series `series` (it had no
    /// line in the last `expireAfter` intervals): a series of its key in the next interval is
    /// created anew. For a merged table, whether every copy was removed (its `expireAfter` is
    /// the first table's).
    @inline(__always)
    func removesAfterEnd(_ series: Int) -> Bool {
        Self.isIdle(lastSeen[series], at: interval, expireAfter: expireAfter)
    }

    /// Whether a series last seen in interval `lastSeen` is removed at the end of interval
    /// `interval` (`endInterval(expireAfter:)`, 0: never): the one rule that removal, merges
    /// and outputs share.
    @inline(__always)
    fileprivate static func isIdle(_ lastSeen: UInt32, at interval: UInt32, expireAfter: UInt32) -> Bool {
        expireAfter > 0 && interval &- lastSeen >= expireAfter
    }

    /// Whether series `index` has the key `key`, whose stored hash is `hash32`.
    @inline(__always)
    private func holds(_ key: UnsafeRawBufferPointer, _ hash32: UInt32, at index: Int) -> Bool {
        index < count && hashes[index] == hash32 && keyEquals(index, key)
    }

    /// The index of the series of `key` (whose stored hash is `hash32`), inserted last if new.
    private mutating func findOrInsert(_ key: UnsafeRawBufferPointer, _ hash32: UInt32) -> Int {
        let hash = StatsDParser.keyHash(key)
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let index = Int(slots[slot])
            if index < 0 { return insert(key, hash32, at: slot) }
            if hashes[index] == hash32 && keyEquals(index, key) { return index }
            slot = (slot + 1) & mask
        }
    }

    /// The samples, sketches and set members of `table`, whose series `mapped` gives the
    /// merged index of.
    private mutating func takeSamples(of table: SeriesTable, mapped: [Int32]) {
        for sample in table.samples {
            samples.append(Sample(series: mapped[Int(sample.series)], value: sample.value))
        }
        for (series, sketch) in table.sketches {
            sketches[mapped[Int(series)], default: QuantileSketch()].merge(sketch)
        }
        for (series, members) in table.setMembers {
            setMembers[mapped[Int(series)], default: []].formUnion(members)
        }
    }

    /// Adds the timer, histogram or distribution series `series` of `table` into series `index`
    /// (whose `lastSeen` and options the merge has set). `isNew`: the merge's first copy of the
    /// series, whose values replace what the last merge left there.
    private mutating func combineSampled(_ index: Int, isNew: Bool, with table: SeriesTable, _ series: Int) {
        if isNew {
            sums[index] = table.sums[series]
            totalSum[index] = table.totalSum[series]
            intervalSum[index] = table.intervalSum[series]
            intervalSumSquares[index] = table.intervalSumSquares[series]
            intervalM2[index] = table.intervalM2[series]
            intervalSamples[index] = table.intervalSamples[series]
            return
        }
        // Chan et al.'s combination of two parts' squared deviations: exact, whatever the
        // parts' sizes.
        let (weightA, weightB) = (sums[index].current, table.sums[series].current)
        if weightA > 0 && weightB > 0 {
            let delta = table.intervalSum[series] / weightB - intervalSum[index] / weightA
            intervalM2[index] += table.intervalM2[series] + delta * delta * weightA * weightB / (weightA + weightB)
        } else {
            intervalM2[index] += table.intervalM2[series]
        }
        sums[index] = sums[index].adding(table.sums[series])
        totalSum[index] = Sums.add(totalSum[index], table.totalSum[series])
        intervalSum[index] = Sums.add(intervalSum[index], table.intervalSum[series])
        intervalSumSquares[index] += table.intervalSumSquares[series]
        intervalSamples[index] &+= table.intervalSamples[series]
    }
}

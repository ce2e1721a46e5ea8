import Foundation
@_spi(Testing) import LoopdCore
import Testing

/// Several readers' tables merged at the flush: the same as one table that took every line.
@Suite("Series tables merged")
struct SeriesTableMergeTests {
    /// Lines of every kind over a few series, deterministic.
    static func lines(count: Int, seed: UInt64) -> [String] {
        var random = QuantileSketchTests.Random(state: seed)
        var lines = [String]()
        for _ in 0..<count {
            let key = random.next() % 7
            let value = Double(random.next() % 2000) / 10 - 50
            switch random.next() % 6 {
            case 0: lines.append("c\(key):\(value)|c\(random.next() % 3 == 0 ? "|@0.5" : "")|#t:\(key % 2)")
            case 1: lines.append("t\(key):\(value)|ms\(random.next() % 3 == 0 ? "|@0.25" : "")")
            case 2: lines.append("h\(key):\(abs(value)):\(value / 2)|h")
            case 3: lines.append("s\(key):m\(random.next() % 50)|s")
            case 4: lines.append("d\(key):\(value)|d|#a,b:\(key)")
            default: lines.append("g\(key):\(value)|g")  // each gauge from one reader only (below)
            }
        }
        return lines
    }

    /// The flush of `ingests`' tables, merged.
    static func merged(_ ingests: [Ingest]) -> Flush {
        let table = SeriesTable.merging(ingests.map { $0.endInterval(expireAfter: 3) })
        return Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
    }

    /// Summaries by "kind name|tags": what must be equal, as text, and the sums, which the
    /// order of additions may round differently.
    static func byKey(_ flush: Flush) -> [String: (exact: String, sums: [Double])] {
        var result = [String: (exact: String, sums: [Double])]()
        for summary in flush.summaries(bucketBounds: [0, 10, 100], percentiles: [1, 50, 99], trimmed: true) {
            let key =
                "\(summary.kind) " + String(decoding: flush.name(summary.series), as: UTF8.self) + "|"
                + flush.tags(summary.series).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ",")
            var exact = "\(summary.hasData)"
            var sums = [summary.value, summary.total, summary.totalSum]
            if let stats = summary.stats {
                exact += " \(stats.samples) \(stats.min) \(stats.max) \(stats.percentiles) \(stats.median ?? .nan)"
                exact += " \(stats.trimmed.map { "\($0.count) \($0.upper)" })"
                sums +=
                    [stats.sum, stats.mean, stats.stddev, stats.sumSquares] + stats.trimmed.map(\.sum) + summary.buckets
            }
            result[key] = (exact, sums)
        }
        return result
    }

    @Test func linesSpreadOverThreeTablesMergeIntoWhatOneTableMakes() {
        for seed in 1...5 as ClosedRange<UInt64> {
            let whole = Ingest(maxLineLength: 1024, maxSeries: 1000)
            let parts = (0..<3).map { _ in Ingest(maxLineLength: 1024, maxSeries: 1000) }
            for interval in 0..<3 {
                var random = QuantileSketchTests.Random(state: seed * 100 + UInt64(interval))
                for line in Self.lines(count: 600, seed: seed * 10 + UInt64(interval)) {
                    feed(whole, line)
                    // A gauge's lines all go to one reader, as one client's do; the rest anywhere.
                    let part = line.hasPrefix("g") ? Int(line.utf8.dropFirst().first! % 3) : Int(random.next() % 3)
                    feed(parts[part], line)
                }
                let one = Flush(
                    table: whole.endInterval(expireAfter: 3), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
                let (got, want) = (Self.byKey(Self.merged(parts)), Self.byKey(one))
                #expect(got.keys.sorted() == want.keys.sorted(), "seed \(seed), interval \(interval)")
                for (key, one) in want {
                    guard let merged = got[key] else { continue }
                    let close = zip(merged.sums, one.sums).allSatisfy { abs($0 - $1) <= 1e-9 * max(1, abs($1)) }
                    if merged.exact != one.exact || merged.sums.count != one.sums.count || !close {
                        Issue.record("seed \(seed), interval \(interval), \(key): merged \(merged), one table \(one)")
                    }
                }
            }
        }
    }

    @Test func aGaugeTakesTheValueOfTheTableThatSawItLatest() {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        feed(a, "g:1|g")
        feed(b, "g:2|g")
        #expect(Flushed(Self.merged([a, b])).gauges["g"] == 1, "the same interval: the first table's")
        feed(b, "g:3|g")
        #expect(Flushed(Self.merged([a, b])).gauges["g"] == 3, "b saw it later")
        #expect(Flushed(Self.merged([a, b])).gauges["g"] == 3)
    }

    @Test func aSumThatWouldOverflowStaysFinite() {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        feed(a, "c:1e308|c\nt:1e308|ms")
        feed(b, "c:1e308|c\nt:1e308|ms")
        let flushed = Flushed(Self.merged([a, b]))
        #expect(flushed.counters["c"] == .greatestFiniteMagnitude)
        #expect(flushed.stats["t"]?.stats.sum == .greatestFiniteMagnitude)
        #expect(flushed.stats["t"]?.count == 2)
    }

    @Test func sketchesAndMappedOptionsSurviveTheMerge() throws {
        let mapper = Mapper(rules: [try MappingRule(match: "lat.*", name: "lat", percentiles: [99.9])])
        let ingests = (0..<2).map { _ in Ingest(maxLineLength: 1024, maxSeries: 10, mapper: mapper) }
        var values = [Double]()
        for index in 0..<6000 {
            let value = Double(index % 1000) + 0.5
            values.append(value)
            feed(ingests[index % 2], "lat.\(index % 3):\(value)|ms")
        }
        let stats = try #require(Flushed(Self.merged(ingests)).stats["lat"]).stats
        #expect(stats.approximate && stats.samples == 6000)
        let exact = values.sorted()[Int((6000 * 0.999).rounded(.up)) - 1]
        #expect(stats.percentiles.map(\.p) == [99.9])
        #expect(abs(stats.percentiles[0].value - exact) <= 0.01 * exact)
    }

    @Test func countsAddFieldByField() {
        var a = Ingest.Counts()
        var b = Ingest.Counts()
        // Every field gets its own value through the mirror's order, so a field the sum forgets
        // shows.
        withUnsafeMutableBytes(of: &a) { bytes in
            for index in 0..<(bytes.count / 8) {
                bytes.storeBytes(of: UInt64(index + 1), toByteOffset: index * 8, as: UInt64.self)
            }
        }
        withUnsafeMutableBytes(of: &b) { bytes in
            for index in 0..<(bytes.count / 8) {
                bytes.storeBytes(of: UInt64(100 * (index + 1)), toByteOffset: index * 8, as: UInt64.self)
            }
        }
        let sum = a + b
        let fields = Mirror(reflecting: sum).children.map { $0.value as! UInt64 }
        #expect(fields.count == MemoryLayout<Ingest.Counts>.size / 8)
        let expected: [UInt64] = (0..<fields.count).map { UInt64(101 * ($0 + 1)) }
        #expect(fields == expected)
    }

    @Test func totalsNeverGoDownWhenOneReadersCopyExpiresAndTheOtherGoesOn() throws {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        var state = SeriesTable.MergeState()
        func merged() -> Flush {
            let table = SeriesTable.merging(
                [a.endInterval(expireAfter: 2), b.endInterval(expireAfter: 2)], state: &state)
            return Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        }
        func total(_ flush: Flush, _ name: String) -> Double? {
            flush.summaries().first { flush.name($0.series).elementsEqual(name.utf8) }?.total
        }
        feed(a, "c:5|c\nt:10|ms\n")
        feed(b, "c:3|c\nt:20|ms\n")
        #expect(total(merged(), "c") == 8)
        // Only b goes on: a's copy expires after two intervals without a line.
        var (totals, counts) = ([Double](), [Double]())
        for _ in 0..<4 {
            feed(b, "c:1|c\nt:1|ms\n")
            let flush = merged()
            totals.append(try #require(total(flush, "c")))
            counts.append(try #require(total(flush, "t")))
        }
        #expect(totals == [9, 10, 11, 12], "a's 5 stays counted after its copy expired")
        #expect(counts == [3, 4, 5, 6], "a histogram's count, too")
        #expect(state.count == 2)
        // Gone from both: the series, and what was carried for it, go.
        for _ in 0..<3 { _ = merged() }
        #expect(state.count == 0)
        feed(a, "c:2|c\n")
        #expect(total(merged(), "c") == 2, "created anew, from zero")
    }

    /// Two readers' ingests whose series expire after two intervals without a line, merged
    /// with a state kept from one merge to the next.
    final class TwoReaders {
        let a = Ingest(maxLineLength: 1024, maxSeries: 10)
        var b = Ingest(maxLineLength: 1024, maxSeries: 10)
        var state = SeriesTable.MergeState()
        let expireAfter: UInt32

        init(expireAfter: UInt32 = 2) { self.expireAfter = expireAfter }

        /// Ends both intervals and merges them: counter `c`'s total since creation.
        func total() -> Double? {
            let table = SeriesTable.merging(
                [a.endInterval(expireAfter: expireAfter), b.endInterval(expireAfter: expireAfter)], state: &state)
            let flush = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            return flush.summaries().first { flush.name($0.series).elementsEqual("c".utf8) }?.total
        }
    }

    @Test func aCopyCreatedAnewWithMoreThanItsExpiredOneCountedAddsToIt() throws {
        let readers = TwoReaders()
        feed(readers.a, "c:1|c")
        feed(readers.b, "c:1|c")
        #expect(readers.total() == 2)
        // a's copy gets no line for two intervals: it is removed after the second merge.
        for expected in [3.0, 4] {
            feed(readers.b, "c:1|c")
            #expect(readers.total() == expected)
        }
        // Created anew in a with more than the old copy counted: both count.
        feed(readers.a, "c:5|c")
        feed(readers.b, "c:1|c")
        #expect(readers.total() == 10)
        feed(readers.a, "c:1|c")
        #expect(readers.total() == 11)
    }

    /// A table at a position that no longer holds a copy it held at the last merge, though it
    /// did not let it expire (here a new table in its place): what the copy counted stays, as
    /// for one that expired. (The merge knows tables by their position only: a new table that
    /// holds the series is taken for the old one's copy going on.)
    @Test func aCopyGoneWithoutExpiringKeepsWhatItCounted() {
        let readers = TwoReaders(expireAfter: 0)
        feed(readers.a, "c:1|c")
        feed(readers.b, "c:4|c")
        #expect(readers.total() == 5)
        #expect(readers.total() == 5)
        // b is replaced by a reader that has not seen `c`, at the same interval.
        readers.b = Ingest(maxLineLength: 1024, maxSeries: 10)
        for _ in 0..<2 { _ = readers.b.endInterval(expireAfter: 0) }
        feed(readers.a, "c:1|c")
        #expect(readers.total() == 6)
        feed(readers.a, "c:1|c")
        #expect(readers.total() == 7)
    }

    @Test func aSeriesThatExpiredInEveryTableStartsFromZeroWhenItComesBack() {
        let readers = TwoReaders()
        feed(readers.a, "c:1|c")
        feed(readers.b, "c:1|c")
        #expect(readers.total() == 2)
        // Two intervals without a line: both copies are removed after the second merge.
        #expect(readers.total() == 2)
        #expect(readers.total() == 2)
        feed(readers.a, "c:1|c")
        #expect(readers.total() == 1, "created anew in every table that holds it, as one table would")
    }

    @Test func aMergeLooksUpNewSeriesOnlyEvenAfterAReaderRemovedSome() {
        let readers = TwoReaders()
        let all = (0..<5).map { "s\($0):1|c" }
        func lookups() -> Int {
            _ = SeriesTable.merging(
                [readers.a.endInterval(expireAfter: 2), readers.b.endInterval(expireAfter: 2)], state: &readers.state)
            return readers.state.lookups
        }
        feed(readers.a, all.joined(separator: "\n"))
        feed(readers.b, all.joined(separator: "\n"))
        #expect(lookups() == 10, "every series is new to the first merge")
        #expect(readers.state.checked == 10)
        feed(readers.a, all.joined(separator: "\n"))
        feed(readers.b, all.joined(separator: "\n"))
        #expect(lookups() == 0)
        #expect(readers.state.checked == 0, "neither table added or removed a series")
        // s0 stops in a, which removes it after the second merge without a line: a's later
        // series move down, and the merge after that still finds them where it expects, after
        // checking them.
        for (merge, checked) in [0, 0, 4].enumerated() {
            feed(readers.a, all.dropFirst().joined(separator: "\n"))
            feed(readers.b, all.joined(separator: "\n"))
            #expect(lookups() == 0, "merge \(merge)")
            #expect(readers.state.checked == checked, "merge \(merge)")
        }
        feed(readers.a, "s0:1|c")
        #expect(lookups() == 1, "a's new copy of s0")
        #expect(readers.state.checked == 5, "a added a series")
        feed(readers.a, "s0:1|c")
        #expect(lookups() == 0)
        #expect(readers.state.checked == 0)
    }

    @Test func aBurstOfSamplesDoesNotStayInTheKeptMerge() {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        var state = SeriesTable.MergeState()
        func merged() -> SeriesTable {
            SeriesTable.merging([a.endInterval(expireAfter: 0), b.endInterval(expireAfter: 0)], state: &state)
        }
        for index in 0..<2000 { feed(index % 2 == 0 ? a : b, "t\(index % 5):\(index)|ms") }
        let burst = merged().storageBytes
        feed(a, "t0:1|ms")
        let quiet = merged().storageBytes
        #expect(burst - quiet >= 2000 * MemoryLayout<Sample>.stride / 2, "burst \(burst) bytes, then \(quiet)")
    }

    @Test func everySeriesOfManyKeepsWhatItsExpiredCopyCounted() throws {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 1000), Ingest(maxLineLength: 1024, maxSeries: 1000))
        var state = SeriesTable.MergeState()
        func totals() -> [String: Double] {
            let table = SeriesTable.merging(
                [a.endInterval(expireAfter: 2), b.endInterval(expireAfter: 2)], state: &state)
            let flush = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            var totals = [String: Double]()
            for summary in flush.summaries() {
                totals[String(decoding: flush.name(summary.series), as: UTF8.self)] = summary.total
            }
            return totals
        }
        let keys = 700
        feed(a, (0..<keys).map { "key.\($0):\($0 + 1)|c" }.joined(separator: "\n"))
        feed(b, (0..<keys).map { "key.\($0):1|c" }.joined(separator: "\n"))
        var expected = Dictionary(uniqueKeysWithValues: (0..<keys).map { ("key.\($0)", Double($0 + 2)) })
        #expect(totals() == expected)
        for _ in 0..<4 {
            feed(b, (0..<keys).map { "key.\($0):1|c" }.joined(separator: "\n"))
            for key in expected.keys { expected[key]! += 1 }
            #expect(totals() == expected, "what a counted stays counted after its copies expire")
        }
        #expect(state.count == keys)
    }

    /// The names of a merged table's series, in index order.
    static func names(_ table: SeriesTable) -> [String] {
        (0..<table.count).map { String(decoding: table.key($0).dropFirst(), as: UTF8.self) }
    }

    @Test func aSeriesKeepsItsIndexFromOneMergeToTheNextAndANewOneComesLast() {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        var state = SeriesTable.MergeState()
        func merged() -> [String] {
            Self.names(
                SeriesTable.merging([a.endInterval(expireAfter: 2), b.endInterval(expireAfter: 2)], state: &state))
        }
        feed(a, "x:1|c\ny:1|c")
        feed(b, "z:1|c\nx:1|c")
        #expect(merged() == ["x", "y", "z"])
        // b's table now holds z, x, v, y: the merge keeps its own order.
        feed(a, "w:1|c\nx:1|c")
        feed(b, "v:1|c\ny:1|c\nx:1|c")
        #expect(merged() == ["x", "y", "z", "w", "v"])
        // y's and z's copies expire after two intervals without a line: the rest keep their order.
        for _ in 0..<2 {
            feed(a, "x:1|c\nw:1|c")
            feed(b, "v:1|c")
            _ = merged()
        }
        #expect(merged() == ["x", "w", "v"])
        #expect(state.count == 3)
    }

    /// Two copies of one table that each add another series are not taken for the table the
    /// last merge took, even with every hash equal: the merge finds each series by its key.
    @Test func copiesOfATableThatAddOtherSeriesAreEachMergedByKey() {
        func record(_ name: String, _ value: Double, into table: inout SeriesTable) {
            let key = [MetricKind.counter.rawValue] + Array(name.utf8)
            let outcome = key.withUnsafeBytes { key in
                [value].withUnsafeBufferPointer { values in
                    [false].withUnsafeBufferPointer { deltas in
                        table.record(
                            ParsedLine(
                                kind: .counter, sampleRate: 1, values: values, isDelta: deltas,
                                members: UnsafeBufferPointer(start: nil, count: 0), key: key, keyHash: 42))
                    }
                }
            }
            #expect(outcome != .tableFull && outcome != .nonFinite)
        }
        func sums(_ table: SeriesTable) -> [String: Double] {
            let flush = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            return Dictionary(
                flush.summaries(bucketBounds: [], percentiles: [], trimmed: false).map {
                    (String(decoding: flush.name($0.series), as: UTF8.self), $0.value)
                }, uniquingKeysWith: +)
        }
        var (a, b) = (SeriesTable(maxSeries: 10), SeriesTable(maxSeries: 10))
        record("a", 1, into: &a)
        record("b", 2, into: &b)
        var state = SeriesTable.MergeState()
        _ = SeriesTable.merging([a.endInterval(expireAfter: 0), b.endInterval(expireAfter: 0)], state: &state)
        var (first, second) = (a, a)
        record("x", 10, into: &first)
        record("y", 20, into: &second)
        let bEnded = b.endInterval(expireAfter: 0)
        for copy in [first, second, first] {
            var copy = copy
            let ended = copy.endInterval(expireAfter: 0)
            let kept = SeriesTable.merging([ended, bEnded], state: &state)
            #expect(sums(kept) == sums(SeriesTable.merging([ended, bEnded])))
        }
    }

    /// Readers whose tables neither add nor remove a series are merged without checking their
    /// keys, and give what a merge that checks every key gives, for every kind, with tags and
    /// mapped options.
    @Test func tablesThatKeepTheirSeriesAreMergedUncheckedIntoWhatAFreshMergeGives() throws {
        let mapper = Mapper(rules: [try MappingRule(match: "t1*", name: "tone", percentiles: [99.9])])
        let readers = (0..<3).map { _ in Ingest(maxLineLength: 1024, maxSeries: 1000, mapper: mapper) }
        let whole = Ingest(maxLineLength: 1024, maxSeries: 1000, mapper: mapper)
        var random = QuantileSketchTests.Random(state: 7)
        var state = SeriesTable.MergeState()
        for interval in 0..<6 {
            for reader in readers {
                var lines = [String]()
                for key in 0..<6 {
                    let value = Double(random.next() % 2000) / 10 - 50
                    lines += [
                        "c\(key):\(value)|c|#t:\(key % 2)", "g\(key):\(value)|g", "t\(key)x:\(value)|ms",
                        "h\(key):\(abs(value)):\(value / 2)|h", "d\(key):\(value)|d|#a,b:\(key)",
                        "s\(key):m\(random.next() % 9)|s",
                    ]
                }
                feed(reader, lines.joined(separator: "\n"))
                feed(whole, lines.joined(separator: "\n"))
            }
            let tables = readers.map { $0.endInterval(expireAfter: 2) }
            let kept = Flush(
                table: SeriesTable.merging(tables, state: &state), timestamp: 0, intervalSeconds: 1, internalMetrics: []
            )
            let fresh = Flush(table: SeriesTable.merging(tables), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            let one = Flush(
                table: whole.endInterval(expireAfter: 2), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            #expect(state.checked == (interval == 0 ? tables.reduce(0) { $0 + $1.count } : 0), "interval \(interval)")
            #expect(Self.agree(Self.withoutTotals(kept), Self.withoutTotals(fresh)), "interval \(interval)")
            let (got, want) = (Self.byKey(kept), Self.byKey(one))
            #expect(got.keys.contains { $0.hasSuffix(" tone|") }, "the mapped timer")
            #expect(Set(got.keys) == Set(want.keys))
            for (key, one) in want where !key.hasPrefix("g ") {  // A gauge takes one reader's value.
                let merged = try #require(got[key])
                let close = zip(merged.sums, one.sums).allSatisfy { abs($0 - $1) <= 1e-9 * max(1, abs($1)) }
                #expect(close, "interval \(interval), \(key): \(merged.sums), one table \(one.sums)")
            }
        }
    }

    /// One table's lines over `keys` keys of every kind, for the merges below: each key's lines
    /// go to the readers still alive for it, and each reader may stop sending a key for good.
    /// Keys that are multiples of 4 go silent everywhere now and then, for 2 or 3 intervals
    /// (long enough to expire after 2), and come back.
    struct Churn {
        var random: QuantileSketchTests.Random
        var alive: [[Bool]]
        let keys: Int

        init(seed: UInt64, readers: Int, keys: Int) {
            random = QuantileSketchTests.Random(state: seed)
            alive = [[Bool]](repeating: [Bool](repeating: true, count: keys), count: readers)
            self.keys = keys
        }

        /// Whether key `key` gets no line in interval `interval`.
        static func silent(_ key: Int, _ interval: Int) -> Bool {
            key % 4 == 0 && (interval + key) % (4 + key % 5) < 2 + (key / 4) % 2
        }

        /// Feeds an interval's lines to `readers` and the same to `whole`.
        mutating func feedInterval(_ interval: Int, readers: [Ingest], whole: Ingest) {
            for key in 0..<keys where !Self.silent(key, interval) {
                for reader in readers.indices where key % 4 != 0 && alive[reader][key] && random.next() % 40 == 0 {
                    alive[reader][key] = false
                }
                let living = readers.indices.filter { alive[$0][key] }
                guard !living.isEmpty else { continue }
                for _ in 0..<(1 + random.next() % 3) {
                    let value = Double(random.next() % 2000) / 10 - 50
                    let line: String
                    switch key % 6 {
                    case 0: line = "c\(key):\(value)|c\(random.next() % 3 == 0 ? "|@0.5" : "")|#t:\(key % 2)"
                    case 1: line = "t\(key):\(value)|ms"
                    case 2: line = "h\(key):\(abs(value)):\(value / 2)|h"
                    case 3: line = "s\(key):m\(random.next() % 50)|s"
                    case 4: line = "d\(key):\(value)|d|#a,b:\(key)"
                    default: line = "g\(key):\(value)|g"
                    }
                    // A gauge's lines go to one reader, as one client's do; the rest anywhere.
                    let reader = key % 6 == 5 ? living[0] : living[Int(random.next() % UInt64(living.count))]
                    feed(readers[reader], line)
                    feed(whole, line)
                }
            }
        }
    }

    /// Summaries by key without their totals since creation (`total`, `totalSum`): what a kept
    /// merge and a fresh one of the same tables must agree on.
    static func withoutTotals(_ flush: Flush) -> [String: (exact: String, sums: [Double])] {
        byKey(flush).mapValues { ($0.exact, [$0.sums[0]] + $0.sums.dropFirst(3)) }
    }

    static func agree(
        _ got: [String: (exact: String, sums: [Double])], _ want: [String: (exact: String, sums: [Double])]
    ) -> Bool {
        got.keys.sorted() == want.keys.sorted()
            && want.allSatisfy { key, want in
                guard let got = got[key] else { return false }
                return got.exact == want.exact && got.sums.count == want.sums.count
                    && zip(got.sums, want.sums).allSatisfy { abs($0 - $1) <= 1e-9 * max(1, abs($1)) }
            }
    }

    /// The merge kept from one flush to the next gives what a merge from nothing gives, through
    /// series created, expired and created again, and readers that stop sending a series; with
    /// the tables in the same order every time, its totals are one table's that took every
    /// line. With the tables reordered or left out between merges (`shuffled`), it finds each
    /// series anew.
    @Test(arguments: [false, true])
    func aKeptMergeGivesWhatAFreshOneGives(shuffled: Bool) throws {
        for seed in 1...3 as ClosedRange<UInt64> {
            // Some timers mapped to a series with percentiles of its own; other ones after a reload.
            let mapper = Mapper(rules: [try MappingRule(match: "t1*", name: "tone", percentiles: [99.9])])
            let reloaded = Mapper(rules: [try MappingRule(match: "t3*", name: "tthree", percentiles: [10, 90])])
            let readers = (0..<3).map { _ in Ingest(maxLineLength: 1024, maxSeries: 1000, mapper: mapper) }
            let whole = Ingest(maxLineLength: 1024, maxSeries: 1000, mapper: mapper)
            var churn = Churn(seed: seed, readers: 3, keys: 48)
            var order = QuantileSketchTests.Random(state: seed &* 31)
            var state = SeriesTable.MergeState()
            var previous: (flush: Flush, summaries: [String: (exact: String, sums: [Double])])?
            for interval in 0..<30 {
                if interval == 15 {
                    for ingest in readers + [whole] { ingest.setMapper(reloaded) }
                }
                churn.feedInterval(interval, readers: readers, whole: whole)
                var tables = readers.map { $0.endInterval(expireAfter: 2) }
                let one = Flush(
                    table: whole.endInterval(expireAfter: 2), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
                if shuffled {
                    tables.shuffle(using: &order)
                    if order.next() % 3 == 0 { tables.removeLast() }
                }
                let kept = Flush(
                    table: SeriesTable.merging(tables, state: &state), timestamp: 0, intervalSeconds: 1,
                    internalMetrics: [])
                let fresh = Flush(
                    table: SeriesTable.merging(tables), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
                let context = "seed \(seed), interval \(interval)"
                #expect(Self.agree(Self.withoutTotals(kept), Self.withoutTotals(fresh)), "\(context)")
                #expect(state.count == kept.table.count, "\(context)")
                if let previous {
                    #expect(
                        Self.agree(Self.byKey(previous.flush), previous.summaries),
                        "\(context): the last merge's table changed under its holder")
                }
                previous = (kept, Self.byKey(kept))
                guard !shuffled else { continue }
                let (got, want) = (Self.byKey(kept), Self.byKey(one))
                if interval == 10 || interval == 25 {
                    let mapped = interval == 10 ? " tone|" : " tthree|"
                    #expect(got.keys.contains { $0.hasSuffix(mapped) }, "\(context): the mapped timer")
                }
                for (key, one) in want {
                    // Totals of counters and sampled kinds (the mapped timers have no number).
                    let number = Int(key.split(separator: " ")[1].dropFirst().prefix { $0.isNumber }) ?? 1
                    guard number % 6 != 3, number % 6 != 5, let merged = got[key] else { continue }
                    let close = zip(merged.sums[1...2], one.sums[1...2]).allSatisfy {
                        abs($0 - $1) <= 1e-9 * max(1, abs($1))
                    }
                    #expect(close, "\(context), \(key): totals \(merged.sums[1...2]), one table \(one.sums[1...2])")
                }
            }
        }
    }
}

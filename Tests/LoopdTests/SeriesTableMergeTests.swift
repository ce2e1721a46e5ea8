import Foundation
import LoopdCore
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
}

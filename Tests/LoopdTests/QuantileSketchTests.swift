import Foundation
import LoopdCore
import Testing

/// The quantile sketch: its relative-error bound against exact nearest-rank quantiles on skewed
/// data, merging, its memory bound, and the series table's switch to it past `exactSamples`.
@Suite("Quantile sketch")
struct QuantileSketchTests {
    /// A small deterministic generator, so that failures reproduce.
    typealias Random = SplitMix64

    static let alpha = QuantileSketch.relativeAccuracy
    static let probabilities = [0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999]

    /// The data sets: skewed (lognormal, Pareto), spread over 12 decades, signed, with zeros.
    static func datasets() -> [(String, [Double])] {
        var random = Random(state: 42)
        let n = 100_000
        return [
            ("lognormal σ=2", (0..<n).map { _ in exp(2 * random.normal()) }),
            ("pareto α=1.1", (0..<n).map { _ in pow(random.uniform(), -1 / 1.1) }),
            ("latencies in ms, 12 decades", (0..<n).map { _ in pow(10, 12 * random.uniform() - 3) }),
            ("normal, both signs", (0..<n).map { _ in 100 * random.normal() }),
            ("a third zeros", (0..<n).map { index in index % 3 == 0 ? 0 : exp(random.normal()) }),
            ("integers 1...100", (0..<n).map { index in Double(index % 100 + 1) }),
        ]
    }

    @Test func everyQuantileIsWithinTheRelativeAccuracyOfTheExactOne() {
        for (name, values) in Self.datasets() {
            var sketch = QuantileSketch()
            for value in values { sketch.add(value) }
            let sorted = values.sorted()
            #expect(sketch.count == UInt64(values.count))
            #expect(sketch.min == sorted.first && sketch.max == sorted.last, "\(name): min and max are exact")
            var worst = 0.0
            for p in Self.probabilities {
                let rank = max(1, Int((Double(sorted.count) * p).rounded(.up)))
                let exact = sorted[rank - 1]
                let estimate = sketch.quantile(rank: UInt64(rank))
                let error = exact == 0 ? abs(estimate) : abs(estimate - exact) / abs(exact)
                worst = max(worst, error)
                #expect(error <= Self.alpha + 1e-12, "\(name) p\(p * 100): \(estimate) for \(exact)")
            }
            #expect(
                worst > 0 || name.hasPrefix("integers") || name.contains("zeros"), "\(name): an estimate, not a copy")
        }
    }

    @Test func aMergeIsTheSketchOfAllTheValues() {
        for (name, values) in Self.datasets() {
            var whole = QuantileSketch()
            var left = QuantileSketch()
            var right = QuantileSketch()
            for (index, value) in values.enumerated() {
                whole.add(value)
                if index % 3 == 0 { left.add(value) } else { right.add(value) }
            }
            left.merge(right)
            #expect(left == whole, "\(name)")
        }
    }

    @Test func countAtOrBelowCountsEveryValueAtOrBelowAndOnlyThoseOfTheBoundsBinAbove() {
        var random = Random(state: 7)
        // Lognormal values of both signs, and values exactly on round bounds, as integer data
        // (timers in whole milliseconds) puts them.
        var values = (0..<50_000).map { index in exp(2 * random.normal()) * (index % 5 == 0 ? -1 : 1) }
        let bounds: [Double] = [0.001, 0.005, 0.01, 0.1, 0.5, 1, 2, 2.5, 5, 10, 100, 1e6]
        for bound in bounds { values += Array(repeating: bound, count: 600) + Array(repeating: -bound, count: 60) }
        var sketch = QuantileSketch()
        for value in values { sketch.add(value) }
        let slack = 2 * Self.alpha / (1 - Self.alpha)
        for bound in bounds + bounds.map({ -$0 }) {
            let sure = values.count { $0 <= bound }
            let possible = values.count { $0 <= bound || $0 - bound <= slack * abs($0) }
            let counted = Int(sketch.count(atOrBelow: bound))
            #expect(counted >= sure && counted <= possible, "bound \(bound): \(counted) not in \(sure)...\(possible)")
        }
        #expect(sketch.count(atOrBelow: -1e300) == 0 && sketch.count(atOrBelow: 1e300) == UInt64(values.count))
    }

    @Test func memoryIsBoundedWhateverTheValues() {
        var random = Random(state: 3)
        var sketch = QuantileSketch()
        for _ in 0..<200_000 {
            let magnitude = pow(10, 600 * random.uniform() - 300)
            sketch.add(random.next() & 1 == 0 ? magnitude : -magnitude)
        }
        // Two signs of at most maxBins 8-byte counts (with the array's spare room), plus the
        // struct.
        #expect(sketch.storageBytes <= 2 * (QuantileSketch.maxBins + 8) * 8 + 256)
        let quantiles = stride(from: 1, through: 200_000, by: 1000).map { sketch.quantile(rank: UInt64($0)) }
        #expect(quantiles == quantiles.sorted(), "quantiles stay in order")
        #expect(quantiles.allSatisfy { $0 >= sketch.min && $0 <= sketch.max })
    }

    @Test(arguments: [1e25, 1e200, 1e-200, -1e200])
    func oneOutlierDoesNotSpoilTheBulksQuantiles(outlier: Double) {
        // The bulk: latencies of 1 to 1,000 ms; then one hostile sample, far beyond the bins' span.
        var random = Random(state: 5)
        var values = (0..<5000).map { _ in pow(10, 3 * random.uniform()) }
        var sketch = QuantileSketch()
        for value in values { sketch.add(value) }
        sketch.add(outlier)
        values.append(outlier)
        let sorted = values.sorted()
        for p in [0.01, 0.5, 0.9, 0.99] {
            let rank = Int((Double(sorted.count) * p).rounded(.up))
            let exact = sorted[rank - 1]
            let estimate = sketch.quantile(rank: UInt64(rank))
            #expect(
                abs(estimate - exact) <= Self.alpha * abs(exact) + 1e-12, "p\(p * 100): \(estimate), exact \(exact)")
        }
        #expect(sketch.min == sorted.first && sketch.max == sorted.last, "the outlier's exact value is kept")
    }

    @Test func outliersAtBothEndsBeforeTheBulkLeaveItsQuantilesWithinTheBound() {
        // As a hostile client can: one 1e300 and one 1e-300 first, then latencies.
        var random = Random(state: 9)
        var values: [Double] = [1e300, 1e-300]
        var sketch = QuantileSketch()
        sketch.add(1e300)
        sketch.add(1e-300)
        for _ in 0..<5000 {
            let value = exp(3 + random.normal())
            values.append(value)
            sketch.add(value)
        }
        let sorted = values.sorted()
        // Folded outliers sit at the window's edge: a rank may be off by as many as were folded
        // on the wrong side (here one, the 1e300 folded below), which in the tail can pass 1 %.
        for p in [0.01, 0.1, 0.5, 0.9, 0.99] {
            let rank = Int((Double(sorted.count) * p).rounded(.up))
            let exact = sorted[rank - 1]
            let estimate = sketch.quantile(rank: UInt64(rank))
            let near = (rank - 3...rank + 1).map { sorted[max(0, min(sorted.count - 1, $0))] }
            #expect(
                near.contains { abs(estimate - $0) <= Self.alpha * $0 }, "p\(p * 100): \(estimate), exact \(exact)")
            if p <= 0.9 { #expect(abs(estimate - exact) <= Self.alpha * exact, "p\(p * 100)") }
        }
        #expect(sketch.max == 1e300 && sketch.min == 1e-300)
    }

    @Test func aDistributionThatMovesMovesTheWindow() {
        // First 1,000 values around 1e-12, then 9,000 around 1e12: 24 decades apart, more than
        // the span. The window follows the mass once enough has gathered at its edge; the values
        // folded into the edge before it moved keep the edge's value (documented), the rest are
        // placed right, so the top percentiles keep the bound.
        var sketch = QuantileSketch()
        var values = [Double]()
        for index in 0..<1000 { values.append(1e-12 * (1 + Double(index % 100) / 100)) }
        for index in 0..<9000 { values.append(1e12 * (1 + Double(index % 100) / 100)) }
        for value in values { sketch.add(value) }
        let sorted = values.sorted()
        let rank = Int((Double(sorted.count) * 0.99).rounded(.up))
        #expect(abs(sketch.quantile(rank: UInt64(rank)) - sorted[rank - 1]) <= Self.alpha * sorted[rank - 1])
        #expect(sketch.quantile(rank: 9000) > 1e12, "the window moved up to where the mass is")
    }

    @Test func aSeriesPastTheExactSamplesGoesToTheSketchWithinItsBound() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        var random = Random(state: 11)
        var values: [Double] = []
        var datagram = ""
        for _ in 0..<200_000 {
            let value = (exp(random.normal()) * 100).rounded() / 100 + 0.01
            values.append(value)
            datagram += "lat:\(value)|ms\n"
            if datagram.utf8.count > 60_000 {
                feed(ingest, datagram)
                datagram = ""
            }
        }
        feed(ingest, datagram)
        let bytes = ingest.table.storageBytes
        #expect(bytes < 200_000, "1,024 exact samples and a sketch, not 200,000 samples (3.2 MB): \(bytes)")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 10, internalMetrics: [])
        let stats = try #require(flush.summaries(percentiles: [1, 50, 99, 99.9]).first?.stats)
        let sorted = values.sorted()
        #expect(stats.approximate)
        #expect(stats.samples == 200_000)
        #expect(stats.min == sorted.first && stats.max == sorted.last)
        for percentile in stats.percentiles {
            let exact = sorted[Int((Double(sorted.count) * percentile.p / 100).rounded(.up)) - 1]
            #expect(
                abs(percentile.value - exact) <= Self.alpha * exact, "p\(percentile.p): \(percentile.value), \(exact)")
        }
        let mean = values.reduce(0, +) / Double(values.count)
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count)
        #expect(abs(stats.mean - mean) < 1e-9 * mean)
        #expect(abs(stats.stddev - variance.squareRoot()) < 1e-9 * variance.squareRoot())
        #expect(abs(stats.sumSquares - values.reduce(0) { $0 + $1 * $1 }) < 1e-9 * stats.sumSquares)
    }

    @Test func atTheThresholdPercentilesAreStillExact() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        var lines = ""
        for value in (1...SeriesTable.exactSamples).reversed() { lines += "t:\(value)|ms\n" }
        feed(ingest, lines)
        let stats = try #require(flush(ingest).stats["t"]).stats
        #expect(!stats.approximate)
        #expect(stats.percentile(50) == Double(SeriesTable.exactSamples / 2))
    }

    @Test func eachIntervalKeepsItsOwnExactSamples() throws {
        // A series with as many samples as are kept exact, in each of three intervals: the
        // count of exact samples starts again at each, so none goes to a sketch.
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        for interval in 0..<3 {
            var lines = ""
            for value in 1...SeriesTable.exactSamples { lines += "t:\(value + interval)|ms\n" }
            feed(ingest, lines)
            let stats = try #require(flush(ingest).stats["t"]).stats
            #expect(!stats.approximate, "interval \(interval)")
            #expect(stats.samples == SeriesTable.exactSamples)
            #expect(stats.min == Double(1 + interval) && stats.max == Double(SeriesTable.exactSamples + interval))
        }
    }
}

extension SplitMix64 {
    /// In (0, 1).
    mutating func uniform() -> Double { (Double(next() >> 11) + 0.5) / Double(1 << 53) }
    mutating func normal() -> Double { (-2 * log(uniform())).squareRoot() * cos(2 * .pi * uniform()) }
}

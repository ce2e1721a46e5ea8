@_spi(Testing) import LoopdCore
import Testing

@Suite("Series table and ingest")
struct SeriesTableTests {
    @Test func countersAreScaledByTheirRateAndResetAtEachFlush() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "hits:1|c\nhits:2|c|@0.5\nhits:1:1|c\n")
        #expect(flush(ingest).counters["hits"] == 7)
        #expect(flush(ingest).counters["hits"] == 0, "a counter is reset, and reported as 0")
    }

    @Test func gaugesPersistAndTakeDeltas() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "g:10|g\ng:+5|g\ng:-3|g")
        #expect(flush(ingest).gauges["g"] == 12)
        feed(ingest, "g:-2|g")
        #expect(flush(ingest).gauges["g"] == 10)
        #expect(flush(ingest).gauges["g"] == 10, "a gauge keeps its value")
        feed(ingest, "new:+4|g")
        #expect(flush(ingest).gauges["new"] == 4, "a delta on a new gauge starts from 0")
    }

    @Test func timersReportCountSumMinMaxMeanAndNearestRankPercentiles() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var lines = ""
        for value in (1...100).reversed() { lines += "t:\(value)|ms\n" }
        feed(ingest, lines)
        feed(ingest, "h:5:1|h|@0.5\nd:2|d")
        let flushed = flush(ingest)
        let t = try #require(flushed.stats["t"])
        #expect(t.kind == .timer)
        #expect(t.count == 100)
        #expect(
            t.stats
                == SampleStats(
                    samples: 100, sum: 5050, min: 1, max: 100, mean: 50.5, stddev: t.stats.stddev,
                    sumSquares: 338_350,
                    percentiles: [
                        .init(p: 50, value: 50), .init(p: 90, value: 90), .init(p: 95, value: 95),
                        .init(p: 99, value: 99),
                    ]))
        #expect(abs(t.stats.stddev - 833.25.squareRoot()) < 1e-9, "the population standard deviation of 1...100")
        let h = try #require(flushed.stats["h"])
        #expect(h.kind == .histogram)
        #expect(h.count == 4, "two samples at rate 0.5 count as four")
        #expect(h.stats.samples == 2)
        #expect(h.stats.sum == 12, "each sample at rate 0.5 counts twice in the sum too")
        #expect(h.stats.mean == 3)
        #expect(h.stats.percentile(50) == 1 && h.stats.percentile(99) == 5)
        #expect(flushed.stats["d"]?.kind == .distribution)
        #expect(flush(ingest).stats.isEmpty, "samples are reset at each flush")
    }

    @Test func setsCountDistinctMembersPerInterval() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "u:alice|s\nu:bob|s\nu:alice|s\nu:carol:alice|s")
        #expect(flush(ingest).sets["u"] == 3)
        feed(ingest, "u:dave|s")
        #expect(flush(ingest).sets["u"] == 1)
        #expect(flush(ingest).sets["u"] == nil, "a set without data is not reported")
    }

    @Test func aSeriesIsItsNameTypeAndSortedTags() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "r:1|c|#b:2,a:1\nr:1|c|#a:1,b:2\nr:1|c|#a:1\nr:1|c\nr:5|g")
        let flushed = flush(ingest)
        #expect(flushed.counters == ["r|#a:1,b:2": 2, "r|#a:1": 1, "r": 1])
        #expect(flushed.gauges == ["r": 5])
    }

    @Test func keysWhoseHashesCollideAreToldApartByTheirBytes() {
        // Two keys with the same hash (given by hand; few enough that the index is never rebuilt
        // from the real hashes): only the comparison of their bytes, eight at a time and the
        // last eight or four in one load that may overlap, keeps them apart. Names of every
        // length up to four words, differing in one byte, at every position (the kind's too).
        let values: [Double] = [1]
        let deltas = [false]
        func record(_ key: [UInt8], into table: inout SeriesTable) -> SeriesTable.Outcome {
            key.withUnsafeBytes { key in
                values.withUnsafeBufferPointer { values in
                    deltas.withUnsafeBufferPointer { deltas in
                        table.record(
                            ParsedLine(
                                kind: .counter, sampleRate: 1, values: values, isDelta: deltas,
                                members: UnsafeBufferPointer(start: nil, count: 0), key: key, keyHash: 42))
                    }
                }
            }
        }
        for length in 1...32 {
            let base = [MetricKind.counter.rawValue] + [UInt8](repeating: UInt8(ascii: "n"), count: length)
            for position in 0...length {
                var other = base
                // Position 0 is the kind.
                other[position] = position == 0 ? MetricKind.gauge.rawValue : UInt8(ascii: "m")
                var table = SeriesTable(maxSeries: 10)
                #expect(record(base, into: &table) == .created)
                #expect(record(other, into: &table) == .created, "\(length), \(position)")
                #expect(record(base, into: &table) == .recorded)
                #expect(record(other, into: &table) == .recorded)
                #expect(table.count == 2)
            }
        }
    }

    @Test func malformedLinesAreCountedAndTheirDatagramsOtherLinesKept() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        feed(ingest, "ok:1|c\nbad:x|c\n\nok:2|c\r\nworse\n:1|c\nok:1|q\n")
        feed(ingest, bytes: Array("ok:1|c\n".utf8) + [0xFF, 0x3A, 0x31, 0x7C, 0x63, 0x0A])
        #expect(ingest.counts.lines == 8, "empty lines are not lines")
        #expect(ingest.counts.badLines == 5)
        #expect(reasons == [.badValue, .missingValue, .emptyName, .unknownType, .notUTF8])
        #expect(flush(ingest).counters["ok"] == 4)
    }

    @Test func aBadLineCallbackThatReplacesItselfOrIngestsMoreTakesEffectAtTheNextLine() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var calls: [String] = []
        ingest.onBadLine = { [unowned ingest] reason, _ in
            calls.append("first \(reason)")
            // From inside the callback: another line ingested, and the callback replaced.
            ingest.ingest(line: UnsafeRawBufferPointer(start: nil, count: 0))
            feed(ingest, "inner:1|c\n")
            ingest.onBadLine = { reason, _ in calls.append("second \(reason)") }
            // The replaced closure's context is still in use: it must outlive the call.
            calls.append("replaced")
        }
        feed(ingest, "bad:x|c\nok:1|c\nworse\n:1|c\n")
        #expect(
            calls == [
                "first value is not a finite number", "replaced", "second no ':' before a value",
                "second empty metric name",
            ])
        #expect(flush(ingest).counters == ["inner": 1, "ok": 1])
        #expect(ingest.counts.lines == 5 && ingest.counts.badLines == 3)
    }

    @Test func theLastLineOfATruncatedDatagramIsRejected() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, bytes: Array("a:1|c\nb:2|c\nc:3".utf8), truncated: true)
        #expect(ingest.counts.badLines == 1)
        #expect(flush(ingest).counters == ["a": 1, "b": 2])
    }

    @Test func newSeriesBeyondTheLimitAreDroppedAndExistingOnesKeepWorking() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 3)
        var warnings = 0
        ingest.onTableFull = { _ in warnings += 1 }
        feed(ingest, "a:1|c\nb:1|c\nc:1|c\nd:1|c\ne:1|c\na:1|c")
        #expect(ingest.counts.droppedSeries == 2)
        #expect(warnings == 1, "one warning per interval")
        #expect(flush(ingest).counters == ["a": 2, "b": 1, "c": 1])
        feed(ingest, "f:1|c")
        #expect(warnings == 2)
    }

    @Test func idleSeriesExpireAfterTheGivenIntervals() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 2)
        feed(ingest, "a:1|c\nb:1|g")
        _ = flush(ingest, expireAfter: 2)  // interval 1: both seen
        feed(ingest, "a:1|c")
        #expect(flush(ingest, expireAfter: 2).gauges == ["b": 1], "interval 2: b idle once, kept")
        feed(ingest, "a:1|c")
        _ = flush(ingest, expireAfter: 2)  // interval 3: b idle twice, removed
        #expect(ingest.table.count == 1)
        feed(ingest, "c:3|c\na:1|c")
        let flushed = flush(ingest, expireAfter: 2)
        #expect(flushed.counters == ["a": 1, "c": 3], "the freed room takes a new series; a still found")
        #expect(flushed.gauges.isEmpty)
    }

    @Test func negativeCounterValuesStayCountedWhenIdleSeriesExpire() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "gone:-1:-2|c\nkept:-3|c")
        _ = ingest.endInterval(expireAfter: 1)
        #expect(ingest.counts.negativeCounterValues == 3)
        feed(ingest, "kept:1|c")
        // `gone` expires: the table is rebuilt without it.
        _ = ingest.endInterval(expireAfter: 1)
        feed(ingest, "kept:-1|c")
        _ = ingest.endInterval(expireAfter: 1)
        #expect(ingest.table.count == 1)
        #expect(ingest.counts.negativeCounterValues == 4)
    }

    @Test func aFlushedTableIsUnchangedByLaterLines() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "a:1|c\nt:1|ms")
        let ended = ingest.endInterval(expireAfter: 0)
        feed(ingest, "a:5|c\nt:9|ms\nnew:1|c")
        let flushed = Flushed(Flush(table: ended, timestamp: 0, intervalSeconds: 1, internalMetrics: []))
        #expect(flushed.counters == ["a": 1])
        #expect(flushed.stats["t"]?.stats.max == 1)
    }

    @Test func manySeriesAreAllFoundAgain() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100_000)
        for round in 0..<2 {
            var lines = ""
            for key in 0..<20_000 { lines += "key.\(key):\(round + 1)|c|#shard:\(key % 7)\n" }
            feed(ingest, lines)
        }
        let flushed = flush(ingest)
        #expect(flushed.counters.count == 20_000)
        #expect(flushed.counters.values.allSatisfy { $0 == 3 })
    }

    @Test func theKeyStoreAddressesTheLongestKeysOfTheMostSeries() {
        // --max-series is at most Int32.max and --max-line at most 65,536 bytes; a key is never
        // longer than its line (the parser keeps 3 bytes more). With 32-bit offsets, inserting
        // the 65,536th such key trapped.
        let longestKey = 65536 + 3
        #expect(SeriesTable.keyStoreLimit / longestKey >= Int(Int32.max))
        #expect(SeriesTable.keyStoreLimit > Int(UInt32.max))
    }

    @Test func aDatagramIsSplitIntoTheLinesItsNewlinesEnd() {
        // Datagrams at random, against a split made here, line by line.
        var random = SplitMix64(state: 11)
        let pieces = ["a:1|c", "b:2|g", "", "\r", "t:3|ms", "x", "é:1|c", "loopd:1|c", "c:1|c|#k:v", ":", "|"]
        for _ in 0..<2_000 {
            var bytes: [UInt8] = []
            while bytes.count < Int.random(in: 0...200, using: &random) {
                bytes += Array(pieces.randomElement(using: &random)!.utf8)
                if Bool.random(using: &random) { bytes.append(UInt8(ascii: "\n")) }
            }
            let truncated = Bool.random(using: &random)
            let split = Ingest(maxLineLength: 1024, maxSeries: 100)
            let byLine = Ingest(maxLineLength: 1024, maxSeries: 100)
            var rejectedBySplit: [String] = []
            var rejectedByLine: [String] = []
            split.onBadLine = { error, line in rejectedBySplit.append("\(error) \(Array(line))") }
            byLine.onBadLine = { error, line in rejectedByLine.append("\(error) \(Array(line))") }
            feed(split, bytes: bytes, truncated: truncated)
            bytes.withUnsafeBytes { datagram in
                var start = 0
                for (index, byte) in datagram.enumerated() where byte == UInt8(ascii: "\n") {
                    byLine.ingest(line: UnsafeRawBufferPointer(rebasing: datagram[start..<index]))
                    start = index + 1
                }
                guard start < datagram.count else { return }
                let last = UnsafeRawBufferPointer(rebasing: datagram[start...])
                if truncated { byLine.reject(.tooLong, last) } else { byLine.ingest(line: last) }
            }
            #expect(split.counts.lines == byLine.counts.lines, "\(bytes)")
            #expect(split.counts.badLines == byLine.counts.badLines, "\(bytes)")
            #expect(rejectedBySplit == rejectedByLine, "\(bytes)")
            #expect(split.table.count == byLine.table.count, "\(bytes)")
            #expect((0..<split.table.count).allSatisfy { split.table.key($0) == byLine.table.key($0) }, "\(bytes)")
        }
    }
}

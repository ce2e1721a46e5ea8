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

    /// A plain line finds its series by kind, name and hash: a series of another kind with the
    /// same name and a colliding hash is not it.
    @Test func aPlainLineIsNotRecordedIntoAnotherKindWithTheSameNameAndHash() {
        var table = SeriesTable(maxSeries: 10)
        let gauge = [MetricKind.gauge.rawValue] + Array("a".utf8)
        let hash: UInt64 = 0x1234_5678_9ABC_DEF0
        let values = [5.0]
        let outcome = values.withUnsafeBufferPointer { values in
            [false].withUnsafeBufferPointer { isDelta in
                gauge.withUnsafeBytes { key in
                    table.record(
                        ParsedLine(
                            kind: .gauge, sampleRate: 1, values: values, isDelta: isDelta,
                            members: UnsafeBufferPointer(start: nil, count: 0), key: key, keyHash: hash))
                }
            }
        }
        #expect(outcome == .created)
        #expect(!Array("a".utf8).withUnsafeBytes { table.recordPlain(.counter, name: $0, hash: hash, value: 1) })
        #expect(!Array("a".utf8).withUnsafeBytes { table.recordPlain(.timer, name: $0, hash: hash, value: 1) })
        #expect(!Array("b".utf8).withUnsafeBytes { table.recordPlain(.gauge, name: $0, hash: hash, value: 1) })
        #expect(Array("a".utf8).withUnsafeBytes { table.recordPlain(.gauge, name: $0, hash: hash, value: 7) })
        let flush = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        #expect(flush.summaries().map(\.value) == [7])
        #expect(table.count == 1 && table.kind(0) == .gauge)
    }

    /// A plain line for a known series takes the short path, which leaves the parser as the
    /// last fully parsed line left it; a new series, another shape, a name that stops the
    /// eight-byte scan early (`*`, 0x1A) or a newline found by it go through the parse.
    @Test func plainLinesOfKnownSeriesSkipTheParse() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "c:1|c\ng:1|g\nt:1|ms\n")
        #expect(ingest.parser.kind == .timer)
        feed(ingest, "g:2|g\nc:3|c\n")
        #expect(ingest.parser.kind == .timer, "known series, plain lines: not parsed")
        feed(ingest, "c:1|c|@0.5\n")
        #expect(ingest.parser.kind == .counter, "a sample rate: parsed")
        feed(ingest, "g:5|g\nnew:1|ms\n")
        #expect(ingest.parser.kind == .timer, "a new series: parsed")
        feed(ingest, "abcdefg*x:1|g\nab\u{1A}:1|g\n")
        feed(ingest, "c:1|c|@0.5\n")
        #expect(ingest.parser.kind == .counter)
        feed(ingest, "abcdefg*x:2|g\n")
        #expect(ingest.parser.kind == .gauge, "a known series with * in its name: the scan stops there, parsed")
        feed(ingest, "c:1|c|@0.5\n")
        #expect(ingest.parser.kind == .counter)
        feed(ingest, "ab\u{1A}:2|g\n")
        #expect(ingest.parser.kind == .gauge, "a known series with 0x1A in its name: parsed")
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        feed(ingest, "abcdefghij\n:1|c\n")
        #expect(reasons == [.missingValue, .emptyName], "a newline in the second word ends the line")
        let flushed = flush(ingest)
        #expect(flushed.counters == ["c": 10], "1 + 3, then 1 at rate 0.5 three times")
        #expect(flushed.gauges == ["g": 5, "abcdefg*x": 2, "ab\u{1A}": 2])
    }

    /// Once a line of a datagram is of another shape than the plain one, the rest of the
    /// datagram goes through the full parse without trying the short path (a client's lines
    /// tend to have one shape); a plain line of a new series does not stop the tries, and the
    /// next datagram tries again.
    @Test func afterALineOfAnotherShapeTheRestOfItsDatagramIsParsed() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "c:1|c\ng:1|g\n")
        feed(ingest, "c:1|c|#t\ng:2|g\n")
        #expect(ingest.parser.kind == .gauge, "after a tagged line: parsed")
        feed(ingest, "new:1|ms\nc:1|c\n")
        #expect(ingest.parser.kind == .timer, "after a new series: the short path")
        feed(ingest, "c:1|c\n")
        #expect(ingest.parser.kind == .timer, "the next datagram: the short path")
        feed(ingest, "c:1|c\r\ng:3|g\n")
        #expect(ingest.parser.kind == .gauge, "after a line ending in \\r: parsed")
        let flushed = flush(ingest)
        #expect(flushed.counters == ["c": 4, "c|#t": 1] && flushed.gauges == ["g": 3])
    }

    /// A counter whose sums are finite but far apart: the short path's one check for both (their
    /// difference) overflows, and the full path records the line.
    @Test func aPlainCounterWhoseSumsAreFarApartIsStillRecorded() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        feed(ingest, "x:1.7e308|c\nx:-1.7e308|c\nx:-1.7e308|c\ng:1|g\n")
        #expect(ingest.parser.kind == .gauge)
        // Its own datagram, so that the short path tries it: it gives the line up to the parse.
        feed(ingest, "x:1|c\n")
        #expect(ingest.parser.kind == .counter)
        #expect(reasons.isEmpty)
        let table = ingest.endInterval(expireAfter: 0)
        let summary = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: []).summaries()
        #expect(summary.map(\.value) == [-1.7e308 + 1, 1] && summary.map(\.total) == [1.7e308 + 1, 0])
        #expect(ingest.counts.lines == 5 && ingest.counts.badLines == 0)
    }

    /// Mapping rules see every line: while they are set, plain lines take the full path into
    /// the mapped series, and after they are removed, into the series of their own name.
    @Test func plainLinesFollowTheMappingRulesInForce() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let mapper = Mapper(rules: [try MappingRule(match: "a", name: "b")])
        ingest.setMapper(mapper)
        feed(ingest, "a:1|c\na:1|c\n")
        ingest.setMapper(nil)
        feed(ingest, "a:1|c\nb:1|c\na:1|c\n")
        ingest.setMapper(mapper)
        feed(ingest, "a:1|c\n")
        #expect(flush(ingest).counters == ["a": 2, "b": 4])
    }

    /// Rules that a callback sets in the middle of a datagram apply to the datagram's next
    /// lines, plain ones included: here the callback of a full table, which a plain line of a
    /// new series (one that leaves the short path on for the rest of its datagram) calls.
    @Test func mappingRulesSetByACallbackApplyToTheRestOfTheDatagram() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 2)
        let mapper = Mapper(rules: [try MappingRule(match: "a", name: "b")])
        feed(ingest, "a:1|c\nb:1|c\n")
        ingest.onTableFull = { [unowned ingest] _ in ingest.setMapper(mapper) }
        feed(ingest, "new:1|c\na:1|c\n")
        #expect(ingest.counts.droppedSeries == 1)
        #expect(flush(ingest).counters == ["a": 1, "b": 2])
    }

    /// `ingest(line:)` takes its bytes as one line: a newline inside does not end a plain line
    /// early.
    @Test func aLineHandedWholeIsOneLineWithANewlineInside() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        feed(ingest, "x:1|c\n")
        Array("x:1|c\ny".utf8).withUnsafeBytes { ingest.ingest(line: $0) }
        Array("x:2|c".utf8).withUnsafeBytes { ingest.ingest(line: $0) }
        #expect(reasons == [.unknownType])
        #expect(flush(ingest).counters["x"] == 3)
    }

    /// A datagram's counter lines are recorded in runs, each of which ends at a line it leaves
    /// to another path: a new series, a counter whose sums are too far apart for the run's one
    /// check, a plain line of another kind (after which the datagram's plain lines go one at a
    /// time), a line of another shape, an event, an empty line, a `\r`, a truncated tail or
    /// the datagram's end. Each line must be recorded once, where the full parse would record
    /// it, and none skipped; the table's last series must be the last one recorded.
    @Test func runsOfCounterLinesEndAtEachLineTheyLeaveToAnotherPath() {
        let datagrams: [(String, truncated: Bool)] = [
            ("a:1|c\nb:2|c\ng:5|g\nt:3|ms\nh:1|h\nd:1|d\nfar:1e308|c\nfar:-1e308|c\nfar:-1e308|c\n", false),
            // A new series, then a known gauge: the counters after it go one at a time.
            ("a:1|c\nb:1|c\nnew:4|c\na:1|c\ng:7|g\na:1|c\nb:1|c\n", false),
            // A gauge of a new series; then a timer, a histogram and a distribution.
            ("a:1|c\nnewg:2|g\na:1|c\n", false),
            ("a:1|c\nt:1|ms\nh:2|h\nd:3|d\na:1|c\n", false),
            // A counter with a gauge's name is a series of its own.
            ("a:1|c\ng:1|c\n", false),
            // A tag, or a `\r`: the rest of the datagram takes the full parse.
            ("a:1|c\nb:1|c|#t:v\na:1|c\n", false),
            ("a:1|c\nb:1|c\r\na:1|c\n", false),
            // An event, then runs again.
            ("a:1|c\n_e{1,1}:x|y\na:1|c\nb:1|c\n", false),
            // Truncated tails: one that is not plain, and one that would be.
            ("a:1|c\nb:1|c\na:1", true),
            ("a:1|c\nb:1|c", true),
            // Without a last newline; with an empty line.
            ("a:1|c\nb:1|c", false),
            ("a:1|c\n\nb:1|c", false),
            // `far`'s sums are -1e308 and 1e308: the run's check fails, and the full parse
            // records the line; in the middle of a run, then as a run's first line.
            ("a:1|c\nfar:1|c\nb:1|c\n", false),
            ("far:1|c\nb:1|c\n", false),
            // A service check, then runs again.
            ("a:1|c\n_sc|db|0\na:1|c\n", false),
        ]
        let fast = Ingest(maxLineLength: 1024, maxSeries: 100)
        let full = Ingest(maxLineLength: 1024, maxSeries: 100)
        full.usesPlainLines = false
        var rejected: [LineError] = []
        fast.onBadLine = { error, _ in rejected.append(error) }
        for (datagram, truncated) in datagrams {
            feed(fast, bytes: Array(datagram.utf8), truncated: truncated)
            feed(full, bytes: Array(datagram.utf8), truncated: truncated)
            #expect(fast.table.lastSeries == full.table.lastSeries, "\(datagram.debugDescription)")
        }
        #expect(rejected == [.tooLong, .tooLong])
        #expect(fast.counts == full.counts)
        #expect(fast.counts.lines == 53 && fast.counts.events == 1 && fast.counts.serviceChecks == 1)
        let (byFast, byFull) = (flush(fast), flush(full))
        #expect(byFast.counters == byFull.counters)
        #expect(byFast.gauges == byFull.gauges)
        #expect(byFast.counters == ["a": 22, "b": 11, "b|#t:v": 1, "g": 1, "new": 4, "far": -1e308])
        #expect(byFast.gauges == ["g": 7, "newg": 2])
        #expect(byFast.stats.mapValues(\.count) == ["t": 2, "h": 2, "d": 2])
    }

    /// The run reads a line no longer than the parser's longest as plain, as the full parse
    /// does: one byte more is refused.
    @Test func aRunStopsAtALineLongerThanTheLongest() {
        let fast = Ingest(maxLineLength: 6, maxSeries: 100)
        let full = Ingest(maxLineLength: 6, maxSeries: 100)
        full.usesPlainLines = false
        var rejected: [LineError] = []
        fast.onBadLine = { error, _ in rejected.append(error) }
        for ingest in [fast, full] {
            feed(ingest, "a:1|c\n")
            feed(ingest, "a:1|c\na:10|c\na:100|c\na:1|c\n")
        }
        #expect(rejected == [.tooLong])
        #expect(fast.counts == full.counts)
        #expect(flush(fast).counters == ["a": 13])
    }

    /// A callback between two runs of a datagram that ingests more lines, or ends the interval
    /// (which here removes an idle series, so that the others move), changes the table the next
    /// run records into: each line is recorded once, into the interval it arrived in.
    @Test func aCallbackBetweenRunsThatIngestsOrEndsTheIntervalIsSeenByTheNextRun() {
        let fast = Ingest(maxLineLength: 1024, maxSeries: 3)
        let full = Ingest(maxLineLength: 1024, maxSeries: 3)
        full.usesPlainLines = false
        var ended: [Flushed] = []
        for ingest in [fast, full] {
            // A bad event, after which the datagram's plain lines still take runs.
            ingest.onBadLine = { [unowned ingest] _, _ in feed(ingest, "a:10|c\nb:10|c\n") }
            ingest.onTableFull = { [unowned ingest] _ in
                ended.append(
                    Flushed(
                        Flush(
                            table: ingest.endInterval(expireAfter: 1), timestamp: 0, intervalSeconds: 1,
                            internalMetrics: [])))
            }
            feed(ingest, "idle:1|c\na:1|c\nb:1|c\n")
            _ = ingest.endInterval(expireAfter: 1)
            feed(ingest, "a:1|c\n_e{9,1}:x|y\na:1|c\nb:1|c\nnew:1|c\na:1|c\nb:1|c\n")
        }
        #expect(fast.counts.badLines == 1 && fast.counts.droppedSeries == 1)
        #expect(ended.count == 2)
        #expect(ended.first?.counters["a"] == 12 && ended.first?.counters["b"] == 11)
        #expect(ended.first?.counters == ended.last?.counters)
        #expect(fast.table.count == 2, "idle removed, new dropped")
        #expect(fast.counts == full.counts)
        let (byFast, byFull) = (flush(fast), flush(full))
        #expect(byFast.counters == byFull.counters)
        #expect(byFast.counters == ["a": 1, "b": 1])
    }

    /// Plain lines (`name:value|type`, one unsigned value) for known series skip the full
    /// parse: lines of that shape and of every shape near it, at random, must leave the same
    /// series, aggregates, samples, counts and rejections as when every line takes the full
    /// parse.
    @Test func plainLinesRecordWhatTheFullParseWould() {
        var random = SplitMix64(state: 23)
        let names: [[UInt8]] =
            [
                "a", "hits", "load.key.1", "abcdefg", "abcdefgh", "abcdefghi", "a.b.c.d.e.f.g.h.i.j", "é", "loopd.x",
                "LOOPd", ".a", "sp ace", "t\tab", "_x", "ctl\u{1}", "a|#t", "hits|#t",
            ].map { Array($0.utf8) } + [[0xFF, 0x61], [0x61, 0xC3]]
        let values = [
            "1", "0", "007", "123456789012345", "1234567890123456", "99999999999999999999", "", "+1", "-1", "1.5",
            "1e3", "x", "1:2", "0.1", "2.50", "12345678901234.5", "1234567890123.4567", ".5", "5.", "1.2.3", "0.000",
            "1e308",
        ]
        let suffixes = [
            "|c", "|cc", "|c|", "|c|@0.5", "|c|#t:v", "|c|#t", "|g", "|ms", "", "|", "|C", "|c\r", "c", "|c|c", "|h",
            "|d", "|s", "|m", "|msx", "|ms|#t", "|g|@0.5",
        ]
        let plainSuffixes = ["|c", "|g", "|ms", "|h", "|d"]
        let plainValues = ["1", "0", "2.5", "007", "0.125", "123456789012345"]
        let fast = Ingest(maxLineLength: 24, maxSeries: 100)
        let full = Ingest(maxLineLength: 24, maxSeries: 100)
        full.usesPlainLines = false
        var rejectedByFast: [String] = []
        var rejectedByFull: [String] = []
        fast.onBadLine = { error, line in rejectedByFast.append("\(error) \(Array(line))") }
        full.onBadLine = { error, line in rejectedByFull.append("\(error) \(Array(line))") }
        func summaries(_ ingest: Ingest) -> [String] {
            let flush = Flush(
                table: ingest.endInterval(expireAfter: 3), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            return flush.summaries().map { "\(Array(flush.table.key($0.series))) \($0)" }
        }
        for round in 0..<4_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                // One line in three of the plain shape; the others with a part changed.
                let plain = Int.random(in: 0..<3, using: &random) == 0
                bytes += names.randomElement(using: &random)!
                if !plain && Int.random(in: 0..<8, using: &random) == 0 { bytes.append(UInt8(ascii: "|")) }
                bytes += Array(":".utf8)
                bytes += Array((plain ? plainValues : values).randomElement(using: &random)!.utf8)
                bytes += Array((plain ? plainSuffixes : suffixes).randomElement(using: &random)!.utf8)
                bytes.append(UInt8(ascii: "\n"))
            }
            // As a datagram (its last newline sometimes missing, or its tail cut), or line by line.
            if Bool.random(using: &random) { bytes.removeLast() }
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                feed(fast, bytes: bytes, truncated: true)
                feed(full, bytes: bytes, truncated: true)
            case 1:
                for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                    Array(line).withUnsafeBytes { line in
                        fast.ingest(line: line)
                        full.ingest(line: line)
                    }
                }
            default:
                feed(fast, bytes: bytes)
                feed(full, bytes: bytes)
            }
            if round % 97 == 0 {
                let (byFast, byFull) = (summaries(fast), summaries(full))
                #expect(byFast.count == byFull.count, "round \(round)")
                for (one, other) in zip(byFast, byFull) where one != other {
                    Issue.record("round \(round): \(one) against \(other)")
                    break
                }
            }
        }
        #expect(summaries(fast) == summaries(full))
        #expect(fast.counts == full.counts)
        #expect(rejectedByFast == rejectedByFull)
        #expect(fast.table.count == full.table.count && fast.table.count > 10)
    }
}

import Foundation
import LoopdCore
import Testing

@Suite("Prometheus exposition")
struct PrometheusFormatTests {
    /// Ends `ingest`'s interval as a flush.
    func flush(_ ingest: Ingest, _ metrics: [InternalMetric] = []) -> Flush {
        Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: metrics)
    }

    /// Renders `flush` with `renderer`, checking that the text parses strictly and passes the
    /// linter's rules.
    func render(_ renderer: PrometheusExposition, _ flush: Flush) throws -> (
        lines: [String], leftOut: Int, merged: Int
    ) {
        let exposition = renderer.render(flush, flush.summaries(bucketBounds: renderer.options.bucketBounds))
        let text = String(decoding: exposition.bytes, as: UTF8.self)
        _ = try PrometheusText.parse(text)
        #expect(PrometheusText.lint(text) == [], "\(text)")
        return (text.split(separator: "\n").map(String.init), exposition.leftOut, exposition.merged)
    }

    @Test func countersAreCumulativeTotalsAndEveryFamilyHasHelp() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition()
        feed(ingest, "hits:3|c|#env:prod,canary\nload:0.25|g\nu:a:b|s")
        _ = try render(renderer, flush(ingest))
        feed(ingest, "hits:2|c|#env:prod,canary")
        let metric = InternalMetric(name: "loopd.lines_received", kind: .counter, value: 3, total: 9)
        let (lines, leftOut, _) = try render(renderer, flush(ingest, [metric]))
        #expect(lines.contains("# TYPE hits_total counter"))
        #expect(
            lines.contains(
                "# HELP hits_total StatsD counter hits: the count since the series was created (positive increments)"))
        #expect(lines.contains("hits_total{canary=\"true\",env=\"prod\"} 5"), "cumulative over both intervals")
        #expect(lines.contains("# TYPE load gauge") && lines.contains("load 0.25"))
        #expect(lines.contains("# TYPE u gauge") && lines.contains("u 0"), "no member in the last interval")
        #expect(lines.contains("loopd_lines_received_total 9"))
        #expect(
            lines.contains(
                "# HELP loopd_lines_received_total loopd's own counter loopd.lines_received: the count since loopd started"
            ))
        #expect(leftOut == 0)
    }

    @Test func timersAreHistogramsInSecondsWithBucketsSinceCreation() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [0.005, 0.01, 0.1]))
        // 5 ms, 10 ms, 50 ms and 2 s, sent at rate 0.5: each stands for two.
        feed(ingest, "api.ms:5|ms|@0.5\napi.ms:10|ms|@0.5\napi.ms:50:2000|ms|@0.5\nsize:3|h")
        var (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("# TYPE api_seconds histogram"), "the name's ms is dropped: the unit is seconds")
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 2"))
        #expect(lines.contains("api_seconds_bucket{le=\"0.01\"} 4"))
        #expect(lines.contains("api_seconds_bucket{le=\"0.1\"} 6"))
        #expect(lines.contains("api_seconds_bucket{le=\"+Inf\"} 8"))
        #expect(lines.contains("api_seconds_count 8"))
        #expect(lines.contains("api_seconds_sum 4.13"), "2 x (5 + 10 + 50 + 2000) ms")
        #expect(lines.contains("size_bucket{le=\"0.1\"} 0") && lines.contains("size_bucket{le=\"+Inf\"} 1"))
        #expect(lines.contains("size_sum 3"), "histograms (h) are shown as sent")

        // The next interval adds to the buckets; a quiet one keeps them.
        feed(ingest, "api.ms:1|ms")
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 3") && lines.contains("api_seconds_count 9"))
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 3") && lines.contains("api_seconds_count 9"))
        // A series that expires starts again from zero, buckets included, as its count does:
        // a restart Prometheus knows.
        let expiring = Flush(
            table: ingest.endInterval(expireAfter: 1), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        _ = renderer.render(expiring, expiring.summaries(bucketBounds: renderer.options.bucketBounds))
        feed(ingest, "api.ms:1|ms")
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 1") && lines.contains("api_seconds_count 1"))
    }

    @Test func mixedRatesInOneIntervalShareTheScaledCountInProportion() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [0.005, 0.01]))
        // Two samples stand for 1 + 3 = 4: each bucket takes 4 x its share of the samples.
        feed(ingest, "api:5|ms\napi:10|ms|@0.333333333333333333")
        let (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 2"))
        #expect(lines.contains("api_seconds_bucket{le=\"0.01\"} 4") && lines.contains("api_seconds_count 4"))
    }

    @Test func summariesShowTheLastIntervalsQuantilesInSecondsAndSayWhichWindow() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(timers: .summary, flushInterval: 15))
        feed(ingest, "t:1:2:3:4|ms|#b:x")
        var (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("# TYPE t_seconds summary"))
        #expect(lines.contains("t_seconds{b=\"x\",quantile=\"0.99\"} 0.004"))
        #expect(lines.contains("t_seconds_sum{b=\"x\"} 0.01") && lines.contains("t_seconds_count{b=\"x\"} 4"))
        #expect(
            lines.contains {
                $0.hasPrefix("# HELP t_seconds ") && $0.contains("last flush interval's samples (every 15 s)")
            })
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(!lines.contains { $0.contains("quantile=") }, "no quantile (never NaN) after a quiet interval")
        #expect(lines.contains("t_seconds_count{b=\"x\"} 4"))
    }

    @Test func namesAreCleanedForPrometheusAndItsLinter() {
        let cases: [(String, MetricKind, String)] = [
            ("a.b.c", .gauge, "ab_c"),  // b reads as bytes
            ("api.v1-req/x", .gauge, "api_v1_req_x"),
            ("requestTime", .gauge, "request_time"),
            ("HTTPServer", .gauge, "httpserver"),
            ("hits", .counter, "hits_total"),
            ("req.total", .counter, "req_total"),
            ("req.total", .gauge, "reqtotal"),
            ("x.count", .gauge, "xcount"),
            ("x.count", .counter, "x_count_total"),
            ("lat.ms", .timer, "lat_seconds"),
            ("lat.milliseconds", .timer, "lat_seconds"),
            ("lat.seconds", .timer, "lat_seconds"),
            ("ms", .timer, "ms_seconds"),
            ("lat", .histogram, "lat"),
            ("disk.used.kb", .gauge, "disk_usedkb"),
            ("x_k_b", .gauge, "xkb"),
            ("my_counter", .counter, "mycounter_total"),
            ("bits_sent", .counter, "bitssent_total"),
            ("uptime.minutes", .gauge, "uptimeminutes"),
            ("_ms", .gauge, "ms"),
            ("9lives", .counter, "_9lives_total"),
            ("a:c", .gauge, "a_c"),
            ("", .gauge, "_"),
            ("ünï", .gauge, "__n__"),
            ("total", .counter, "total_total"),
            ("_total", .gauge, "total"),
            ("_count", .gauge, "count"),
            ("__bucket", .gauge, "bucket"),
            ("Total", .counter, "total_total"),
            ("minutes", .gauge, "minutesvalue"),
            ("kilo.bits", .gauge, "kilobitsvalue"),
            ("kiloMinutes", .counter, "kilominutesvalue_total"),
            ("nano-kelvins", .timer, "nanokelvinsvalue_seconds"),
            ("bits", .counter, "bitsvalue_total"),
        ]
        for (source, kind, expected) in cases {
            let family = PrometheusExposition().family(kind)
            let name = String(
                decoding: PrometheusFormat.familyName(ArraySlice(source.utf8), kind, family), as: UTF8.self)
            #expect(name == expected, "\(source) as \(kind)")
        }
    }

    @Test func randomHostileNamesPassTheLinterInBothTimerForms() throws {
        // Names made of the words and bytes the linter and the cleaning care about.
        let pieces = [
            "total", "count", "sum", "bucket", "seconds", "ms", "kb", "s", "counter", "gauge", "histogram", "summary",
            "le", "quantile", "A", "b", "x", "9", "_", ".", "-", ":", "é", "Ms", "__", "kilo", "bits", "Minutes",
        ]
        // A linear congruential generator: the same names every run.
        var state: UInt64 = 42
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for timers in PrometheusOptions.Timers.allCases {
            let ingest = Ingest(maxLineLength: 1024, maxSeries: 100_000)
            var lines: [String] = []
            for index in 0..<3000 {
                let name = (0...next(4)).map { _ in pieces[next(pieces.count)] }.joined()
                let kind = ["c", "g", "ms", "h", "d", "s"][index % 6]
                lines.append("\(name):1|\(kind)|#\(pieces[next(pieces.count)]):v")
            }
            feed(ingest, lines.joined(separator: "\n"))
            let renderer = PrometheusExposition(options: PrometheusOptions(timers: timers))
            let flush = flush(ingest)
            let text = String(
                decoding: renderer.render(flush, flush.summaries(bucketBounds: renderer.options.bucketBounds)).bytes,
                as: UTF8.self)
            _ = try PrometheusText.parse(text)
            #expect(PrometheusText.lint(text) == [], "\(timers)")
        }
    }

    @Test func labelsAreRenamedForPrometheusAndItsLinter() {
        let cases: [(String, String)] = [
            ("__name__", "_name__"), ("podName", "pod_name"), ("le", "_le"), ("quantile", "_quantile"),
            ("1abc", "_1abc"), ("a-b", "a_b"), ("", "_"), ("ok", "ok"),
        ]
        for (sent, expected) in cases {
            #expect(String(decoding: PrometheusFormat.labelName(ArraySlice(sent.utf8)), as: UTF8.self) == expected)
        }
    }

    @Test func bucketListsAreCheckedWithTheReason() throws {
        #expect(try PrometheusOptions.bucketList("0.005, 0.01,1,  2.5") == [0.005, 0.01, 1, 2.5])
        #expect(try PrometheusOptions.bucketList("-1,0") == [-1, 0])
        #expect(try PrometheusOptions.bucketList("+1,2.5e1") == [1, 25])
        let bad: [(String, String)] = [
            ("", "\"\" is not a number"), ("0.1,abc", "\"abc\" is not a number"), ("1,,2", "\"\" is not a number"),
            ("1,0.5", "bounds must be strictly ascending, got 0.5 after 1.0"),
            ("1,1", "bounds must be strictly ascending, got 1.0 after 1.0"),
            ("1,inf", "\"inf\" is not a number"), ("nan", "\"nan\" is not a number"),
            ("0x10", "\"0x10\" is not a number"), ("1,1e999", "bounds must be finite, got inf"),
            ((1...65).map(String.init).joined(separator: ","), "at most 64 bounds, got 65"),
        ]
        for (text, reason) in bad {
            #expect(performing: { try PrometheusOptions.bucketList(text) }, throws: { "\($0)" == reason })
        }
    }

    @Test func seriesThatMeetOnceCleanedAreMergedOrLeftOutAndCounted() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [1, 5]))
        // Three counters whose names clean alike, one name as two unitless sampled kinds and a
        // timer, two tags that make the same label, gauges that meet, and a gauge whose name a
        // histogram holds.
        feed(
            ingest,
            "a.x.c:1|c\na_x_c:2|c\na-x-c:3|c\nlat:1|ms\nlat:2|h\nlat:3|d\nx:1|c|#my-key:v\nx:1|c|#my.key:v\n"
                + "g.x:1|g\ng-x:2|g\nlat:1|g\nlat_count:1|g")
        var (lines, leftOut, merged) = try render(renderer, flush(ingest))
        #expect(lines.contains("a_x_c_total 6"), "three counters merged: 1 + 2 + 3")
        #expect(lines.contains("x_total{my_key=\"v\"} 2"), "two counters whose labels meet")
        #expect(lines.filter { $0 == "# TYPE lat histogram" }.count == 1)
        #expect(lines.contains("lat_bucket{le=\"1\"} 0") && lines.contains("lat_bucket{le=\"5\"} 2"))
        #expect(lines.contains("lat_sum 5") && lines.contains("lat_count 2"), "h and d merged: 2 + 3")
        #expect(lines.contains("# TYPE lat_seconds histogram"), "the timer is told apart by its unit")
        #expect(lines.contains("g_x 1"), "gauges are not merged: the first wins")
        #expect(lines.contains("# TYPE latcount gauge"), "count is the histogram's word: joined on a gauge")
        #expect(merged == 4, "a_x_c twice, x once, lat (d)")
        #expect(leftOut == 2, "g-x, lat (g)")
        // Merged counters stay cumulative from one flush to the next.
        feed(ingest, "a_x_c:4|c\nlat:9|d")
        (lines, leftOut, merged) = try render(renderer, flush(ingest))
        #expect(lines.contains("a_x_c_total 10") && lines.contains("lat_count 3") && lines.contains("lat_sum 14"))
        #expect(lines.contains("lat_bucket{le=\"5\"} 2"), "the d's 9 is above 5")
    }

    @Test func aMappingRulesBucketsAreItsSeriesBoundsAcrossFlushesAndAReloadCarriesTheirCountsOver() throws {
        let rules = [
            try MappingRule(match: "api.*", name: "api_$1", buckets: [0.05, 0.5]),
            try MappingRule(match: "web.*", name: "web.$1", buckets: [1]),
        ]
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: Mapper(rules: rules))
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [0.01, 10]))
        // 30 ms, 300 ms and 3 s through the rule's bounds; the same through the global ones.
        feed(ingest, "api.lat:30:300:3000|ms\nother.lat:30:300:3000|ms")
        var (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.05\"} 1"))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.5\"} 2"))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"+Inf\"} 3"))
        #expect(!lines.contains { $0.hasPrefix("api_lat_seconds_bucket{le=\"0.01\"}") }, "not the global bounds")
        #expect(lines.contains("other_lat_seconds_bucket{le=\"0.01\"} 0"))
        #expect(lines.contains("other_lat_seconds_bucket{le=\"10\"} 3"))
        // Cumulative from one flush to the next; a quiet interval keeps the rule's bounds.
        feed(ingest, "api.lat:40|ms")
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.05\"} 2") && lines.contains("api_lat_seconds_count 4"))
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.5\"} 3"))
        // A reload gives the series other bounds: a bound kept keeps its count, a new one starts
        // from the count of the highest old bound below it; the count goes on.
        ingest.setMapper(
            Mapper(rules: [try MappingRule(match: "api.*", name: "api_$1", buckets: [0.01, 0.05, 0.1])]))
        feed(ingest, "api.lat:50|ms")
        (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.01\"} 0"))
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.05\"} 3"), "2 before, and the 50 ms")
        #expect(lines.contains("api_lat_seconds_bucket{le=\"0.1\"} 3"), "from le=0.05's 2, and the 50 ms")
        #expect(!lines.contains { $0.hasPrefix("api_lat_seconds_bucket{le=\"0.5\"}") })
        #expect(lines.contains("api_lat_seconds_count 5") && lines.contains("api_lat_seconds_bucket{le=\"+Inf\"} 5"))
        // Two series that meet once cleaned are merged only if their bounds are the same.
        let meeting = Ingest(
            maxLineLength: 1024, maxSeries: 100,
            mapper: Mapper(rules: [try MappingRule(match: "q-lat", buckets: [2])]))
        let other = PrometheusExposition(options: PrometheusOptions(buckets: [1]))
        feed(meeting, "q.lat:1|h\nq-lat:1|h\nq_lat:1|h")
        let (merged, leftOut, mergedCount) = try render(other, flush(meeting))
        #expect(merged.contains("q_lat_count 2") && merged.contains("q_lat_bucket{le=\"1\"} 2"), "q.lat and q_lat")
        #expect(leftOut == 1 && mergedCount == 1, "q-lat's bounds differ: left out, not mixed in")
        // A summary form ignores them.
        let summaries = PrometheusExposition(options: PrometheusOptions(timers: .summary))
        feed(ingest, "api.lat:50|ms")
        (lines, _, _) = try render(summaries, flush(ingest))
        #expect(lines.contains("# TYPE api_lat_seconds summary"))
    }

    @Test func mergedHistogramsWhoseBoundsPartAndMeetAgainCountEachSampleOnce() throws {
        func rules(_ second: [Double]) throws -> Mapper {
            Mapper(rules: [
                try MappingRule(match: "lat.q", buckets: [1, 2]), try MappingRule(match: "lat-q", buckets: second),
            ])
        }
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100, mapper: try rules([1, 2]))
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [5]))
        feed(ingest, String(repeating: "lat.q:1|h\n", count: 10) + String(repeating: "lat-q:1|h\n", count: 100))
        var sent = 110.0
        var lastCount = 0.0
        var lastLow = 0.0
        for step in 0..<6 {
            let (lines, _, _) = try render(renderer, flush(ingest))
            let count = try #require(
                lines.first { $0.hasPrefix("lat_q_count ") }.flatMap { Double($0.split(separator: " ")[1]) })
            let low = try #require(
                lines.first { $0.hasPrefix("lat_q_bucket{le=\"1\"} ") }.flatMap { Double($0.split(separator: " ")[1]) })
            // Never more than was sent to both, never less than the last flush showed.
            #expect(count <= sent && count >= lastCount, "step \(step): \(count) of \(sent)")
            #expect(low <= count && low >= lastLow, "step \(step): le=1 \(low)")
            (lastCount, lastLow) = (count, low)
            // The second series' bounds part from the first's, then meet them again.
            ingest.setMapper(try rules(step % 2 == 0 ? [1, 3] : [1, 2]))
            feed(ingest, "lat.q:1|h\nlat-q:1|h")
            sent += 2
        }
        #expect(lastCount >= 110, "nothing counted is forgotten")
    }

    @Test func aMergedCounterNeverGoesDownWhenOneOfItsSeriesExpires() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [1]))
        var shown: [String] = []
        // m.x counts 100 once and expires; m-x, merged into the same m_x_total, goes on.
        for interval in 0..<6 {
            feed(ingest, interval == 0 ? "m.x:100|c\nh.x:1|h\nm-x:1|c\nh-x:2|h" : "m-x:1|c\nh-x:2|h")
            let flush = Flush(
                table: ingest.endInterval(expireAfter: 2), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            let text = String(
                decoding: renderer.render(flush, flush.summaries(bucketBounds: [1])).bytes, as: UTF8.self)
            shown.append(
                text.split(separator: "\n").filter { $0.hasPrefix("m_x_total ") || $0.hasPrefix("h_x_count ") }
                    .joined(separator: ","))
        }
        #expect(
            shown == [
                "m_x_total 101,h_x_count 2", "m_x_total 102,h_x_count 3", "m_x_total 103,h_x_count 4",
                "m_x_total 104,h_x_count 5", "m_x_total 105,h_x_count 6", "m_x_total 106,h_x_count 7",
            ])
        // Once every series of it is gone, it is gone, and starts again from zero if it returns.
        for _ in 0..<3 {
            let flush = Flush(
                table: ingest.endInterval(expireAfter: 2), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            _ = renderer.render(flush, flush.summaries(bucketBounds: [1]))
        }
        feed(ingest, "m-x:1|c")
        let (lines, _, _) = try render(renderer, flush(ingest))
        #expect(lines.contains("m_x_total 1"))
    }

    /// Flushes `ingest` with series expiring after 2 intervals without a line, and renders it.
    func renderExpiring(_ renderer: PrometheusExposition, _ ingest: Ingest) throws -> [String] {
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 2), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        return try render(renderer, flush).lines
    }

    @Test func aSeriesThatComesBackCountingMoreThanBeforeStartsAgainBucketsIncluded() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [0.005, 0.1]))
        feed(ingest, "api.ms:1|ms")
        #expect(try renderExpiring(renderer, ingest).contains("api_seconds_bucket{le=\"0.005\"} 1"))
        // Two flushes without a line: the series expires at the second.
        for _ in 0..<2 { _ = try renderExpiring(renderer, ingest) }
        feed(ingest, "api.ms:50|ms\napi.ms:60|ms\napi.ms:70|ms")
        let lines = try renderExpiring(renderer, ingest)
        #expect(lines.contains("api_seconds_count 3"))
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 0"), "not the old series' sample: \(lines)")
        #expect(lines.contains("api_seconds_bucket{le=\"0.1\"} 3"))
    }

    @Test func readersTablesMergedStartAHistogramAgainOnlyOnceEveryReaderLetItExpire() throws {
        let (a, b) = (Ingest(maxLineLength: 1024, maxSeries: 10), Ingest(maxLineLength: 1024, maxSeries: 10))
        let renderer = PrometheusExposition(options: PrometheusOptions(buckets: [0.005, 0.1]))
        var state = SeriesTable.MergeState()
        func render() throws -> [String] {
            let table = SeriesTable.merging(
                [a.endInterval(expireAfter: 2), b.endInterval(expireAfter: 2)], state: &state)
            let flush = Flush(table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [])
            return try self.render(renderer, flush).lines.filter { $0.hasPrefix("api_seconds_") }
        }
        feed(a, "api.ms:1|ms")
        feed(b, "api.ms:1|ms")
        _ = try render()
        // b goes on; a's copy expires after two flushes and comes back with more samples.
        for _ in 0..<2 {
            feed(b, "api.ms:50|ms")
            _ = try render()
        }
        feed(a, "api.ms:50|ms\napi.ms:50|ms\napi.ms:50|ms")
        var lines = try render()
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 2"), "the series lives on: \(lines)")
        #expect(lines.contains("api_seconds_count 7"))
        // Now both let it expire, and it comes back with more than it had.
        for _ in 0..<2 { _ = try render() }
        feed(a, (0..<8).map { _ in "api.ms:50|ms" }.joined(separator: "\n"))
        lines = try render()
        #expect(lines.contains("api_seconds_bucket{le=\"0.005\"} 0"), "created anew: \(lines)")
        #expect(lines.contains("api_seconds_bucket{le=\"0.1\"} 8") && lines.contains("api_seconds_count 8"))
    }

    @Test func aMergedCounterKeepsWhatASeriesCountedBeforeItCameBackCountingMore() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let renderer = PrometheusExposition()
        var totals: [String] = []
        // m.x and m-x are both shown as m_x_total; m.x expires, and comes back with 5.
        for lines in ["m.x:1|c\nm-x:1|c", "m-x:1|c", "m-x:1|c", "m.x:5|c\nm-x:1|c"] {
            feed(ingest, lines)
            totals += try renderExpiring(renderer, ingest).filter { $0.hasPrefix("m_x_total ") }
        }
        #expect(totals == ["m_x_total 2", "m_x_total 3", "m_x_total 4", "m_x_total 10"])
    }

    @Test func aMergeThatWouldNotBeFiniteIsNotMade() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "ov.x:1e308|c\nov-x:1e308|c\nhm.x:1e308|h\nhm-x:1e308|h")
        let (lines, leftOut, merged) = try render(PrometheusExposition(), flush(ingest))
        #expect(lines.contains("ov_x_total 1e+308") && lines.contains("hm_x_sum 1e+308"))
        #expect(!lines.joined().lowercased().replacingOccurrences(of: "le=\"+inf\"", with: "").contains("inf"))
        #expect(leftOut == 2 && merged == 0)
    }

    @Test func hostileTagsAndNamesStillMakeAValidExposition() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(
            ingest,
            """
            h:1|c|#__name__:x,__foo:y,1abc:z,a-b:"q\\,:empty,ünï:cödé,ok:1,_name__:dup,le:2,podName:p
            t:1|ms|#quantile:q,__name__:y
            t_seconds_sum:1|g
            a.b:1|c
            a_b:1|c
            d:1|c|#a:1,a:2
            d:1|c|#a:1
            help\\me:1|g
            """)
        // Renamed: __name__, __foo, 1abc, a-b, the empty name, ünï, le, podName, and on the timer
        // quantile and __name__; left out: _name__ (after __name__ took its name) and d's second a.
        #expect(ingest.counts.renamedLabels == 12)
        let (lines, leftOut, merged) = try render(PrometheusExposition(), flush(ingest))
        let samples = try PrometheusText.parse(lines.joined(separator: "\n"))
        #expect(
            samples.contains(
                PrometheusText.Sample(
                    name: "h_total",
                    labels: [
                        "_1abc": "z", "_": "empty", "_foo": "y", "_name__": "x", "a_b": "\"q\\", "ok": "1",
                        "_n__": "cödé", "_le": "2", "pod_name": "p",
                    ], value: "1")))
        #expect(samples.contains { $0.name == "t_seconds_bucket" && $0.labels["_quantile"] == "q" })
        #expect(
            samples.filter { $0.name == "ab_total" } == [.init(name: "ab_total", labels: [:], value: "2")], "merged")
        #expect(samples.filter { $0.name == "d_total" } == [.init(name: "d_total", labels: ["a": "1"], value: "2")])
        #expect(samples.contains { $0.name == "t_secondssum" }, "a gauge does not end in _sum")
        #expect(lines.contains("# HELP help_me StatsD gauge help\\\\me: the last value"))
        #expect(leftOut == 0 && merged == 2)
    }

    @Test func theLinterMirrorFindsWhatPromtoolFinds() {
        // The mirror must fail where promtool does, or the checks above prove nothing.
        let problems = PrometheusText.lint(
            """
            # TYPE fooBar counter
            fooBar 1
            # HELP x_count x
            # TYPE x_count gauge
            x_count{le="1",quantile="2"} 2
            # HELP lat_ms_total x
            # TYPE lat_ms_total counter
            lat_ms_total 1
            # HELP up_minutes x
            # TYPE up_minutes gauge
            up_minutes 1
            """)
        #expect(
            problems == [
                "fooBar: no help", "fooBar: counter without _total", "fooBar: camelCase",
                "x_count: _count on a non-histogram, non-summary", "x_count: le label on a non-histogram",
                "x_count: quantile label on a non-summary", "lat_ms_total: abbreviated unit ms",
                "up_minutes: non-base unit minutes",
            ])
    }
}
/// A strict reader of Prometheus' text exposition format 0.0.4, for tests: it throws where a
/// Prometheus scrape would fail (a bad or reserved name, a bad escape, a label twice, a series
/// twice, a name with two TYPE lines or samples away from its TYPE line).
enum PrometheusText {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: String
    }

    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    /// The family of a sample: its name, or for a histogram's `_bucket`, `_sum` and `_count`
    /// and a summary's `_sum` and `_count`, the family's.
    static func family(of name: String, _ typed: [String: String]) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if typed[base] == "histogram" || (typed[base] == "summary" && suffix != "_bucket") { return base }
        }
        return name
    }

    /// The problems Prometheus' linter (`promtool check metrics`) reports, by its rules, as
    /// "family: problem"; the text must parse.
    static func lint(_ text: String) -> [String] {
        guard let samples = try? parse(text) else { return ["does not parse"] }
        var order: [String] = []
        var typed: [String: String] = [:]
        var helped: Set<String> = []
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 3)
            if line.hasPrefix("# HELP "), parts.count >= 3 { helped.insert(String(parts[2])) }
            if line.hasPrefix("# TYPE "), parts.count == 4 {
                order.append(String(parts[2]))
                typed[String(parts[2])] = String(parts[3])
            }
        }
        var labels: [String: Set<String>] = [:]
        for sample in samples {
            let family = family(of: sample.name, typed)
            for label in sample.labels.keys {
                // The structural labels are not the series' own.
                if label == "le" && typed[family] == "histogram" && sample.name.hasSuffix("_bucket") { continue }
                if label == "quantile" && typed[family] == "summary" && sample.name == family { continue }
                labels[family, default: []].insert(label)
            }
        }
        let abbreviations = ["s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"]
        let units = [
            "amperes": "amperes", "bytes": "bytes", "celsius": "celsius", "grams": "grams", "joules": "joules",
            "kelvin": "kelvin", "meters": "meters", "metres": "metres", "seconds": "seconds", "volts": "volts",
            "minutes": "seconds", "hours": "seconds", "days": "seconds", "weeks": "seconds", "kelvins": "kelvin",
            "fahrenheit": "celsius", "rankine": "celsius", "inches": "meters", "yards": "meters", "miles": "meters",
            "bits": "bytes", "calories": "joules", "pounds": "grams", "ounces": "grams",
        ]
        let prefixes = [
            "", "pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega", "mibi",
            "giga", "gibi", "tera", "tebi", "peta", "pebi",
        ]
        func isCamel(_ text: String) -> Bool {
            zip(text, text.dropFirst()).contains { $0.isLowercase && $0.isASCII && $1.isUppercase && $1.isASCII }
        }
        var problems: [String] = []
        for name in order {
            let type = typed[name]!
            func problem(_ text: String) { problems.append("\(name): \(text)") }
            if !helped.contains(name) { problem("no help") }
            if type == "counter" && !name.hasSuffix("_total") { problem("counter without _total") }
            if type != "counter" && type != "untyped" && name.hasSuffix("_total") { problem("_total on a non-counter") }
            if type != "histogram" && name.hasSuffix("_bucket") { problem("_bucket on a non-histogram") }
            for suffix in ["_count", "_sum"] where type != "histogram" && type != "summary" && name.hasSuffix(suffix) {
                problem("\(suffix) on a non-histogram, non-summary")
            }
            let names = labels[name] ?? []
            if type != "histogram" && names.contains("le") { problem("le label on a non-histogram") }
            if type != "summary" && names.contains("quantile") { problem("quantile label on a non-summary") }
            let lower = name.lowercased()
            for word in ["counter", "gauge", "histogram", "summary"]
            where lower.contains("_\(word)_") || lower.hasSuffix("_\(word)") {
                problem("type \(word) in the name")
            }
            if name.contains(":") { problem("colon") }
            if isCamel(name) || names.contains(where: isCamel) { problem("camelCase") }
            for word in abbreviations where lower.contains("_\(word)_") || lower.hasSuffix("_\(word)") {
                problem("abbreviated unit \(word)")
            }
            for word in name.split(separator: "_", omittingEmptySubsequences: false) {
                for prefix in prefixes where word.hasPrefix(prefix) {
                    let unit = String(word.dropFirst(prefix.count))
                    if let base = units[unit], base != String(word) { problem("non-base unit \(word)") }
                }
            }
        }
        return problems
    }

    static func parse(_ text: String) throws -> [Sample] {
        var samples: [Sample] = []
        var typed: [String: String] = [:]  // family name → type
        var finished: Set<String> = []  // families whose block has ended
        var current: String?
        var series: Set<String> = []
        func isName(_ name: Substring, colons: Bool) -> Bool {
            guard let first = name.unicodeScalars.first, first.isASCII,
                first.properties.isAlphabetic || first == "_" || (colons && first == ":")
            else { return false }
            return name.unicodeScalars.allSatisfy {
                $0.isASCII
                    && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || (colons && $0 == ":"))
            }
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4, isName(parts[2], colons: true), typed[String(parts[2])] == nil else {
                    throw Invalid(description: "bad or second TYPE line: \(line)")
                }
                if let current { finished.insert(current) }
                current = String(parts[2])
                typed[String(parts[2])] = String(parts[3])
                continue
            }
            if line.hasPrefix("#") { continue }
            var rest = line[...]
            let name = rest.prefix { $0 != "{" && $0 != " " }
            rest = rest.dropFirst(name.count)
            guard isName(name, colons: true) else { throw Invalid(description: "bad metric name: \(line)") }
            var labels: [String: String] = [:]
            if rest.first == "{" {
                rest = rest.dropFirst()
                while rest.first != "}" {
                    let label = rest.prefix { $0 != "=" }
                    guard isName(label, colons: false), !label.hasPrefix("__"), labels[String(label)] == nil else {
                        throw Invalid(description: "bad, reserved or repeated label name \(label): \(line)")
                    }
                    rest = rest.dropFirst(label.count)
                    guard rest.hasPrefix("=\"") else { throw Invalid(description: "no =\" after \(label): \(line)") }
                    rest = rest.dropFirst(2)
                    var value = ""
                    while let character = rest.first, character != "\"" {
                        rest = rest.dropFirst()
                        guard character == "\\" else {
                            guard character != "\n" else { throw Invalid(description: "raw newline: \(line)") }
                            value.append(character)
                            continue
                        }
                        switch rest.first {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw Invalid(description: "bad escape: \(line)")
                        }
                        rest = rest.dropFirst()
                    }
                    guard rest.first == "\"" else { throw Invalid(description: "unterminated value: \(line)") }
                    rest = rest.dropFirst()
                    labels[String(label)] = value
                    if rest.first == "," {
                        rest = rest.dropFirst()
                    } else if rest.first != "}" {
                        throw Invalid(description: "expected , or }: \(line)")
                    }
                }
                rest = rest.dropFirst()
            }
            guard rest.first == " ", let value = Double(rest.dropFirst()) ?? (rest.dropFirst() == "NaN" ? .nan : nil)
            else { throw Invalid(description: "bad value: \(line)") }
            _ = value
            let family = family(of: String(name), typed)
            guard family == current, !finished.contains(family) else {
                throw Invalid(description: "a sample away from its family's TYPE line: \(line)")
            }
            let key = String(name) + labels.sorted { $0.key < $1.key }.description
            guard series.insert(key).inserted else { throw Invalid(description: "a series twice: \(line)") }
            samples.append(Sample(name: String(name), labels: labels, value: String(rest.dropFirst())))
        }
        return samples
    }
}

import Foundation
import LoopdCore
import Testing

@Suite("Output formats")
struct OutputFormatsTests {
    /// A flush of a few series of each kind, with one internal counter.
    func sampleFlush() -> (Flush, [Summary]) {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "hits:3|c|#env:prod,canary\nq\"uote:1|c\nload:0.25|g\nt:1:2:3:4|ms|#b:x\nu:a:b|s\nidle:1|ms")
        _ = ingest.endInterval(expireAfter: 0)
        feed(ingest, "hits:2|c|#env:prod,canary\nt:1:2:3:4|ms|#b:x\nu:a:b|s")
        let metric = InternalMetric(name: "loopd.lines_received", kind: .counter, value: 3, total: 9)
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000.25, intervalSeconds: 10,
            internalMetrics: [metric])
        return (flush, flush.summaries())
    }

    @Test func summariesIntoAnArrayReuseItsStorageAndReplaceWhatItHeld() throws {
        let (flush, expected) = sampleFlush()
        #expect(expected.count == 6)
        var kept: [Summary] = []
        kept.reserveCapacity(64)
        let storage = kept.withUnsafeBufferPointer { $0.baseAddress }
        flush.summaries(into: &kept)
        #expect(kept == expected)
        #expect(kept.withUnsafeBufferPointer { $0.baseAddress } == storage, "the storage is reused")
        #expect(kept.capacity >= 64, "with its room: made anew it would have room for about 6")
        flush.summaries(into: &kept)
        #expect(kept == expected, "what it held is replaced, not added to")
        // Storage that another array shares is left to it.
        let shared = kept
        flush.summaries(into: &kept, percentiles: [50])
        #expect(shared == expected)
        #expect(kept.first { $0.stats != nil }?.stats?.percentiles.map(\.p) == [50])
        // Room for more than twice the series and 1,024 more is let go.
        var roomy: [Summary] = []
        roomy.reserveCapacity(4096)
        flush.summaries(into: &roomy)
        #expect(roomy == expected)
        #expect(roomy.capacity < 4096)
        // Storage that must grow takes an eighth more than the series need.
        var small: [Summary] = []
        var grown = 0
        for count in [16, 64, 96, 100, 104] {
            let ingest = Ingest(maxLineLength: 1024, maxSeries: 1000)
            feed(ingest, (0..<count).map { "series.\($0):1|c" }.joined(separator: "\n"))
            let capacity = small.capacity
            Flush(table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
                .summaries(into: &small)
            #expect(small.count == count && small.capacity >= count)
            if small.capacity != capacity { grown += 1 }
        }
        #expect(small.capacity >= 108, "room for an eighth more than 96")
        #expect(grown == 3, "grown for 16, 64 and 96 series; 100 and 104 fit")
    }

    @Test func jsonLinesIsOneObjectPerFlush() throws {
        let (flush, summaries) = sampleFlush()
        let bytes = JSONLinesFormat.format(flush, summaries)
        #expect(bytes.last == UInt8(ascii: "\n"))
        #expect(bytes.dropLast().contains(UInt8(ascii: "\n")) == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(object["timestamp"] as? Double == 1_700_000_000.25)
        #expect(object["interval"] as? Double == 10)
        let counters = try #require(object["counters"] as? [[String: Any]])
        let hits = try #require(counters.first { $0["name"] as? String == "hits" })
        #expect(hits["tags"] as? [String] == ["canary", "env:prod"])
        #expect(hits["value"] as? Double == 2)
        #expect(counters.contains { $0["name"] as? String == "q\"uote" && $0["value"] as? Double == 0 })
        #expect(counters.contains { $0["name"] as? String == "loopd.lines_received" && $0["value"] as? Double == 3 })
        let timers = try #require(object["timers"] as? [[String: Any]])
        #expect(timers.count == 1, "a timer without samples in the interval is left out")
        #expect(timers[0]["type"] as? String == "ms")
        #expect(timers[0]["p99"] as? Double == 4)
        #expect(timers[0]["mean"] as? Double == 2.5)
        let sets = try #require(object["sets"] as? [[String: Any]])
        #expect(sets.count == 1 && sets[0]["count"] as? Double == 2)
        let gauges = try #require(object["gauges"] as? [[String: Any]])
        #expect(gauges.contains { $0["name"] as? String == "load" && $0["value"] as? Double == 0.25 })
    }

    @Test func numbersAreIntegersWhenWholeElseTheShortestFormAndNamesAreEscaped() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(
            ingest,
            "big:123456789012345|g\nhuge:1e15|g\nneg:-42|g\nhalf:0.5|g\ntiny:0.00001|g\nzero:0|g\n"
                + "back\\slash:7|g\nctl\u{01}x:8|g\nplain.name:9|g")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [])
        let text = String(decoding: JSONLinesFormat.format(flush, flush.summaries()), as: UTF8.self)
        for expected in [
            #""name":"big","tags":[],"value":123456789012345}"#,
            #""name":"huge","tags":[],"value":1000000000000000.0}"#,
            #""name":"neg","tags":[],"value":-42}"#, #""name":"half","tags":[],"value":0.5}"#,
            #""name":"tiny","tags":[],"value":1e-05}"#, #""name":"zero","tags":[],"value":0}"#,
            #""name":"back\\slash","tags":[],"value":7}"#, #""name":"ctl\u0001x","tags":[],"value":8}"#,
            #""name":"plain.name","tags":[],"value":9}"#,
        ] {
            #expect(text.contains(expected), "\(expected) in \(text)")
        }
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) is [String: Any])
    }

    @Test func graphiteIsPathValueTimestampWithTags() {
        let (flush, summaries) = sampleFlush()
        let lines = String(decoding: GraphiteFormat.format(flush, summaries), as: UTF8.self).split(separator: "\n")
        #expect(lines.contains("hits;canary=true;env=prod 2 1700000000"))
        #expect(lines.contains("load 0.25 1700000000"))
        #expect(lines.contains("t.p95;b=x 4 1700000000"))
        #expect(lines.contains("t.count;b=x 4 1700000000"))
        #expect(lines.contains("u 2 1700000000"))
        #expect(lines.contains("loopd.lines_received 3 1700000000"))
        #expect(!lines.contains { $0.hasPrefix("idle") }, "no samples, no lines")
        #expect(lines.allSatisfy { $0.split(separator: " ").count == 3 })
    }

    @Test func graphitePathsCannotLeaveTheirDirectoryOrHoldAnEmptyNode() {
        let cases: [(String, String)] = [
            ("api.requests", "api.requests"), ("weird/path\\x", "weird-path_x"), ("a b\tc", "a_b_c"),
            ("dots..in...name.", "dots.in.name"), (".lead", "lead"), ("../../etc/passwd", "-.-etc-passwd"),
            ("glob*?[x]{y}", "glob___x__y_"), ("ünï.cödé", "__n__.c__d__"), ("semi;colon=x", "semi_colon_x"),
            ("", "_"), ("...", "_"), ("Mixed-Case_ok.9", "Mixed-Case_ok.9"),
        ]
        for (name, path) in cases {
            #expect(String(decoding: GraphiteFormat.path(ArraySlice(name.utf8)), as: UTF8.self) == path, "\(name)")
        }
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "x:1|c|#name:n,a=b:c;d,~v:~w,e:,ok.k:v.v")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        let text = String(decoding: GraphiteFormat.format(flush, flush.summaries()), as: UTF8.self)
        #expect(text == "x;a_b=c_d;e=_;_name=n;ok.k=v.v;_v=_w 1 0\n")
        // Keys that meet once cleaned: Graphite keeps one value per key, so the first is sent.
        feed(ingest, "y:1|c|#*:a,?:b,name:c,_name:d")
        let second = Flush(
            table: ingest.endInterval(expireAfter: 1), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        let sent = String(decoding: GraphiteFormat.format(second, second.summaries()), as: UTF8.self)
        #expect(sent.contains("\ny;_=a;_name=d 1 0\n") || sent.hasPrefix("y;_=a;_name=d 1 0\n"), "\(sent)")
    }

    @Test func aGraphiteNodeTooLongForAFileNameIsCutAndKeepsAHash() {
        let long = String(repeating: "x", count: 300)
        let path = String(decoding: GraphiteFormat.path(ArraySlice("app.\(long).count".utf8)), as: UTF8.self)
        let nodes = path.split(separator: ".")
        #expect(nodes.count == 3 && nodes[0] == "app" && nodes[2] == "count")
        #expect(
            nodes[1].utf8.count == GraphiteFormat.maxNode
                && nodes[1].hasPrefix(String(repeating: "x", count: 191) + "_"))
        // Two long nodes that differ only past the cut stay apart, and a path is the same in
        // every run (FNV-1a of 300 x's, as Python computes it).
        let other = String(decoding: GraphiteFormat.path(ArraySlice((long + "y").utf8)), as: UTF8.self)
        #expect(other != String(decoding: GraphiteFormat.path(ArraySlice(long.utf8)), as: UTF8.self))
        #expect(String(decoding: GraphiteFormat.path(ArraySlice(long.utf8)), as: UTF8.self).hasSuffix("_970138f5"))
        let exact = String(repeating: "z", count: GraphiteFormat.maxNode)
        #expect(String(decoding: GraphiteFormat.path(ArraySlice(exact.utf8)), as: UTF8.self) == exact)
    }

    @Test func sampledTimersScaleTheirSumAsTheirCountInEveryOutput() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        // All samples are 10; half of them were sent (rate 0.5), and one more at rate 1.
        feed(ingest, "t:10|ms|@0.5\nt:10:10|ms|@0.5\nt:10|ms")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [])
        let summaries = flush.summaries()
        let prometheus = String(decoding: PrometheusFormat.format(flush, summaries), as: UTF8.self)
        #expect(prometheus.contains("\nt_seconds_sum 0.07\n") && prometheus.contains("\nt_seconds_count 7\n"))
        let graphite = String(decoding: GraphiteFormat.format(flush, summaries), as: UTF8.self)
        #expect(graphite.contains("t.count 7 1700000000\n") && graphite.contains("t.sum 70 1700000000\n"))
        #expect(graphite.contains("t.mean 10 1700000000\n"))
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(JSONLinesFormat.format(flush, summaries))) as? [String: Any])
        let timer = try #require((json["timers"] as? [[String: Any]])?.first)
        #expect(timer["count"] as? Double == 7 && timer["sum"] as? Double == 70 && timer["mean"] as? Double == 10)
        #expect(timer["samples"] as? Double == 4, "what arrived, unscaled")
    }

    @Test func noOutputCarriesANonFiniteValueAndTheRefusedLinesAreCounted() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var refused: [String] = []
        ingest.onBadLine = { reason, line in
            if reason == .nonFinite { refused.append(String(decoding: line, as: UTF8.self)) }
        }
        // A histogram's total sum, since creation, overflows in the second interval only.
        feed(ingest, "h:1e308|h")
        _ = ingest.endInterval(expireAfter: 0)
        feed(
            ingest,
            """
            c:-1e308|c|@0.001
            c:1e308|c|@0.001
            c:1|c
            c2:1e308|c
            c2:1e308|c
            c3:1e308:1e308|c
            c4:1|c|@1e-308
            c4:1|c|@1e-308
            g:1e308|g
            g:+1e308|g
            g2:-1e308|g
            g2:-1e308|g
            t:1e308|ms
            t:1e308|ms
            t2:1e308|ms
            t2:-1e308|ms
            t2:1e308|ms
            t2:-1e308|ms
            t2:-1e308|ms
            t3:1|ms|@5e-324
            t3:2|ms
            h:1e308|h
            h:1|h
            p:inf|c
            p:1e400|c
            """)
        #expect(
            refused == [
                "c:-1e308|c|@0.001", "c:1e308|c|@0.001", "c2:1e308|c", "c3:1e308:1e308|c", "c4:1|c|@1e-308",
                "g:+1e308|g", "g2:-1e308|g", "t:1e308|ms", "t3:1|ms|@5e-324", "h:1e308|h",
            ])
        #expect(ingest.counts.badLines == 12, "the refused lines, and the two the parser rejects")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [
                InternalMetric(
                    name: "loopd.bad_lines", kind: .counter, value: Double(ingest.counts.badLines),
                    total: Double(ingest.counts.badLines))
            ])
        let summaries = flush.summaries()
        let flushed = Flushed(flush)
        #expect(flushed.counters == ["c": 1, "c2": 1e308, "c4": 1e308])
        #expect(flushed.gauges == ["g": 1e308, "g2": -1e308])
        #expect(flushed.stats["t2"]?.stats.sum == -1e308, "summed in arrival order, as recorded")
        #expect(flushed.stats["t3"]?.count == 1)

        let json = String(decoding: JSONLinesFormat.format(flush, summaries), as: UTF8.self)
        let graphite = String(decoding: GraphiteFormat.format(flush, summaries), as: UTF8.self)
        let prometheus = String(decoding: PrometheusFormat.format(flush, summaries), as: UTF8.self)
        // A histogram's last bucket is `le="+Inf"` by definition, not a value.
        let values = prometheus.replacingOccurrences(of: "le=\"+Inf\"", with: "")
        for (format, text) in [("JSON", json), ("Graphite", graphite), ("Prometheus", values)] {
            for word in ["null", "nan", "inf"] {
                #expect(!text.lowercased().contains(word), "\(format) output has \(word):\n\(text)")
            }
        }
        #expect(json.contains("{\"name\":\"loopd.bad_lines\",\"tags\":[],\"value\":12,\"rate\":1.2}"))
        // t2's squares overflow: its sum of squares and standard deviation are left out, the rest
        // is there.
        #expect(
            json.contains("{\"name\":\"t2\",\"tags\":[],\"type\":\"ms\",\"count\":5,\"samples\":5,\"sum\":-1e+308,"))
        #expect(!graphite.contains("t2.sum_squares") && !graphite.contains("t2.stddev") && graphite.contains("t2.mean"))
        #expect(graphite.contains("loopd.bad_lines 12 1700000000\n"))
        #expect(prometheus.contains("loopd_bad_lines_total 12\n"))
        #expect(prometheus.contains("h_sum 1e+308\n"))
    }

    @Test func etsysTrimmedStatisticsAndMedianAreItsOwn() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        feed(ingest, "t:10:1:9:2:8:3:7:4:6:5|ms\nodd:3:1:2|ms\n")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 2, internalMetrics: [])
        let summaries = flush.summaries(percentiles: [90, 4, 55], trimmed: true)
        let t = try #require(summaries.first { flush.name($0.series).elementsEqual("t".utf8) }?.stats)
        #expect(t.median == 5.5, "even: the mean of the two middle samples")
        // round(90% of 10) = 9 samples; round(4% of 10) = 0: left out; round(55% of 10) = 5.5 → 6.
        #expect(
            t.trimmed == [
                .init(p: 90, count: 9, sum: 45, sumSquares: 285, upper: 9),
                .init(p: 55, count: 6, sum: 21, sumSquares: 91, upper: 6),
            ])
        let odd = try #require(summaries.first { flush.name($0.series).elementsEqual("odd".utf8) }?.stats)
        #expect(odd.median == 2)
        #expect(flush.summaries().allSatisfy { $0.stats?.trimmed.isEmpty ?? true }, "only when asked")
    }

    @Test func etsysTrimmedStatisticsFromTheSketchAreWithinItsAccuracy() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        var lines = ""
        for value in 1...10_000 { lines += "t:\(value)|ms\n" }
        feed(ingest, lines)
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 2, internalMetrics: [])
        let stats = try #require(flush.summaries(percentiles: [90], trimmed: true).first?.stats)
        #expect(stats.approximate)
        let trimmed = try #require(stats.trimmed.first)
        #expect(trimmed.count == 9000)
        let exactSum = Double(9000 * 9001 / 2)
        #expect(abs(trimmed.sum - exactSum) <= 0.01 * exactSum)
        #expect(abs(trimmed.upper - 9000) <= 90)
        #expect(abs(try #require(stats.median) - 5000.5) <= 50.1)
    }

    @Test func theEtsyLayoutPutsEachSeriesWhereEtsysDashboardsLook() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        feed(ingest, "hits:10|c|#env:prod\nlevel:7|g\nlat:1:2:3:4|ms\nusers:a:b|s\nidle:1|ms\n")
        _ = ingest.endInterval(expireAfter: 0)
        feed(ingest, "hits:10|c|#env:prod\nlevel:7|g\nlat:1:2:3:4|ms\nusers:a:b|s\n")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 2,
            internalMetrics: [
                InternalMetric(name: "loopd.lines_received", kind: .counter, value: 4, total: 9),
                InternalMetric(name: "loopd.series", kind: .gauge, value: 5),
            ])
        let text = String(
            decoding: GraphiteFormat.format(flush, flush.summaries(percentiles: [50], trimmed: true), layout: .etsy),
            as: UTF8.self)
        #expect(
            text == """
                stats.hits;env=prod 5 1700000000
                stats_counts.hits;env=prod 10 1700000000
                stats.gauges.level 7 1700000000
                stats.timers.lat.count_50 2 1700000000
                stats.timers.lat.mean_50 1.5 1700000000
                stats.timers.lat.upper_50 2 1700000000
                stats.timers.lat.sum_50 3 1700000000
                stats.timers.lat.sum_squares_50 5 1700000000
                stats.timers.lat.std 1.118033988749895 1700000000
                stats.timers.lat.upper 4 1700000000
                stats.timers.lat.lower 1 1700000000
                stats.timers.lat.count 4 1700000000
                stats.timers.lat.count_ps 2 1700000000
                stats.timers.lat.sum 10 1700000000
                stats.timers.lat.sum_squares 30 1700000000
                stats.timers.lat.mean 2.5 1700000000
                stats.timers.lat.median 2.5 1700000000
                stats.sets.users.count 2 1700000000
                stats.timers.idle.count 0 1700000000
                stats.timers.idle.count_ps 0 1700000000
                stats.loopd.lines_received 2 1700000000
                stats_counts.loopd.lines_received 4 1700000000
                stats.gauges.loopd.series 5 1700000000

                """)
    }

    @Test func theEtsyLayoutsSumsAreOfTheSamplesAsReceivedAndItsCountScaled() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 10)
        feed(ingest, "rt:10|ms|@0.5\nrt:20|ms\none:7|ms\n")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        let text = String(
            decoding: GraphiteFormat.format(flush, flush.summaries(percentiles: [0.001], trimmed: true), layout: .etsy),
            as: UTF8.self)
        // As etsy's StatsD: count 3 (10 sampled at 0.5 counts twice), sum 30, mean 15, std 5.
        for line in [
            "stats.timers.rt.count 3 ", "stats.timers.rt.sum 30 ", "stats.timers.rt.mean 15 ",
            "stats.timers.rt.sum_squares 500 ", "stats.timers.rt.std 5 ",
            // One sample is every percentile's, as etsy counts it.
            "stats.timers.one.count_0_001 1 ", "stats.timers.one.upper_0_001 7 ",
        ] {
            #expect(text.contains(line), "\(line) in:\n\(text)")
        }
    }
}

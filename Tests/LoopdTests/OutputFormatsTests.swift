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

    @Test func prometheusHasCumulativeCountersAndSummaries() {
        let (flush, summaries) = sampleFlush()
        let text = String(decoding: PrometheusFormat.format(flush, summaries), as: UTF8.self)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains("# TYPE hits counter"))
        #expect(lines.contains("hits{canary=\"true\",env=\"prod\"} 5"), "cumulative over both intervals")
        #expect(lines.contains("q_uote 1"))
        #expect(lines.contains("# TYPE t summary"))
        #expect(lines.contains("t{b=\"x\",quantile=\"0.99\"} 4"))
        #expect(lines.contains("t_count{b=\"x\"} 8"))
        #expect(lines.contains("t_sum{b=\"x\"} 20"))
        #expect(!lines.contains { $0.hasPrefix("idle{quantile=") }, "no quantile (never NaN) after a quiet interval")
        #expect(lines.contains { $0.hasPrefix("idle_count ") })
        #expect(!text.contains("NaN") && !text.contains("Inf"), "no output carries a non-finite value")
        #expect(lines.contains("# TYPE u gauge"))
        #expect(lines.contains("loopd_lines_received 9"))
        #expect(lines.filter { $0.hasPrefix("# TYPE hits ") }.count == 1)
    }

    @Test func prometheusShowsEachSeriesOnceAndCountsTheOnesLeftOut() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        // Three names that sanitize alike, one name as three sampled kinds, two tags that make
        // the same label, and a counter whose name a summary's `_count` holds.
        feed(ingest, "a.b.c:1|c\na_b_c:2|c\na-b-c:3|c\nlat:1|ms\nlat:2|h\nlat:3|d\nx:1|c|#my-key:v\nx:1|c|#my.key:v")
        feed(ingest, "lat_count:1|c")
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [])
        let exposition = PrometheusFormat.exposition(flush, flush.summaries())
        let lines = String(decoding: exposition.bytes, as: UTF8.self).split(separator: "\n")
        let samples = lines.filter { !$0.hasPrefix("#") }.map { $0.split(separator: " ")[0] }
        #expect(Set(samples).count == samples.count, "every sample's name and labels are unique: \(samples)")
        #expect(lines.filter { $0 == "# TYPE lat summary" }.count == 1)
        #expect(lines.filter { $0.hasPrefix("lat{quantile=\"0.5\"}") }.count == 1)
        #expect(exposition.leftOut == 6, "a_b_c twice, lat twice, x once, lat_count once")
    }

    @Test func prometheusCountersNeverDecreaseAndNegativeValuesAreCounted() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "c:5|c\nc:-3|c\nc:2:-1|c")
        let first = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [])
        var prometheus = String(decoding: PrometheusFormat.format(first, first.summaries()), as: UTF8.self)
        #expect(prometheus.contains("\nc 7\n"), "5 + 2: the negative values are left out")
        #expect(ingest.counts.negativeCounterValues == 2)
        let graphite = String(decoding: GraphiteFormat.format(first, first.summaries()), as: UTF8.self)
        #expect(graphite.contains("c 3 1700000000\n"), "the interval's sum keeps them: 5 - 3 + 2 - 1")
        feed(ingest, "c:-10|c")
        let second = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_010, intervalSeconds: 10,
            internalMetrics: [])
        prometheus = String(decoding: PrometheusFormat.format(second, second.summaries()), as: UTF8.self)
        #expect(prometheus.contains("\nc 7\n"), "never below the previous scrape")
        #expect(ingest.counts.negativeCounterValues == 3)
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
        #expect(prometheus.contains("\nt_sum 70\n") && prometheus.contains("\nt_count 7\n"))
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
        for (format, text) in [("JSON", json), ("Graphite", graphite), ("Prometheus", prometheus)] {
            for word in ["null", "nan", "inf"] {
                #expect(!text.lowercased().contains(word), "\(format) output has \(word):\n\(text)")
            }
        }
        #expect(json.contains("{\"name\":\"loopd.bad_lines\",\"tags\":[],\"value\":12}"))
        #expect(graphite.contains("loopd.bad_lines 12 1700000000\n"))
        #expect(prometheus.contains("loopd_bad_lines 12\n"))
        #expect(prometheus.contains("h_sum 1e+308\n"))
    }

    @Test func hostileTagsAndNamesStillMakeAValidPrometheusExposition() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(
            ingest,
            """
            h:1|c|#__name__:x,__foo:y,1abc:z,a-b:"q\\,:empty,ünï:cödé,ok:1,_name__:dup
            t:1|ms|#quantile:q,__name__:y
            t_sum:1|c
            a.b:1|c
            a_b:1|c
            d:1|c|#a:1,a:2
            d:1|c|#a:1
            """)
        // Renamed: __name__, __foo, 1abc, a-b, the empty name, ünï, and on the timer quantile
        // and __name__; left out: _name__ (after __name__ took its name) and d's second a.
        #expect(ingest.counts.renamedLabels == 10)
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        let text = String(decoding: PrometheusFormat.format(flush, flush.summaries()), as: UTF8.self)
        let samples = try PrometheusText.parse(text)
        #expect(
            samples.contains(
                PrometheusText.Sample(
                    name: "h",
                    labels: [
                        "_1abc": "z", "_": "empty", "_foo": "y", "_name__": "x", "a_b": "\"q\\", "ok": "1",
                        "_n__": "cödé",
                    ], value: "1")))
        #expect(samples.contains { $0.name == "t" && $0.labels["_quantile"] == "q" && $0.labels["quantile"] == "0.99" })
        #expect(samples.filter { $0.name == "a_b" }.count == 1, "a.b and a_b meet as a_b: the first is kept")
        #expect(samples.filter { $0.name == "d" }.count == 1)
        #expect(!samples.contains { $0.name == "t_sum" && $0.labels.isEmpty }, "t_sum belongs to the summary t")
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
            // The family: the name, or for a summary's _sum and _count, the summary's.
            var family = String(name)
            for suffix in ["_sum", "_count"] where name.hasSuffix(suffix) {
                let base = String(name.dropLast(suffix.count))
                if typed[base] == "summary" { family = base }
            }
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

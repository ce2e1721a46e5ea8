import Foundation
import LoopdCore
import Testing

/// docs/loopd.md's "What each output emits" shows one flush of an example input in every
/// output: this renders it and compares, so the docs say what loopd does.
@Suite("The docs' example outputs")
struct DocsExampleTests {
    /// The code block after `<!-- example: name -->` in docs/loopd.md.
    static func block(_ name: String) throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../docs/loopd.md")
        let docs = try String(contentsOf: url, encoding: .utf8)
        let marker = try #require(docs.range(of: "<!-- example: \(name) -->"), "no example \(name) in docs/loopd.md")
        let open = try #require(docs.range(of: "```", range: marker.upperBound..<docs.endIndex))
        let start = try #require(docs.range(of: "\n", range: open.upperBound..<docs.endIndex)).upperBound
        let close = try #require(docs.range(of: "\n```", range: start..<docs.endIndex))
        return String(docs[start..<close.lowerBound]) + "\n"
    }

    /// The example's flush, as loopd renders it (without loopd's own metrics).
    static func rendered() throws -> (json: [UInt8], graphite: String, prometheus: String) {
        let ingest = Ingest(maxLineLength: 8192, maxSeries: 100)
        feed(ingest, try block("input"))
        let (events, checks) = ingest.takeEvents()
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 1_700_000_000, intervalSeconds: 10,
            internalMetrics: [], events: events, serviceChecks: checks)
        let renderer = PrometheusExposition()
        let summaries = flush.summaries(bucketBounds: renderer.options.bucketBounds)
        return (
            JSONLinesFormat.format(flush, summaries),
            String(decoding: GraphiteFormat.format(flush, summaries), as: UTF8.self),
            String(decoding: renderer.render(flush, summaries).bytes, as: UTF8.self)
        )
    }

    @Test func theJSONExampleIsWhatLoopdWrites() throws {
        let json = try Self.rendered().json
        let documented = try JSONSerialization.jsonObject(with: Data(try Self.block("json").utf8)) as? NSDictionary
        let written = try JSONSerialization.jsonObject(with: Data(json)) as? NSDictionary
        #expect(documented != nil && documented == written, "loopd writes: \(String(decoding: json, as: UTF8.self))")
    }

    @Test func theGraphiteExampleIsWhatLoopdSends() throws {
        let sent = try Self.rendered().graphite
        #expect(try Self.block("graphite") == sent, "loopd sends:\n\(sent)")
    }

    @Test func thePrometheusExampleIsWhatLoopdServes() throws {
        let served = try Self.rendered().prometheus
        #expect(try Self.block("prometheus") == served, "loopd serves:\n\(served)")
        _ = try PrometheusText.parse(served)
        #expect(PrometheusText.lint(served) == [])
    }
}

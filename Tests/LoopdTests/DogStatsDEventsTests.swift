import Foundation
import LoopdCore
import Testing

@Suite("DogStatsD events and service checks")
struct DogStatsDEventsTests {
    func event(_ line: String) -> DogStatsDEvent? {
        var line = line
        return line.withUTF8 { DogStatsDEvent.parse(UnsafeRawBufferPointer($0)) }
    }

    func check(_ line: String) -> DogStatsDServiceCheck? {
        var line = line
        return line.withUTF8 { DogStatsDServiceCheck.parse(UnsafeRawBufferPointer($0)) }
    }

    @Test func eventsAreReadWithEveryField() throws {
        // The lengths are in bytes: "a|é" is 4, and its | is the title's, not a separator.
        let parsed = try #require(
            event(
                "_e{4,10}:a|é|line\\nline|d:1700000000|h:web-1|k:deploy|p:low|s:jenkins|t:success|#env:prod,canary|c:abc|card:low"
            ))
        var expected = DogStatsDEvent(title: "a|é", text: "line\nline")
        expected.timestamp = 1_700_000_000
        expected.hostname = "web-1"
        expected.aggregationKey = "deploy"
        expected.priority = "low"
        expected.sourceType = "jenkins"
        expected.alertType = "success"
        expected.tags = ["env:prod", "canary"]
        #expect(parsed == expected)
        #expect(event("_e{1,0}:x|") == DogStatsDEvent(title: "x", text: ""))
    }

    @Test(arguments: [
        "_e{5,4}:title|tex", "_e{5,4}:titl|text", "_e{5,4}:title|texts", "_e{x,4}:title|text", "_e{5}:title|text",
        "_e{5,4}title|text", "_e{0,4}:|text", "_e{999999999,1}:x|y",
        "_e{1234567890,1}:x|y", "_e{5,4}:title+text",
    ])
    func malformedEventsAreRefused(line: String) {
        #expect(event(line) == nil)
    }

    @Test func serviceChecksAreReadWithEveryField() throws {
        let parsed = try #require(
            check("_sc|db.up|2|d:1700000000|h:db-1|#env:prod|m:down\\nsince m\\: 10:00|c:abc|card:low"))
        var expected = DogStatsDServiceCheck(name: "db.up", status: 2)
        expected.timestamp = 1_700_000_000
        expected.hostname = "db-1"
        expected.tags = ["env:prod"]
        expected.message = "down\nsince m: 10:00"
        #expect(parsed == expected)
        #expect(check("_sc|x|0") == DogStatsDServiceCheck(name: "x", status: 0))
        // A timestamp that is not a number is ignored, as DogStatsD's agent does.
        #expect(check("_sc|x|1|d:soon") == DogStatsDServiceCheck(name: "x", status: 1))
        #expect(event("_e{1,1}:a|b|d:soon") == DogStatsDEvent(title: "a", text: "b"))
    }

    @Test(arguments: ["_sc|db.up|4", "_sc||0", "_sc|db.up", "_sc|db.up|", "_sc|db.up|01"])
    func malformedServiceChecksAreRefused(line: String) {
        #expect(check(line) == nil)
    }

    @Test func ingestCountsThemApartFromBadLinesAndKeepsThemForTheFlush() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        feed(ingest, "_e{2,2}:up|ok|#a\n_sc|db|1|m:slow\n_e{1,1}:5|c\n_e{9,1}:x|y\n_sc|db|7\nhits:1|c")
        #expect(ingest.counts.events == 2, "_e{1,1}:5|c is an event titled 5, not a counter")
        #expect(ingest.counts.serviceChecks == 1)
        #expect(ingest.counts.badLines == 2 && reasons == [.badEvent, .badServiceCheck])
        #expect(ingest.counts.lines == 6)
        #expect(ingest.table.count == 1)
        let (events, checks) = ingest.takeEvents()
        #expect(events.map(\.title) == ["up", "5"] && events[0].tags == ["a"])
        #expect(checks.map(\.message) == ["slow"])
        #expect(ingest.takeEvents().events.isEmpty, "taken once")
    }

    @Test func anEventLongerThanALineIsRefusedAsOne() {
        let ingest = Ingest(maxLineLength: 64, maxSeries: 100)
        var reasons: [LineError] = []
        ingest.onBadLine = { reason, _ in reasons.append(reason) }
        let text = String(repeating: "x", count: 100)
        feed(ingest, "_e{1,100}:t|\(text)\n_sc|c|0|m:\(text)\n_e{1,1}:t|x")
        #expect(reasons == [.tooLong, .tooLong])
        #expect(ingest.counts.events == 1 && ingest.counts.serviceChecks == 0 && ingest.counts.badLines == 2)
        #expect(ingest.takeEvents().events.map(\.text) == ["x"])
    }

    @Test func eachIntervalKeepsABoundedNumberAndCountsTheRest() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        let limit = Ingest.maxEventsPerInterval
        for _ in 0..<(limit + 5) { feed(ingest, "_e{1,1}:a|b\n_sc|c|0") }
        #expect(ingest.counts.events == UInt64(limit + 5) && ingest.counts.serviceChecks == UInt64(limit + 5))
        #expect(ingest.counts.droppedEvents == 10)
        let (events, checks) = ingest.takeEvents()
        #expect(events.count == limit && checks.count == limit)
        feed(ingest, "_e{1,1}:a|b")
        #expect(ingest.takeEvents().events.count == 1, "the next interval starts empty")
    }

    @Test func timestampedAndContainerLinesAreAcceptedAndTimestampsCounted() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "a:1|c|T1700000000\na:2|c|c:abc123|card:high\na:3|c|#x:y|T1700000001|c:abc\na:4|c|Tsoon")
        #expect(ingest.counts.badLines == 0)
        #expect(ingest.counts.timestampedLines == 2, "T with a number is a timestamp; Tsoon is a field ignored")
        let flushed = flush(ingest)
        #expect(flushed.counters["a"] == 7 && flushed.counters["a|#x:y"] == 3)
    }

    @Test func theJSONOutputCarriesThemInArrivalOrder() throws {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        feed(ingest, "_e{5,6}:Title|a\"text|d:17|t:error|#env:prod\n_sc|db|2|h:db-1|m:down\n_sc|web|0")
        let (events, checks) = ingest.takeEvents()
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 0), timestamp: 0, intervalSeconds: 1, internalMetrics: [],
            events: events, serviceChecks: checks)
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(JSONLinesFormat.format(flush, flush.summaries())))
                as? [String: Any])
        let eventObjects = try #require(json["events"] as? [[String: Any]])
        #expect(eventObjects.count == 1)
        #expect(eventObjects[0]["title"] as? String == "Title" && eventObjects[0]["text"] as? String == "a\"text")
        #expect(eventObjects[0]["timestamp"] as? Int == 17 && eventObjects[0]["alert_type"] as? String == "error")
        #expect(eventObjects[0]["tags"] as? [String] == ["env:prod"] && eventObjects[0]["hostname"] == nil)
        let checkObjects = try #require(json["service_checks"] as? [[String: Any]])
        #expect(checkObjects.map { $0["name"] as? String } == ["db", "web"])
        #expect(checkObjects[0]["status"] as? Int == 2 && checkObjects[0]["message"] as? String == "down")
        #expect(checkObjects[0]["hostname"] as? String == "db-1" && checkObjects[1]["message"] == nil)
    }
}

// libFuzzer entry point for loopd's parser, series table and flush summaries (scripts/fuzz-parser
// compiles it with all of Sources/LoopdCore, which uses the standard library alone). Checks, beyond "no crash":
// a line either fails with a reason, is dropped by a mapping rule, or lands in a series; counts add up; a flush summarises every
// series it holds; every key in the table parses back to the same kind.

// Mapping rules of every kind, so that mapped keys (captures in names and labels, replaced
// tags, drops, reserved results) go through the table and the outputs too.
let ingest = Ingest(
    maxLineLength: 1024, maxSeries: 512,
    mapper: Mapper(rules: [
        try! MappingRule(match: "a.*.*", name: "m.$2.$1", labels: [(key: "first", value: "$1")]),
        try! MappingRule(match: "*x*", kinds: [.timer, .histogram], name: "${1}_${2}", percentiles: [1, 99.9]),
        try! MappingRule(match: #"^r(\w*)(,)?"#, matchType: .regex, name: "$1", labels: [(key: "c", value: "$2$0")]),
        try! MappingRule(match: "d.*", action: .drop),
        try! MappingRule(match: "l.*", name: "loopd.$1"),
    ]))
let exposition = PrometheusExposition(options: PrometheusOptions(buckets: [0.001, 1, 1000]))
var datagrams = 0

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    let before = ingest.counts
    // The first byte picks the path: a datagram, or lines one by one (as TCP delivers them).
    if let first = bytes.first, first & 1 == 1 {
        ingest.ingest(datagram: UnsafeRawBufferPointer(rebasing: bytes.dropFirst()), truncated: first & 2 == 2)
    } else {
        var start = bytes.startIndex + min(1, count)
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
            ingest.ingest(line: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            start = end + 1
        }
    }
    let after = ingest.counts
    precondition(after.badLines - before.badLines <= after.lines - before.lines, "more bad lines than lines")
    precondition(ingest.table.count <= 512, "the table outgrew maxSeries")
    datagrams += 1
    if datagrams % 64 == 0 {
        let table = ingest.endInterval(expireAfter: 3)
        let (events, serviceChecks) = ingest.takeEvents()
        let flush = Flush(
            table: table, timestamp: 0, intervalSeconds: 1, internalMetrics: [], events: events,
            serviceChecks: serviceChecks)
        let summaries = flush.summaries(bucketBounds: exposition.options.bucketBounds)
        precondition(summaries.count == table.count, "a series is missing from its flush")
        for summary in summaries {
            precondition(table.kind(summary.series) == summary.kind)
            if let stats = summary.stats {
                let values = stats.percentiles.map(\.value)
                precondition(
                    stats.min <= values.first! && values == values.sorted() && values.last! <= stats.max,
                    "percentiles out of order")
            }
        }
        _ = JSONLinesFormat.format(flush, summaries)
        _ = GraphiteFormat.format(flush, summaries)
        let rendered = exposition.render(flush, summaries)
        precondition(rendered.leftOut <= summaries.count, "more series left out than offered")
        for summary in summaries where !summary.buckets.isEmpty {
            precondition(zip(summary.buckets, summary.buckets.dropFirst()).allSatisfy { $0 <= $1 }, "buckets fall")
        }
    }
    return 0
}

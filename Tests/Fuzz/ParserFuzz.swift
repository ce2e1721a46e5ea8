// libFuzzer entry point for loopd's parser, series table and flush summaries, its config file's
// YAML and its DogStatsD frames (scripts/fuzz-parser compiles it with all of Sources/LoopdCore,
// which uses the standard library alone). Checks, beyond "no crash": a line either fails with a
// reason, is dropped by a mapping rule, or lands in a series; counts add up; a flush summarises
// every series it holds; every key in the table parses back to the same kind; a YAML error names
// a line of the text; frames come out the same however the bytes are cut.

// Mapping rules of every kind, so that mapped keys (captures in names and labels, replaced
// tags, drops, reserved results) go through the table and the outputs too.
let ingest = Ingest(
    maxLineLength: 1024, maxSeries: 512,
    mapper: Mapper(rules: [
        try! MappingRule(match: "a.*.*", name: "m.$2.$1", labels: [(key: "first", value: "$1")]),
        try! MappingRule(
            match: "*x*", kinds: [.timer, .histogram], name: "${1}_${2}", percentiles: [1, 99.9],
            buckets: [0.5, 2]),
        try! MappingRule(match: #"^r(\w*)(,)?"#, matchType: .regex, name: "$1", labels: [(key: "c", value: "$2$0")]),
        try! MappingRule(match: "d.*", action: .drop),
        try! MappingRule(match: "l.*", name: "loopd.$1"),
    ]))
let exposition = PrometheusExposition(options: PrometheusOptions(buckets: [0.001, 1, 1000]))
// Without mapping rules, plain lines of known series take the short path in `plainIngest` and
// the full parse in `fullIngest`: the same bytes must leave the same counts and series.
let plainIngest = Ingest(maxLineLength: 64, maxSeries: 512)
let fullIngest: Ingest = {
    let ingest = Ingest(maxLineLength: 64, maxSeries: 512)
    ingest.usesPlainLines = false
    return ingest
}()
var datagrams = 0

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    checkYAML(bytes)
    checkFrames(bytes)
    checkSeparatorMasks(bytes)
    checkPlainLines(bytes)
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

/// The input as a config file: read, or refused naming one of its lines.
func checkYAML(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        _ = try YAML.parse(text)
    } catch {
        let lines = text.utf8.count(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }) + 1
        precondition(error.line >= 1 && error.line <= lines, "a YAML error names line \(error.line) of \(lines)")
    }
}

/// The input as a Unix stream client's bytes: the same frames whole and cut in two.
func checkFrames(_ bytes: UnsafeRawBufferPointer) {
    func frames(_ cut: Int) -> ([[UInt8]], Int?) {
        var decoder = DogStatsDFrameDecoder(maxFrame: 300)
        var out: [[UInt8]] = []
        let first = decoder.feed(UnsafeRawBufferPointer(rebasing: bytes[..<cut])) { out.append(Array($0)) }
        let second = decoder.feed(UnsafeRawBufferPointer(rebasing: bytes[cut...])) { out.append(Array($0)) }
        return (out, first ?? second)
    }
    let whole = frames(bytes.count)
    let cut = frames(bytes.count / 3)
    precondition(whole.0 == cut.0 && whole.1 == cut.1, "frames depend on where the bytes are cut")
}

// Two parsers, one finding separators through its bit masks (lines of 8 to 64 ASCII bytes), one
// searching byte by byte: every line must parse the same either way.
var masked = StatsDParser(maxLineLength: 1024)
var searched: StatsDParser = {
    var parser = StatsDParser(maxLineLength: 1024)
    parser.usesSeparatorMasks = false
    return parser
}()

/// What a parse gave: the error, or everything the line records.
struct Parsed: Equatable {
    var error: LineError?
    var kind = MetricKind.counter
    var sampleRate = 0.0
    var values: [Double] = []
    var isDelta: [Bool] = []
    var members: [UInt64] = []
    var key: [UInt8] = []
    var keyHash: UInt64 = 0
    var hasTimestamp = false

    init(_ parser: inout StatsDParser, _ line: UnsafeRawBufferPointer) {
        error = parser.parse(line)
        guard error == nil else { return }
        (kind, sampleRate, values, isDelta, members) = (
            parser.kind, parser.sampleRate, parser.values, parser.isDelta, parser.members
        )
        (key, keyHash, hasTimestamp) = (parser.withKey { Array($0) }, parser.keyHash, parser.hasTimestamp)
    }
}

func checkSeparatorMasks(_ bytes: UnsafeRawBufferPointer) {
    var start = bytes.startIndex
    while start < bytes.endIndex {
        let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.endIndex
        let line = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
        precondition(Parsed(&masked, line) == Parsed(&searched, line), "the separator masks parse differently")
        start = end + 1
    }
}

/// The short path of plain lines against the full parse, on the same datagram (the first byte
/// says whether its tail was cut); every 64 datagrams, their flushes are compared too.
func checkPlainLines(_ bytes: UnsafeRawBufferPointer) {
    let truncated = (bytes.first ?? 0) & 2 == 2
    let datagram = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
    plainIngest.ingest(datagram: datagram, truncated: truncated)
    fullIngest.ingest(datagram: datagram, truncated: truncated)
    precondition(plainIngest.counts == fullIngest.counts, "the plain path counted otherwise than the full parse")
    guard plainIngest.counts.packets % 64 == 0 else { return }
    func summaries(_ ingest: Ingest) -> [String] {
        let flush = Flush(
            table: ingest.endInterval(expireAfter: 3), timestamp: 0, intervalSeconds: 1, internalMetrics: [])
        return flush.summaries().map { "\(Array(flush.table.key($0.series))) \($0)" }
    }
    precondition(
        summaries(plainIngest) == summaries(fullIngest), "the plain path recorded otherwise than the full parse")
}

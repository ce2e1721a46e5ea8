import LoopdCore

#if canImport(Glibc)
    import Glibc
#endif

/// Whether this process (and so the loopd built with it) runs under AddressSanitizer or
/// ThreadSanitizer, which make loopd several times slower.
let underSanitizer =
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__asan_init") != nil
    || dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

/// Parses `line` with `parser`, from a String's bytes.
func parse(_ parser: inout StatsDParser, _ line: String) -> LineError? {
    var line = line
    return line.withUTF8 { parser.parse(UnsafeRawBufferPointer($0)) }
}

/// Feeds `datagram` to `ingest`.
func feed(_ ingest: Ingest, _ datagram: String) {
    var datagram = datagram
    datagram.withUTF8 { ingest.ingest(datagram: UnsafeRawBufferPointer($0)) }
}

/// Feeds raw bytes to `ingest` as one datagram.
func feed(_ ingest: Ingest, bytes: [UInt8], truncated: Bool = false) {
    bytes.withUnsafeBytes { ingest.ingest(datagram: $0, truncated: truncated) }
}

/// A flush's series by "name|#tags" (tags joined by ","), for assertions.
struct Flushed {
    var counters: [String: Double] = [:]
    var gauges: [String: Double] = [:]
    var stats: [String: (kind: MetricKind, count: Double, stats: SampleStats)] = [:]
    var sets: [String: Double] = [:]

    init(_ flush: Flush) {
        for summary in flush.summaries() {
            var key = String(decoding: flush.name(summary.series), as: UTF8.self)
            let tags = flush.tags(summary.series).map { String(decoding: $0, as: UTF8.self) }
            if !tags.isEmpty { key += "|#" + tags.joined(separator: ",") }
            switch summary.kind {
            case .counter: counters[key] = summary.value
            case .gauge: gauges[key] = summary.value
            case .set: if summary.hasData { sets[key] = summary.value }
            default: if let stats = summary.stats { self.stats[key] = (summary.kind, summary.value, stats) }
            }
        }
    }
}

/// Ends `ingest`'s interval and summarises it.
func flush(_ ingest: Ingest, expireAfter: UInt32 = 0) -> Flushed {
    Flushed(
        Flush(
            table: ingest.endInterval(expireAfter: expireAfter), timestamp: 0, intervalSeconds: 1, internalMetrics: []))
}

/// A small deterministic random source (SplitMix64), so that failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// Datagrams and lines into the series table, with the counts loopd reports about itself.
// Standard library only (the fuzz target drives this type).

/// Parses StatsD datagrams and lines into a `SeriesTable`, counting what it sees.
///
/// Confined to one thread (loopd's loop thread): every method mutates.
///
/// The properties every line touches (`parser`, `table`, `counts`), and the two callbacks (the
/// optimizer checked them once per datagram), are exempt from Swift's dynamic exclusivity
/// checks, which cost about 75 instructions each, several times per line. What makes that safe: one thread, and no
/// access to them is held across a call out of the class (`onBadLine` and `onTableFull` are
/// read, then called, after the access that found the problem has ended), so no two accesses
/// can overlap, even when a callback calls back into `Ingest` or replaces itself.
public final class Ingest {
    /// The parser (its `maxLineLength` is loopd's `--max-line`).
    @exclusivity(unchecked) public private(set) var parser: StatsDParser
    /// The series and the current interval's aggregates.
    @exclusivity(unchecked) public private(set) var table: SeriesTable
    /// Counts since start.
    @exclusivity(unchecked) public private(set) var counts = Counts()
    /// Called for each rejected line, with the reason and the line's bytes (valid during the
    /// call only). Nil: rejected lines are only counted.
    @exclusivity(unchecked) public var onBadLine: ((LineError, UnsafeRawBufferPointer) -> Void)?
    /// Called the first time a line for a new series is dropped because the table is full, and
    /// then once per interval while it goes on.
    @exclusivity(unchecked) public var onTableFull: ((UnsafeRawBufferPointer) -> Void)?
    private var reportedFullInInterval: UInt32 = 0

    /// What `Ingest` has counted since it was created.
    public struct Counts: Sendable, Equatable {
        /// Datagrams received.
        public var packets: UInt64 = 0
        /// Lines received (valid or not; empty lines are not lines).
        public var lines: UInt64 = 0
        /// Lines rejected as malformed, or because they would have made a series' value infinite
        /// or NaN (`LineError.nonFinite`).
        public var badLines: UInt64 = 0
        /// Lines dropped because they named a new series while the table was full.
        public var droppedSeries: UInt64 = 0
        /// Tags that the Prometheus exposition renames or leaves out (a label name Prometheus
        /// cannot take or reserves, such as `__name__`; see `PrometheusFormat`), counted when
        /// their series is created.
        public var renamedLabels: UInt64 = 0
        /// Negative counter values recorded: they count in the interval's sum (JSON, Graphite)
        /// but not in Prometheus' counter, which never decreases. Brought up to date at the end
        /// of each interval (`endInterval(expireAfter:)`), not per line.
        public var negativeCounterValues: UInt64 = 0
        /// DogStatsD events received (`_e{…}`), valid ones; kept or not.
        public var events: UInt64 = 0
        /// DogStatsD service checks received (`_sc|…`), valid ones; kept or not.
        public var serviceChecks: UInt64 = 0
        /// Events and service checks not kept because the interval already held
        /// `Ingest.maxEventsPerInterval` of them.
        public var droppedEvents: UInt64 = 0
        /// Metric lines with a DogStatsD timestamp (`|T…`), aggregated into the interval in
        /// which they arrived.
        public var timestampedLines: UInt64 = 0
        /// Lines a mapping rule dropped (`action: drop`).
        public var mappingDropped: UInt64 = 0
        /// Times the mapping cache was emptied because it held `Ingest.mappingCacheCapacity`
        /// keys (the rules then run again for each key as it comes).
        public var mappingCacheClears: UInt64 = 0

        /// Zero counts.
        public init() {}

        /// The counts of two ingest stages together (several readers).
        public static func + (lhs: Counts, rhs: Counts) -> Counts {
            var sum = lhs
            sum.packets &+= rhs.packets
            sum.lines &+= rhs.lines
            sum.badLines &+= rhs.badLines
            sum.droppedSeries &+= rhs.droppedSeries
            sum.renamedLabels &+= rhs.renamedLabels
            sum.negativeCounterValues &+= rhs.negativeCounterValues
            sum.events &+= rhs.events
            sum.serviceChecks &+= rhs.serviceChecks
            sum.droppedEvents &+= rhs.droppedEvents
            sum.timestampedLines &+= rhs.timestampedLines
            sum.mappingDropped &+= rhs.mappingDropped
            sum.mappingCacheClears &+= rhs.mappingCacheClears
            return sum
        }
    }

    /// The most events, and the most service checks, kept per interval (each at most a line's
    /// length): more are counted in `Counts.droppedEvents` and not kept.
    public static let maxEventsPerInterval = 1000

    /// The current interval's events, in arrival order.
    public private(set) var events: [DogStatsDEvent] = []
    /// The current interval's service checks, in arrival order.
    public private(set) var serviceChecks: [DogStatsDServiceCheck] = []

    /// The mapping rules lines go through before they are recorded; nil: none.
    public private(set) var mapper: Mapper?
    /// Whether `mapper` is set. Read on every line: unchecked, as nothing can access it while
    /// it is being written (`Ingest` is confined to one thread, and only `setMapper` writes it),
    /// which saves a dynamic exclusivity check (about 75 instructions) per line.
    @exclusivity(unchecked) private var isMapping = false
    /// Whether plain lines (one value, no rate, no tags) for known series skip the full parse
    /// (`StatsDParser.plainLine(_:from:)`): not while mapping, whose rules see every line's key.
    /// Read on every line, unchecked as `isMapping` is.
    @exclusivity(unchecked) private var takesPlainLines = true
    /// Tests and benchmarks: false sends every line through the full parse, so that both paths
    /// can be compared on the same lines.
    @_spi(Testing) public var usesPlainLines = true {
        didSet { takesPlainLines = !isMapping && usesPlainLines }
    }
    /// What the rules made of each distinct key seen lately: the rules run once per key.
    private var mappingCache: MappingCache
    /// For each rule of `mapper`, the table's option set of the series it maps.
    private var ruleOptions: [UInt16] = []

    /// The most distinct keys whose mapping is remembered: twice the table's series, at most
    /// 4 Mi keys, and at most 64 MiB of their bytes. Each costs its key's bytes and its mapped
    /// key's, plus about 60 bytes.
    public var mappingCacheCapacity: Int { mappingCache.capacity }

    /// Creates an ingest stage for lines of at most `maxLineLength` bytes and at most
    /// `maxSeries` series, mapped by `mapper` if given.
    public init(maxLineLength: Int, maxSeries: Int, mapper: Mapper? = nil) {
        parser = StatsDParser(maxLineLength: maxLineLength)
        table = SeriesTable(maxSeries: maxSeries)
        mappingCache = MappingCache(capacity: min(2 * maxSeries, 4 << 20))
        setMapper(mapper)
    }

    /// Replaces the mapping rules (a reload). From the next line on, lines go through the new
    /// rules; series the old rules made stay as they are and expire if no line comes for them.
    /// A series shows the percentiles of the rule that mapped its latest line.
    public func setMapper(_ mapper: Mapper?) {
        self.mapper = mapper.flatMap { $0.isIdentity ? nil : $0 }
        isMapping = self.mapper != nil
        takesPlainLines = !isMapping && usesPlainLines
        mappingCache.clear(counted: false)
        ruleOptions = (mapper?.rules ?? []).map {
            table.optionSet(SeriesOptions(percentiles: $0.percentiles, buckets: $0.buckets))
        }
    }

    /// The bytes the mapping cache holds (capacities).
    public var mappingCacheBytes: Int { mappingCache.storageBytes }

    /// Records every line of a datagram (lines end with `\n`; a `\r` before it is dropped; empty
    /// lines are skipped). `truncated`: the datagram lost its tail, so its last line is rejected
    /// as `LineError.tooLong`.
    ///
    /// Plain lines (`StatsDParser.plainLine(_:from:)`) of known series take a short path. A
    /// client tends to send lines of one shape, so once a line of the datagram is not plain
    /// (tags, a rate…), the rest of the datagram goes through the full parse without trying:
    /// the try cost a tagged line about half of what the short path saves a plain one. Counter
    /// lines one after another are recorded in one run
    /// (`SeriesTable.recordPlainCounters(_:first:at:)`); a counter the run leaves (a new
    /// series, or sums too far apart) takes the full parse, and the next counter starts a new
    /// run. From the first plain line of another kind on, the datagram's plain lines are
    /// recorded one at a time, with no run.
    public func ingest(datagram: UnsafeRawBufferPointer, truncated: Bool = false) {
        counts.packets &+= 1
        var start = 0
        let end = datagram.count
        var triesPlain = takesPlainLines
        // Runs of counter lines until a plain line of another kind: a datagram of mixed kinds
        // then takes its plain lines one at a time, since a run each would cost more.
        var runs = true
        let lines = PlainLines(
            datagram: datagram, truncated: truncated, maxLineLength: parser.maxLineLength, seed: parser.seed)
        while start < end {
            if triesPlain && datagram[start] != UInt8(ascii: "_") {
                if var line = lines.line(at: start) {
                    // A counter the run stopped on is one the table refused: the full path.
                    var refused = false
                    if runs && line.kind == .counter {
                        let run = table.recordPlainCounters(lines, first: line, at: start)
                        counts.lines &+= UInt64(truncatingIfNeeded: run.recorded)
                        start = run.stoppedAt
                        guard start < end else { return }
                        // The next line is not plain, or it starts with `_`: the full path.
                        guard let stoppedOn = run.stoppedOn else {
                            triesPlain = datagram[start] == UInt8(ascii: "_")
                            continue
                        }
                        line = stoppedOn
                        refused = line.kind == .counter
                    }
                    if !refused {
                        if line.kind != .counter { runs = false }
                        if table.recordPlain(line.kind, name: line.name, hash: line.hash, value: line.value) {
                            counts.lines &+= 1
                            start = line.lineEnd + 1
                            continue
                        }
                    }
                } else {
                    triesPlain = false
                }
            }
            let newline = firstIndex(of: UInt8(ascii: "\n"), in: datagram, from: start, to: end)
            if newline == end && truncated {
                reject(.tooLong, UnsafeRawBufferPointer(rebasing: datagram[start..<end]))
                return
            }
            ingestLine(UnsafeRawBufferPointer(rebasing: datagram[start..<newline]))
            start = newline + 1
            // A callback may have set mapping rules, which every later line must go through.
            triesPlain = triesPlain && takesPlainLines
        }
    }

    /// Records one line (without its `\n`; a trailing `\r` is dropped; an empty line is skipped).
    public func ingest(line: UnsafeRawBufferPointer) {
        if takesPlainLines && line.first != UInt8(ascii: "_") && recordPlain(line: line) { return }
        ingestLine(line)
    }

    /// Records `line`, a whole line, if it is plain (`StatsDParser.plainLine(_:from:)`) and
    /// its series exists: true then; false, with nothing recorded or counted, for the full path
    /// to take it. A newline inside ends no plain line: the line must end with the bytes.
    @inline(__always)
    private func recordPlain(line bytes: UnsafeRawBufferPointer) -> Bool {
        guard let line = parser.plainLine(bytes, from: 0), line.lineEnd == bytes.count,
            table.recordPlain(
                line.kind, name: UnsafeRawBufferPointer(rebasing: bytes[0..<line.nameEnd]), hash: line.hash,
                value: line.value)
        else { return false }
        counts.lines &+= 1
        return true
    }

    /// `ingest(line:)`, inlined into the datagram loop: a call per line cost about 16
    /// instructions.
    @inline(__always)
    private func ingestLine(_ line: UnsafeRawBufferPointer) {
        var line = line
        if let last = line.last, last == UInt8(ascii: "\r") { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        guard !line.isEmpty else { return }
        counts.lines &+= 1
        // DogStatsD's events and service checks first, as its agent reads them: `_e{1,1}:5|c` is
        // an event titled 5, not a counter.
        if line[0] == UInt8(ascii: "_") && ingestDogStatsD(line) { return }
        if let error = parser.parse(line) {
            counts.badLines &+= 1
            onBadLine?(error, line)
            return
        }
        if parser.hasTimestamp { counts.timestampedLines &+= 1 }
        // A flag, not `mapper` itself: reading the optional struct out of the class would retain
        // each of its arrays, on every line.
        if isMapping { return ingestMapped(line) }
        record(parser.withParsedLine({ table.record($0) }), line)
    }

    /// Records the parsed line under what the mapping rules make of it. The rules run only for
    /// a key the cache does not hold.
    private func ingestMapped(_ line: UnsafeRawBufferPointer) {
        let (index, isNew) = parser.withParsedLine { parsed in
            if let index = mappingCache.find(parsed.key, hash: parsed.keyHash) { return (index, false) }
            return (mappingCache.add(parsed.key, hash: parsed.keyHash, mapper!), true)
        }
        if isNew { counts.mappingCacheClears = mappingCache.clears }
        let entry = mappingCache.entries[index]
        switch entry.result {
        case .unchanged:
            record(parser.withParsedLine({ table.record($0) }), line)
        case .drop:
            counts.mappingDropped &+= 1
        case let .invalid(error):
            counts.badLines &+= 1
            onBadLine?(error, line)
        case .mapped:
            let outcome = mappingCache.mappedBytes.withUnsafeBytes { bytes in
                parser.withParsedLine { parsed in
                    table.record(
                        ParsedLine(
                            kind: parsed.kind, sampleRate: parsed.sampleRate, values: parsed.values,
                            isDelta: parsed.isDelta, members: parsed.members,
                            key: UnsafeRawBufferPointer(rebasing: bytes[entry.mappedStart..<entry.mappedEnd]),
                            keyHash: entry.mappedHash))
                }
            }
            if isNew, outcome == .recorded || outcome == .created {
                table.setOptions(entry.rule < 0 ? 0 : ruleOptions[Int(entry.rule)], series: table.lastSeries)
            }
            record(outcome, line)
        }
    }

    @inline(__always)
    private func record(_ outcome: SeriesTable.Outcome, _ line: UnsafeRawBufferPointer) {
        switch outcome {
        case .recorded: break
        case .created:
            let changed = PrometheusFormat.changedLabels(key: table.key(table.count - 1))
            counts.renamedLabels &+= UInt64(changed)
        case .tableFull:
            counts.droppedSeries &+= 1
            if reportedFullInInterval != table.interval {
                reportedFullInInterval = table.interval
                onTableFull?(line)
            }
        case .nonFinite:
            counts.badLines &+= 1
            onBadLine?(.nonFinite, line)
        }
    }

    /// Records an event or a service check, if the line is one (it starts with `_e{` or `_sc|`);
    /// returns false for other lines.
    private func ingestDogStatsD(_ line: UnsafeRawBufferPointer) -> Bool {
        let isEvent = DogStatsDEvent.isEvent(line)
        guard isEvent || DogStatsDServiceCheck.isServiceCheck(line) else { return false }
        // Kept until the flush: bounded in length as a metric line is.
        guard line.count <= parser.maxLineLength else {
            reject(.tooLong, line, counted: true)
            return true
        }
        if isEvent {
            guard let event = DogStatsDEvent.parse(line) else {
                reject(.badEvent, line, counted: true)
                return true
            }
            counts.events &+= 1
            if events.count < Self.maxEventsPerInterval { events.append(event) } else { counts.droppedEvents &+= 1 }
            return true
        }
        guard let check = DogStatsDServiceCheck.parse(line) else {
            reject(.badServiceCheck, line, counted: true)
            return true
        }
        counts.serviceChecks &+= 1
        if serviceChecks.count < Self.maxEventsPerInterval {
            serviceChecks.append(check)
        } else {
            counts.droppedEvents &+= 1
        }
        return true
    }

    /// Hands over the interval's events and service checks, and starts the next interval's.
    public func takeEvents() -> (events: [DogStatsDEvent], serviceChecks: [DogStatsDServiceCheck]) {
        defer { (events, serviceChecks) = ([], []) }
        return (events, serviceChecks)
    }

    /// Counts a line that could not be framed (a TCP line over `--max-line`) as received and
    /// rejected for `error`.
    public func reject(_ error: LineError, _ line: UnsafeRawBufferPointer) {
        reject(error, line, counted: false)
    }

    private func reject(_ error: LineError, _ line: UnsafeRawBufferPointer, counted: Bool) {
        if !counted { counts.lines &+= 1 }
        counts.badLines &+= 1
        onBadLine?(error, line)
    }

    /// Ends the interval: see `SeriesTable.endInterval(expireAfter:)`.
    public func endInterval(expireAfter: UInt32) -> SeriesTable {
        counts.negativeCounterValues = table.negativeCounterValues
        return table.endInterval(expireAfter: expireAfter)
    }
}

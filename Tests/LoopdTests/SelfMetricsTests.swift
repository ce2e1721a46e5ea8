import Foundation
import LoopdCore
import Testing

@Suite("loopd's own metrics")
struct SelfMetricsTests {
    @Test func countersReportTheirChangeSinceThePreviousFlushAndTheirTotal() {
        let ingest = Ingest(maxLineLength: 1024, maxSeries: 100)
        var metrics = SelfMetrics()
        feed(ingest, "a:1|c\nbad\n_e{1,1}:x|y")
        var daemon = SelfMetrics.Daemon()
        daemon.udpKernelDrops = 5
        daemon.flushDurationSeconds = 0.25
        var first = metrics.report(ingest.counts, daemon, table: ingest.table)
        feed(ingest, "a:1|c\nb:2|c")
        daemon.udpKernelDrops = 7
        let second = metrics.report(ingest.counts, daemon, table: ingest.table)
        func find(_ list: [InternalMetric], _ name: String) -> InternalMetric? { list.first { $0.name == name } }
        #expect(find(first, "loopd.lines_received")?.value == 3 && find(first, "loopd.bad_lines")?.value == 1)
        #expect(find(second, "loopd.lines_received")?.value == 2 && find(second, "loopd.lines_received")?.total == 5)
        #expect(find(second, "loopd.bad_lines")?.value == 0 && find(second, "loopd.bad_lines")?.total == 1)
        #expect(find(first, "loopd.events_received")?.value == 1 && find(second, "loopd.events_received")?.value == 0)
        #expect(
            find(second, "loopd.udp_kernel_drops")?.value == 2 && find(second, "loopd.udp_kernel_drops")?.total == 7)
        #expect(find(second, "loopd.series")?.value == 2 && find(second, "loopd.series")?.kind == .gauge)
        #expect(find(first, "loopd.flush_duration_seconds")?.value == 0.25)
        // The outputs' metrics appear only with the outputs.
        #expect(find(second, "loopd.prometheus_connections_refused") == nil)
        #expect(find(second, "loopd.graphite_dropped_lines") == nil)
        daemon.prometheus = (connectionsRefused: 3, seriesLeftOut: 4, seriesMerged: 5)
        daemon.graphiteDroppedLines = 10
        daemon.configReloads = (applied: 6, refused: 7)
        first = metrics.report(ingest.counts, daemon, table: ingest.table)
        #expect(find(first, "loopd.config_reloads")?.value == 6)
        #expect(find(first, "loopd.config_reloads_refused")?.value == 7)
        #expect(find(first, "loopd.mapping_dropped_lines")?.value == 0)
        #expect(find(first, "loopd.prometheus_connections_refused")?.value == 3)
        #expect(find(first, "loopd.prometheus_series_left_out")?.value == 4)
        #expect(find(first, "loopd.prometheus_series_merged")?.value == 5)
        #expect(find(first, "loopd.graphite_dropped_lines")?.value == 10)
    }

    @Test func everyMetricIsInTheDocsTableWithItsKindAndNoneIsMissing() throws {
        let docs = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../docs/loopd.md"), encoding: .utf8)
        // The table's rows: | `loopd.name` | kind | meaning |
        var documented: [String: String] = [:]
        for line in docs.split(separator: "\n") where line.hasPrefix("| `loopd.") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1]
        }
        var metrics = SelfMetrics()
        var daemon = SelfMetrics.Daemon()
        daemon.prometheus = (0, 0, 0)
        daemon.graphiteDroppedLines = 0
        daemon.configReloads = (0, 0)
        let reported = metrics.report(Ingest.Counts(), daemon, table: SeriesTable(maxSeries: 1))
        #expect(Set(reported.map(\.name)) == Set(documented.keys))
        for metric in reported {
            #expect(documented[metric.name] == (metric.kind == .counter ? "counter" : "gauge"), "\(metric.name)")
        }
    }
}

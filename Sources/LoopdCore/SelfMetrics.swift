// loopd's own metrics (`loopd.*`), assembled for each flush from what the daemon counts.

/// Turns loopd's running counts into the metrics each flush reports about loopd itself: a
/// counter's value is its change since the previous report, its total the count since start.
///
/// Confined to one thread (loopd's loop thread): `report` mutates.
public struct SelfMetrics {
    /// What loopd counts outside the ingest stage, as totals since start (or, for gauges, now).
    public struct Daemon: Sendable, Equatable {
        /// Datagrams the kernel dropped on the UDP socket.
        public var udpKernelDrops: UInt64 = 0
        /// Flushes the JSON output dropped.
        public var outputDroppedFlushes: UInt64 = 0
        /// Flush ticks skipped because the previous flush was still being formatted.
        public var skippedFlushes: UInt64 = 0
        /// TCP clients disconnected at once (over the limit, or accept failures).
        public var tcpConnectionsRefused: UInt64 = 0
        /// The previous flush's duration, in seconds.
        public var flushDurationSeconds = 0.0
        /// With `--prometheus`: clients disconnected at once, and the series the last
        /// exposition left out and merged into others.
        public var prometheus: (connectionsRefused: UInt64, seriesLeftOut: Int, seriesMerged: Int)?
        /// With `--graphite`: lines dropped from its queue.
        public var graphiteDroppedLines: UInt64?
        /// With `--config`: reloads that applied the file, and reloads that refused it.
        public var configReloads: (applied: UInt64, refused: UInt64)?

        /// No counts.
        public init() {}

        public static func == (lhs: Daemon, rhs: Daemon) -> Bool {
            lhs.udpKernelDrops == rhs.udpKernelDrops && lhs.outputDroppedFlushes == rhs.outputDroppedFlushes
                && lhs.skippedFlushes == rhs.skippedFlushes && lhs.tcpConnectionsRefused == rhs.tcpConnectionsRefused
                && lhs.flushDurationSeconds == rhs.flushDurationSeconds
                && lhs.prometheus?.connectionsRefused == rhs.prometheus?.connectionsRefused
                && lhs.prometheus?.seriesLeftOut == rhs.prometheus?.seriesLeftOut
                && lhs.prometheus?.seriesMerged == rhs.prometheus?.seriesMerged
                && lhs.graphiteDroppedLines == rhs.graphiteDroppedLines
                && lhs.configReloads?.applied == rhs.configReloads?.applied
                && lhs.configReloads?.refused == rhs.configReloads?.refused
        }
    }

    /// Each counter's total at the previous report, by name.
    private var reported: [String: UInt64] = [:]

    /// Nothing reported yet.
    public init() {}

    /// The metrics of one flush, in the order docs/loopd.md lists them: the ingest stage's
    /// counters, the daemon's, then the gauges (`loopd.series` and `loopd.table_bytes` from
    /// `table`), then those of the outputs configured.
    public mutating func report(_ counts: Ingest.Counts, _ daemon: Daemon, table: SeriesTable) -> [InternalMetric] {
        var metrics: [InternalMetric] = []
        func counter(_ name: String, _ total: UInt64) {
            let previous = reported[name] ?? 0
            reported[name] = total
            metrics.append(
                InternalMetric(name: name, kind: .counter, value: Double(total &- previous), total: Double(total)))
        }
        func gauge(_ name: String, _ value: Double) {
            metrics.append(InternalMetric(name: name, kind: .gauge, value: value))
        }
        counter("loopd.packets_received", counts.packets)
        counter("loopd.lines_received", counts.lines)
        counter("loopd.bad_lines", counts.badLines)
        counter("loopd.series_dropped", counts.droppedSeries)
        counter("loopd.prometheus_labels_renamed", counts.renamedLabels)
        counter("loopd.prometheus_negative_increments", counts.negativeCounterValues)
        counter("loopd.events_received", counts.events)
        counter("loopd.service_checks_received", counts.serviceChecks)
        counter("loopd.events_dropped", counts.droppedEvents)
        counter("loopd.timestamped_lines", counts.timestampedLines)
        counter("loopd.udp_kernel_drops", daemon.udpKernelDrops)
        counter("loopd.output_dropped_flushes", daemon.outputDroppedFlushes)
        counter("loopd.flushes_skipped", daemon.skippedFlushes)
        counter("loopd.tcp_connections_refused", daemon.tcpConnectionsRefused)
        gauge("loopd.series", Double(table.count))
        gauge("loopd.table_bytes", Double(table.storageBytes))
        gauge("loopd.flush_duration_seconds", daemon.flushDurationSeconds)
        if let prometheus = daemon.prometheus {
            counter("loopd.prometheus_connections_refused", prometheus.connectionsRefused)
            gauge("loopd.prometheus_series_left_out", Double(prometheus.seriesLeftOut))
            gauge("loopd.prometheus_series_merged", Double(prometheus.seriesMerged))
        }
        if let dropped = daemon.graphiteDroppedLines { counter("loopd.graphite_dropped_lines", dropped) }
        if let reloads = daemon.configReloads {
            counter("loopd.mapping_dropped_lines", counts.mappingDropped)
            counter("loopd.mapping_cache_clears", counts.mappingCacheClears)
            counter("loopd.config_reloads", reloads.applied)
            counter("loopd.config_reloads_refused", reloads.refused)
        }
        return metrics
    }
}

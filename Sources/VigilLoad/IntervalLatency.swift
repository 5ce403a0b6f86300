/// The latency of the current second, for the progress line.
///
/// A run's total distribution hides a stall that lasted two seconds of a ten-minute run; the
/// progress line shows the p99 of each second instead. The caller records every sample both here
/// and in the run's `LatencyStats`, and once a second takes this one's p99, which also empties it.
public struct IntervalLatency: Sendable {
    private var stats = LatencyStats()

    public init() {}

    public mutating func record(ns: UInt64) {
        stats.record(ns: ns)
    }

    /// Samples recorded since the last take.
    public var count: UInt64 { stats.count }

    /// The p99 of the samples since the last take (nil when there were none), and starts a new
    /// interval.
    public mutating func takeP99() -> UInt64? {
        defer { stats.reset() }
        return stats.count > 0 ? stats.percentile(99) : nil
    }
}

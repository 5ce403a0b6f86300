#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Histogram

/// The figures a report prints for one latency series, all in nanoseconds.
///
/// A plain value (no Codable): `LoadReport` writes it with VigilCore's `JSONWriter`, which keeps
/// the key order stable from run to run.
public struct LatencySummary: Equatable, Sendable {
    public var count: UInt64
    public var p50: UInt64
    public var p90: UInt64
    public var p99: UInt64
    public var p99_9: UInt64
    public var max: UInt64

    public init(count: UInt64, p50: UInt64, p90: UInt64, p99: UInt64, p99_9: UInt64, max: UInt64) {
        self.count = count
        self.p50 = p50
        self.p90 = p90
        self.p99 = p99
        self.p99_9 = p99_9
        self.max = max
    }

    public static let empty = LatencySummary(count: 0, p50: 0, p90: 0, p99: 0, p99_9: 0, max: 0)
}

/// A latency distribution in nanoseconds, kept in an HdrHistogram (1 µs .. 60 s, 3 significant
/// digits).
///
/// Why HdrHistogram and not a list of samples: a run delivers millions of events, and the tail
/// (p99.9, max) is what the load test is for. The histogram records in O(1) with no allocation,
/// keeps every value to 0.1 % relative precision whatever the count, and two histograms merge by
/// adding counts, so each connection group can record alone and the report merges at the end.
///
/// Values below 1 µs land in the first bucket (the histogram's unit is 512 ns there); values above
/// 60 s are clamped to 60 s so that an absurd outlier (a stalled server) still counts as a
/// sample instead of being dropped. One histogram is ~150 KB: keep one per series, not one per
/// connection.
public struct LatencyStats: Sendable {
    /// Lowest value the histogram distinguishes from zero: 1 µs.
    public static let lowestNs: UInt64 = 1_000
    /// Highest value tracked: 60 s. Larger values are recorded as this.
    public static let highestNs: UInt64 = 60_000_000_000

    private var histogram: Histogram<UInt64>

    public init() {
        histogram = Histogram(lowestDiscernibleValue: Self.lowestNs,
                              highestTrackableValue: Self.highestNs,
                              numberOfSignificantValueDigits: .three)
    }

    /// Records one latency; values above `highestNs` are clamped to it.
    public mutating func record(ns: UInt64) {
        // Cannot fail: the clamped value is within the trackable range.
        histogram.record(Swift.min(ns, Self.highestNs))
    }

    /// Adds every sample of `other` (same layout by construction, so the merge is exact).
    public mutating func merge(_ other: LatencyStats) {
        histogram.add(other.histogram)
    }

    /// Number of samples recorded.
    public var count: UInt64 { histogram.totalCount }

    /// The value at percentile `p` (0...100; clamped), to the histogram's precision. 0 when empty.
    /// `percentile(100)` is the largest recorded value.
    public func percentile(_ p: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let clamped = p.isNaN ? 0 : Swift.min(100, Swift.max(0, p))
        return histogram.valueAtPercentile(clamped)
    }

    /// The largest recorded value, exactly as recorded (after clamping). 0 when empty.
    public var max: UInt64 { count > 0 ? histogram.maxRecorded : 0 }

    /// Forgets every sample, keeping the buckets allocated.
    public mutating func reset() {
        histogram.reset()
    }

    public func summary() -> LatencySummary {
        guard count > 0 else { return .empty }
        return LatencySummary(count: count, p50: percentile(50), p90: percentile(90), p99: percentile(99),
                              p99_9: percentile(99.9), max: max)
    }

    /// Percentiles spaced evenly on the log scale of 1/(1-p) that latency plots use: five points
    /// per decade from 0 % to 99.999 %, then the maximum as percentile 100. Empty when there are
    /// no samples. Past the percentile where one sample is left, the values repeat the maximum,
    /// which draws the flat tail a reader expects.
    public func percentileCurve() -> [(percentile: Double, ns: UInt64)] {
        guard count > 0 else { return [] }
        var points: [(percentile: Double, ns: UInt64)] = []
        points.reserveCapacity(Self.curvePercentiles.count + 1)
        for p in Self.curvePercentiles {
            points.append((percentile: p, ns: percentile(p)))
        }
        points.append((percentile: 100, ns: max))
        return points
    }

    /// 0, 36.9, 60.2, ..., 90, ..., 99, ..., 99.999: 100 * (1 - 10^(-i/5)) for i in 0...25.
    static let curvePercentiles: [Double] = (0...25).map { i in
        100 * (1 - pow(10, -Double(i) / 5))
    }
}

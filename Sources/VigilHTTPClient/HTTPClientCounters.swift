/// What the HTTP client has done, as plain values for /metrics (the operator's view): counters
/// that only grow, and gauges of the moment. Nothing per origin (a label per push service host
/// would grow without bound) and nothing of a request's URL.
public struct HTTPClientCounters: Equatable, Sendable {
    /// Requests handed to `send`.
    public var requests = 0
    /// Responses by class: index 0 counts 1xx (never final, so 0), 1 counts 2xx, … 4 counts 5xx.
    public var responsesByClass = [0, 0, 0, 0, 0]
    /// Failures by kind.
    public var failures: [HTTPClientFailure.Kind: Int] = [:]
    /// Connections the pool opened (each tries the host's addresses in turn), and requests sent
    /// on a connection that had served one before.
    public var connectionsOpened = 0
    public var connectionReuses = 0
    /// From `send` to the response, for responses only (failures have their own timing).
    public var latency = HTTPLatencyHistogram()

    // Gauges: their value now.
    /// Requests waiting for a connection.
    public var queued = 0
    /// Requests sent (or being sent) and not yet answered.
    public var inFlight = 0
    /// Connections open or opening.
    public var connections = 0

    public init() {}

    mutating func count(_ outcome: HTTPOutcome, latencyMs: Int64) {
        switch outcome {
        case .response(let response):
            let index = response.status / 100 - 1
            if responsesByClass.indices.contains(index) { responsesByClass[index] += 1 }
            latency.record(latencyMs)
        case .failure(let failure):
            failures[failure.kind, default: 0] += 1
        }
    }
}

/// Latency in cumulative buckets, Prometheus's histogram shape: `counts[i]` is the number of
/// observations at or under `boundsMs[i]`; `count` and `sumMs` cover all of them.
public struct HTTPLatencyHistogram: Equatable, Sendable {
    public static let boundsMs: [Int64] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000]
    public private(set) var counts = [Int](repeating: 0, count: HTTPLatencyHistogram.boundsMs.count)
    public private(set) var count = 0
    public private(set) var sumMs: Int64 = 0

    public init() {}

    mutating func record(_ ms: Int64) {
        count += 1
        sumMs += ms
        for (i, bound) in Self.boundsMs.enumerated() where ms <= bound { counts[i] += 1 }
    }
}

/// Running counts the server keeps on the loop thread, for logs and metrics.
struct ServerCounters {
    /// Connections closed for falling behind, by the traffic class whose send overflowed.
    var slowConsumerCloses = [Int](repeating: 0, count: TrafficClass.allCases.count)
    /// Sends that took back older unsent messages of the same stream (slow panic watchers).
    var conflations = 0
}

/// A latency series split by the pair of nodes it crossed (where the change was sent, which node
/// delivered it), for a run over several nodes; nothing is kept with one node.
public struct NodePairLatency: Sendable {
    public let nodes: Int
    /// By `from * nodes + to`; empty with one node.
    private var stats: [LatencyStats]
    /// Samples recorded, and those whose two nodes differ.
    public private(set) var recorded: UInt64 = 0
    public private(set) var across: UInt64 = 0

    public init(nodes: Int) {
        self.nodes = nodes
        stats = nodes > 1 ? (0..<(nodes * nodes)).map { _ in LatencyStats() } : []
    }

    /// One sample sent to node `from` and delivered by node `to` (ignored when either is unknown).
    public mutating func record(from: Int, to: Int, ns: UInt64) {
        guard !stats.isEmpty, (0..<nodes).contains(from), (0..<nodes).contains(to) else { return }
        stats[from * nodes + to].record(ns: ns)
        recorded += 1
        if from != to { across += 1 }
    }

    /// The series as a report lists them: `"<name> 0→1"` (sent to node 0, delivered by node 1), ...
    public func series(_ name: String) -> [(String, LatencyStats)] {
        stats.enumerated().map { ("\(name) \($0.offset / nodes)→\($0.offset % nodes)", $0.element) }
    }
}

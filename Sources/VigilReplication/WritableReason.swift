/// Whether a cluster node takes writes, and why not (docs/CLUSTER.md): the decision behind
/// `ReplicatedLog.writable` and its `refusal` (`/healthz`'s `cluster.writable` and `refusal`),
/// from what the node knows of its NATS connection, the stream and its ordered consumer.
/// Writable means every condition holds; the refusal names the first that does not, in the
/// order below.
public struct WritableReason: Sendable, Equatable {
    /// Connected to a NATS server.
    public var connected: Bool
    /// The stream found (or created) as configured at the last (re)connection.
    public var streamReady: Bool
    /// The last error met finding the stream, or the reason a snapshot is awaited.
    public var lastError: String?
    /// Waiting for a snapshot from the cluster (the stream's retention passed this node's state).
    public var awaitingSnapshot: Bool
    /// How long publishes (and probes) have gone unacknowledged; nil while they are answered.
    public var stalledForMs: Int64?
    /// The ordered consumer's reason while it is lost and being recreated.
    public var consumerLost: String?
    /// Applied up to the stream's last sequence as found at the last (re)join.
    public var caughtUp: Bool

    public init(connected: Bool, streamReady: Bool, lastError: String? = nil, awaitingSnapshot: Bool = false,
                stalledForMs: Int64? = nil, consumerLost: String? = nil, caughtUp: Bool) {
        self.connected = connected
        self.streamReady = streamReady
        self.lastError = lastError
        self.awaitingSnapshot = awaitingSnapshot
        self.stalledForMs = stalledForMs
        self.consumerLost = consumerLost
        self.caughtUp = caughtUp
    }

    public var writable: Bool {
        connected && streamReady && caughtUp && !awaitingSnapshot && stalledForMs == nil && consumerLost == nil
    }

    /// Why writes are refused now (nil while writable).
    public var refusal: String? {
        if !connected { return "not connected to NATS" }
        if !streamReady { return "stream not ready" + (lastError.map { ": \($0)" } ?? "") }
        if awaitingSnapshot { return "waiting for a snapshot from the cluster" + (lastError.map { ": \($0)" } ?? "") }
        if let stalledForMs {
            return "no acknowledgement from the stream for \(stalledForMs) ms (stream leader lost?)"
        }
        if let consumerLost { return consumerLost }
        if !caughtUp { return "catching up with the stream" }
        return nil
    }
}

/// What applying one record of the replicated log did to a hub (docs/CLUSTER.md, "The replicated
/// log (design)"). Every node applies every record, in stream order, and must reach the same
/// outcome from the same state: the outcome depends only on the record, its `base` and the state
/// the record finds, never on the node, its clock or its connections.
public enum ReplicatedOutcome: Equatable, Sendable {
    /// The state changed, and the deliveries the change makes were appended.
    case applied
    /// The hub held exactly this already (a record delivered again): nothing changed, nothing
    /// was delivered.
    case duplicate
    /// A precondition failed (another writer's record came first, the thing is gone, a limit
    /// is reached): nothing changed, nothing was delivered. The reason is for the writer's reply
    /// and the log, so it names no id, token or coordinate.
    case conflict(String)
}

/// Time in applying a record. Applying reads no clock, but pin expiry and a circle's idle removal
/// happen on each node's own clock, so near such a deadline one node may still hold what another
/// has dropped. An edit made within this margin of the deadline (by the record's own time) is a
/// conflict on every node, whether it holds the thing or not, so that nodes whose clocks differ
/// by less than the margin answer the same. (NTP keeps them within milliseconds.)
public enum ReplicatedTiming {
    public static let deadlineMarginMs: Int64 = 5_000
}

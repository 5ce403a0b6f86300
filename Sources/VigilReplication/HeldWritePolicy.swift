/// What a cluster node does when the publish of one of its held writes fails (docs/CLUSTER.md
/// "Failover"), as a pure rule.
///
/// A failure that leaves the write's fate unknown (no acknowledgement within A, no responders
/// while the stream has no leader, the connection lost or not there) does not give the write
/// up: it is published again with the same `Nats-Msg-Id` every A (the stream's duplicate window
/// stores it once) until W has passed since it was made; its answer comes from the stream, or
/// `unavailable` at W (`expired`). Only a definite refusal (the request invalid, the outbound
/// buffer full, the client closed, an API error) gives it up at once.
public enum HeldWritePolicy {
    public enum Decision: Equatable, Sendable {
        /// Publish it again (same message id) at this time.
        case republish(atMs: Int64)
        /// No more copies: the stream answers it, or `expired` does at W.
        case awaitDeadline
        /// Take it back and answer `unavailable` now.
        case giveUp
    }

    /// Whether the failure leaves the write's fate unknown or only delayed (worth sending again).
    public static func isAmbiguous(_ error: JetStreamError) -> Bool {
        switch error {
        case .client(.timedOut), .client(.noResponders), .client(.connectionLost), .client(.notConnected): return true
        case .client(.outboundFull), .client(.invalid), .client(.closed): return false
        case .api, .mismatch: return false
        }
    }

    /// A publish of the write made at `madeAtMs`, sent at `sentAtMs`, failed at `nowMs`.
    public static func failed(_ error: JetStreamError, madeAtMs: Int64, sentAtMs: Int64, nowMs: Int64,
                              ackTimeoutMs: Int64, deadlineMs: Int64) -> Decision {
        guard isAmbiguous(error) else { return .giveUp }
        // One attempt per A: a timeout took A already (again at once); a failure that came
        // at once (not connected) waits out the rest of A.
        let next = max(nowMs, sentAtMs + ackTimeoutMs)
        return next - madeAtMs < deadlineMs ? .republish(atMs: next) : .awaitDeadline
    }

    /// Whether a write made at `madeAtMs` is past its deadline at `nowMs` (answered
    /// `unavailable`): strictly after W.
    public static func expired(madeAtMs: Int64, nowMs: Int64, deadlineMs: Int64) -> Bool {
        nowMs - madeAtMs > deadlineMs
    }
}

import Testing
import VigilReplication

/// `WritableReason`: a cluster node takes writes only when every condition holds, and its
/// refusal (`/healthz` `cluster.refusal`) names the first that does not.
@Suite struct WritableReasonTests {
    /// Every condition holding: connected, stream ready, caught up, nothing stalled or lost.
    static let ready = WritableReason(connected: true, streamReady: true, caughtUp: true)

    @Test func everyConditionHoldingIsWritableWithoutARefusal() {
        #expect(Self.ready.writable)
        #expect(Self.ready.refusal == nil)
        // An error left from an earlier stream lookup does not matter once the stream is ready.
        var recovered = Self.ready
        recovered.lastError = "stream info timed out"
        #expect(recovered.writable && recovered.refusal == nil)
    }

    /// Each condition failing alone (the others holding), and the reason it is refused with.
    @Test(arguments: [
        (WritableReason(connected: false, streamReady: true, caughtUp: true), "not connected to NATS"),
        (WritableReason(connected: true, streamReady: false, caughtUp: true), "stream not ready"),
        (WritableReason(connected: true, streamReady: false, lastError: "stream E2E: not found", caughtUp: true),
         "stream not ready: stream E2E: not found"),
        (WritableReason(connected: true, streamReady: true, lastError: "the stream starts at 812, after 40", awaitingSnapshot: true, caughtUp: true),
         "waiting for a snapshot from the cluster: the stream starts at 812, after 40"),
        (WritableReason(connected: true, streamReady: true, awaitingSnapshot: true, caughtUp: true),
         "waiting for a snapshot from the cluster"),
        (WritableReason(connected: true, streamReady: true, stalledForMs: 1_234, caughtUp: true),
         "no acknowledgement from the stream for 1234 ms (stream leader lost?)"),
        (WritableReason(connected: true, streamReady: true, consumerLost: "consumer lost (no heartbeat for 3000 ms); recreating", caughtUp: true),
         "consumer lost (no heartbeat for 3000 ms); recreating"),
        (WritableReason(connected: true, streamReady: true, caughtUp: false), "catching up with the stream"),
    ])
    func eachFailingConditionRefusesWithItsReason(_ r: WritableReason, _ reason: String) {
        #expect(!r.writable)
        #expect(r.refusal == reason)
    }

    /// With several conditions failing the refusal names the first in this order; mending them
    /// one by one shows each next one, and writable once all are mended.
    @Test func theFirstFailingConditionIsTheOneNamed() {
        var r = WritableReason(connected: false, streamReady: false, lastError: "e", awaitingSnapshot: true, stalledForMs: 7,
                               consumerLost: "consumer lost (x); recreating", caughtUp: false)
        var seen: [String?] = [r.refusal]
        r.connected = true; seen.append(r.refusal)
        r.streamReady = true; seen.append(r.refusal)
        r.awaitingSnapshot = false; seen.append(r.refusal)
        r.stalledForMs = nil; seen.append(r.refusal)
        r.consumerLost = nil; seen.append(r.refusal)
        r.caughtUp = true; seen.append(r.refusal)
        #expect(seen == ["not connected to NATS", "stream not ready: e", "waiting for a snapshot from the cluster: e",
                         "no acknowledgement from the stream for 7 ms (stream leader lost?)", "consumer lost (x); recreating",
                         "catching up with the stream", nil])
        #expect(r.writable)
    }

    /// Writable and "no refusal" agree in every combination of the conditions (2^6 = 64).
    @Test func writableExactlyWhenThereIsNoRefusal() {
        for bits in 0..<64 {
            let on = { (i: Int) in bits & (1 << i) != 0 }
            let r = WritableReason(connected: on(0), streamReady: on(1), lastError: on(5) ? "e" : nil, awaitingSnapshot: on(2),
                                   stalledForMs: on(3) ? 0 : nil, consumerLost: on(4) ? "lost" : nil, caughtUp: on(5))
            #expect(r.writable == (r.refusal == nil), "bits \(bits)")
            #expect(r.writable == (on(0) && on(1) && !on(2) && !on(3) && !on(4) && on(5)), "bits \(bits)")
        }
    }
}

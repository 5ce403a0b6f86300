import Testing
@testable import VigilNATS

private func delivery(_ sseq: UInt64, _ cseq: UInt64) -> NATSMessage {
    NATSMessage(subject: "V.pins.u33", sid: 9, replyTo: "$JS.ACK.V.c.1.\(sseq).\(cseq).1700000000000000000.0", payload: [1])
}

private func heartbeat(lastConsumer: UInt64, stalled: String? = nil) -> NATSMessage {
    var fields: [(name: String, value: String)] = [("Nats-Last-Consumer", String(lastConsumer)), ("Nats-Last-Stream", "0")]
    if let stalled { fields.append(("Nats-Consumer-Stalled", stalled)) }
    return NATSMessage(subject: "_INBOX.d", sid: 9, headers: NATSHeaders(status: 100, statusDescription: "Idle Heartbeat", fields: fields), payload: [])
}

@Suite struct JSOrderedConsumptionTests {
    @Test func appliesInOrderAndResetsOnAGap() {
        var c = JSOrderedConsumption(startAfter: 10)
        #expect(c.received(delivery(11, 1)) == .apply(streamSequence: 11))
        #expect(c.received(delivery(12, 2)) == .apply(streamSequence: 12))
        // Consumer sequence 3 was lost: start again after 12, numbering from 1.
        #expect(c.received(delivery(14, 4)) == .reset(fromStreamSequence: 13))
        #expect(c.received(delivery(13, 1)) == .apply(streamSequence: 13))
        #expect(c.lastStreamSequence == 13 && c.resets == 1)
        // A late delivery of the old consumer does not pass.
        #expect(c.received(delivery(12, 2)) == .reset(fromStreamSequence: 14))
    }

    @Test func streamSequencesMayJump() {
        // A filtered or purged stream skips sequences; the consumer sequence is what must be contiguous.
        var c = JSOrderedConsumption(startAfter: 0)
        #expect(c.received(delivery(5, 1)) == .apply(streamSequence: 5))
        #expect(c.received(delivery(9, 2)) == .apply(streamSequence: 9))
    }

    @Test func heartbeatsRevealLostTailsAndFlowControlIsAnswered() {
        var c = JSOrderedConsumption(startAfter: 0)
        #expect(c.received(delivery(1, 1)) == .apply(streamSequence: 1))
        #expect(c.received(heartbeat(lastConsumer: 1)) == .none)
        #expect(c.received(heartbeat(lastConsumer: 2)) == .reset(fromStreamSequence: 2))
        #expect(c.received(heartbeat(lastConsumer: 0, stalled: "$JS.FC.x")) == .respond(to: "$JS.FC.x"))
        let flow = NATSMessage(subject: "_INBOX.d", sid: 9, replyTo: "$JS.FC.V.c.1",
                               headers: NATSHeaders(status: 100, statusDescription: "FlowControl Request"), payload: [])
        #expect(c.received(flow) == .respond(to: "$JS.FC.V.c.1"))
        #expect(c.heartbeatsMissed() == .reset(fromStreamSequence: 2))
    }

    @Test func backoffGrowsWithJitterAndResets() {
        var rng = SystemRandomNumberGenerator()
        var backoff = NATSReconnectBackoff(baseMs: 100, maxMs: 1000)
        let delays = (0..<8).map { _ in backoff.nextDelayMs(using: &rng) }
        #expect(delays[0] >= 50 && delays[0] <= 100)
        #expect(delays[1] >= 100 && delays[1] <= 200)
        #expect(delays[7] >= 500 && delays[7] <= 1000)
        backoff.succeeded()
        #expect(backoff.nextDelayMs(using: &rng) <= 100)
    }
}

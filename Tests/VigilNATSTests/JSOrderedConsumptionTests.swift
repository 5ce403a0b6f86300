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

@Suite struct JSOrderedConsumptionLossTests {
    private static func deleted() -> NATSMessage {
        NATSMessage(subject: "_INBOX.d", sid: 9, headers: NATSHeaders(status: 409, statusDescription: "Consumer Deleted"), payload: [])
    }

    @Test func aConsumerDeletedStatusResetsAtOnce() {
        var c = JSOrderedConsumption(startAfter: 0)
        #expect(c.received(delivery(1, 1)) == .apply(streamSequence: 1))
        #expect(c.received(Self.deleted()) == .reset(fromStreamSequence: 2))
        #expect(c.resets == 1)
        // Another status (e.g. 408 from a pull request) changes nothing.
        let other = NATSMessage(subject: "_INBOX.d", sid: 9, headers: NATSHeaders(status: 408, statusDescription: "Request Timeout"), payload: [])
        #expect(c.received(other) == .none && c.resets == 1)
    }

    @Test func anAcknowledgedWriteNeverDeliveredResetsAfterTheWait() {
        var c = JSOrderedConsumption(startAfter: 4)
        #expect(c.tick(nowMs: 10_000, noProgressMs: 1_000) == .none)  // nothing awaited
        c.acknowledged(sequence: 5, nowMs: 1_000)
        #expect(c.tick(nowMs: 1_999, noProgressMs: 1_000) == .none)  // not yet: exactly below the wait
        #expect(c.tick(nowMs: 2_000, noProgressMs: 1_000) == .reset(fromStreamSequence: 5))
        #expect(c.resets == 1)
        // The new consumer gets the whole wait again from its creation.
        c.consumerCreated(nowMs: 2_500)
        #expect(c.tick(nowMs: 3_400, noProgressMs: 1_000) == .none)
        #expect(c.received(delivery(5, 1)) == .apply(streamSequence: 5))
        #expect(c.tick(nowMs: 9_000, noProgressMs: 1_000) == .none)  // delivered: nothing awaited
    }

    @Test func slowProgressIsNeverALoss() {
        var c = JSOrderedConsumption(startAfter: 0)
        c.acknowledged(sequence: 100, nowMs: 0)
        var now: Int64 = 0
        for s in UInt64(1)...20 {
            now += 900  // one delivery every 0.9 s, under the 1 s wait, far below sequence 100
            #expect(c.received(delivery(s, s)) == .apply(streamSequence: s))
            #expect(c.tick(nowMs: now, noProgressMs: 1_000) == .none)
        }
        // Then it stops: lost one wait after the last progress was seen.
        #expect(c.tick(nowMs: now + 999, noProgressMs: 1_000) == .none)
        #expect(c.tick(nowMs: now + 1_000, noProgressMs: 1_000) == .reset(fromStreamSequence: 21))
    }

    @Test func anAcknowledgementAlreadyDeliveredIsNotAwaited() {
        var c = JSOrderedConsumption(startAfter: 0)
        #expect(c.received(delivery(1, 1)) == .apply(streamSequence: 1))
        c.acknowledged(sequence: 1, nowMs: 0)  // the consumer was faster than the ack
        #expect(c.tick(nowMs: 60_000, noProgressMs: 1_000) == .none)
    }
}

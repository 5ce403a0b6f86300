import Testing
import VigilReplication
import VigilLoop
import VigilNATS

@Suite(.serialized) struct JetStreamTests {
    private let config = JSStreamConfig(name: "VIGILTEST", subjects: ["VIGILTEST.>"], maxAgeSeconds: 3_600, maxBytes: 64 << 20)

    /// Publishes `payload` with `id` and turns the loop until JetStream answers.
    private func publish(_ js: JetStream, _ loop: EventLoop, _ payload: String, id: String) throws -> Result<JSPubAck, JetStreamError> {
        var ack: Result<JSPubAck, JetStreamError>?
        try js.publish(subject: "VIGILTEST.pins.u33", messageID: id, payload: Array(payload.utf8)) { ack = $0 }
        _ = try turn(loop, until: { ack != nil })
        return try #require(ack)
    }

    private func ensure(_ js: JetStream, _ loop: EventLoop, _ config: JSStreamConfig) throws -> Result<JSStreamInfo, JetStreamError> {
        var info: Result<JSStreamInfo, JetStreamError>?
        try js.ensureStream(config) { info = $0 }
        _ = try turn(loop, until: { info != nil })
        return try #require(info)
    }

    @Test func createsTheStreamPublishesWithAcksAndConsumesInOrder() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let js = JetStream(client: client, timeoutMs: 3_000)

        let created = try ensure(js, loop, config).get()
        #expect(created.name == "VIGILTEST" && created.lastSequence == 0)
        // Again: found, not created twice.
        #expect(try ensure(js, loop, config).get().subjects == ["VIGILTEST.>"])
        // Same name, other subjects: refused, not taken over.
        var other = config
        other.subjects = ["ELSE.>"]
        guard case .failure(.mismatch) = try ensure(js, loop, other) else { Issue.record("a foreign stream was accepted"); return }

        for i in 1...5 {
            #expect(try publish(js, loop, "p\(i)", id: "n1-\(i)").get() == JSPubAck(stream: "VIGILTEST", sequence: UInt64(i)))
        }
        // A retry with the same id (its ack was lost, say) stores nothing new.
        #expect(try publish(js, loop, "p3 again", id: "n1-3").get() == JSPubAck(stream: "VIGILTEST", sequence: 3, duplicate: true))
        // Outside the stream's subjects nobody answers: the write is refused, not lost silently.
        var stray: Result<JSPubAck, JetStreamError>?
        try js.publish(subject: "NOTASTREAM.x", messageID: "z", payload: [1]) { stray = $0 }
        #expect(try turn(loop, until: { stray != nil }))
        #expect(stray == .failure(.client(.noResponders)))

        var seen: [(UInt64, String)] = []
        let consumer = OrderedConsumer(jetStream: js, stream: "VIGILTEST", startAfter: 2, heartbeatMs: 1_000) { seq, message in
            seen.append((seq, String(decoding: message.payload, as: UTF8.self)))
        }
        defer { consumer.stop() }
        #expect(try turn(loop, until: { seen.count == 3 }))
        #expect(seen.map(\.0) == [3, 4, 5] && seen.map(\.1) == ["p3", "p4", "p5"])
        #expect(try publish(js, loop, "p6", id: "n1-6").get().sequence == 6)
        #expect(try turn(loop, until: { seen.count == 4 }))
        #expect(seen.last?.0 == 6)
        // Idle for more than the 3 heartbeat intervals that would presume the consumer lost:
        // the heartbeats keep it; no reset, no duplicate.
        let idle = monotonicMilliseconds()
        #expect(try turn(loop, until: { monotonicMilliseconds() - idle > 3_500 }, timeoutMs: 5_000))
        #expect(consumer.resets == 0 && consumer.consumersCreated == 1 && seen.count == 4)
    }

    @Test func theStreamAndTheConsumerSurviveAServerKill() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let js = JetStream(client: client, timeoutMs: 3_000)
        _ = try ensure(js, loop, config).get()
        for i in 1...3 { _ = try publish(js, loop, "a\(i)", id: "a\(i)").get() }
        var seen: [UInt64] = []
        let consumer = OrderedConsumer(jetStream: js, stream: "VIGILTEST", startAfter: 0, heartbeatMs: 500) { seq, _ in seen.append(seq) }
        defer { consumer.stop() }
        #expect(try turn(loop, until: { seen == [1, 2, 3] }))

        server.kill()
        #expect(try turn(loop, until: { client.state != .connected }))
        #expect(throws: NATSClientError.notConnected) {
            try js.publish(subject: "VIGILTEST.pins.u33", messageID: "x", payload: [1]) { _ in }
        }
        try server.start()  // same port, same store: the file-stored stream is back
        #expect(try turn(loop, until: { client.state == .connected }, timeoutMs: 5_000))
        // The first publish after a restart may meet JetStream still recovering; retry with the same id.
        var ack: JSPubAck?
        for _ in 0..<20 where ack == nil {
            if case .success(let a) = try? publish(js, loop, "a4", id: "a4") { ack = a } else {
                _ = try turn(loop, until: { false }, timeoutMs: 250)
            }
        }
        #expect(ack?.sequence == 4)
        // The consumer was recreated from sequence 4: nothing repeated, nothing skipped.
        #expect(try turn(loop, until: { seen.count >= 4 }, timeoutMs: 8_000))
        #expect(seen == [1, 2, 3, 4])
        // The new consumer's deliveries may come before the reply to its creation (the server
        // sends both, in no fixed order): wait for the reply rather than assume it came first.
        #expect(try turn(loop, until: { consumer.consumersCreated >= 2 }))
    }

    @Test func aStoppedConsumerLeavesNoHandlerOnTheClient() throws {
        let loop = try EventLoop()
        // Never started: the consumers only register and unregister (no server needed).
        let client = NATSClient(urls: [try NATSServerURL.parse("nats://127.0.0.1:4222").get()],
                                options: NATSConnectOptions(name: "vigil-test"), loop: loop)
        let js = JetStream(client: client, timeoutMs: 1_000)
        let before = client.handlerCount
        let kept = OrderedConsumer(jetStream: js, stream: "VIGILTEST", startAfter: 0) { _, _ in }
        #expect(client.handlerCount == before + 2)
        for i in 0..<200 {
            let consumer = OrderedConsumer(jetStream: js, stream: "VIGILTEST", startAfter: UInt64(i)) { _, _ in }
            consumer.stop()
        }
        #expect(client.handlerCount == before + 2)  // only the one still running
        kept.stop()
        kept.stop()
        #expect(client.handlerCount == before)
    }
}

import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// Three `nats-server -js` in one NATS cluster on loopback, the stream replicated 3 times: the
/// server a client is connected to is killed in the middle of acknowledged writes; the client
/// moves to another server, the writes resume, and nothing acknowledged is lost or doubled.
@Suite(.serialized) struct JetStreamClusterTests {
    @Test func writesResumeAfterAServerOfThreeIsKilledAndNothingAcknowledgedIsLost() throws {
        let servers = try NATSServerProcess.startCluster(named: "VT")
        let loop = try EventLoop()
        let client = try makeClient(servers.map(\.url), loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        let js = JetStream(client: client, timeoutMs: 2_000)

        // The stream's own replicas elect their leader after the metadata leader: ask until it answers.
        let config = JSStreamConfig(name: "R3", subjects: ["R3.>"], replicas: 3, maxAgeSeconds: 3_600, maxBytes: 64 << 20)
        var created: JSStreamInfo?
        var lastFailure = "no answer"
        let electionDeadline = monotonicMilliseconds() + 45_000
        while created == nil && monotonicMilliseconds() < electionDeadline {
            var outcome: Result<JSStreamInfo, JetStreamError>?
            try? js.ensureStream(config) { outcome = $0 }
            _ = try turn(loop, until: { outcome != nil }, timeoutMs: 3_000)
            switch outcome {
            case .success(let info)?: created = info
            case .failure(let error)?: lastFailure = "\(error)"; _ = try turn(loop, until: { false }, timeoutMs: 200)
            case nil: lastFailure = "no answer in 3 s"
            }
        }
        try #require(created?.replicas == 3, "the stream was not created: \(lastFailure)")

        // Writes one at a time; a failed one is retried with the same Nats-Msg-Id until acknowledged.
        let total = 120
        var acked: [UInt64] = []
        var inFlight = false
        var lastAckMs = monotonicMilliseconds()
        var longestPauseMs: Int64 = 0
        var killedAtAck: Int?
        var leaderBeforeKill: Result<JSStreamInfo, JetStreamError>?
        try js.streamInfo("R3") { leaderBeforeKill = $0 }
        _ = try turn(loop, until: { leaderBeforeKill != nil })
        var retryAtMs: Int64 = 0
        let deadline = monotonicMilliseconds() + 40_000
        while acked.count < total && monotonicMilliseconds() < deadline {
            try loop.turn(timeoutMs: 10)
            if acked.count == 40 && killedAtAck == nil {
                // The server the client is on (the first URL that answered: the first one).
                servers[0].kill()
                killedAtAck = acked.count
            }
            guard !inFlight, acked.count < total, monotonicMilliseconds() >= retryAtMs else { continue }
            let i = acked.count + 1
            do {
                try js.publish(subject: "R3.pins.u33", messageID: "m\(i)", payload: Array("m\(i)".utf8)) { result in
                    inFlight = false
                    switch result {
                    case .success(let ack):
                        let now = monotonicMilliseconds()
                        longestPauseMs = max(longestPauseMs, now - lastAckMs)
                        lastAckMs = now
                        acked.append(ack.sequence)
                    case .failure:
                        retryAtMs = monotonicMilliseconds() + 100
                    }
                }
                inFlight = true
            } catch {
                retryAtMs = monotonicMilliseconds() + 100  // not connected yet: try again shortly
            }
        }
        #expect(killedAtAck == 40)
        // Every write acknowledged once, at consecutive sequences: a retry of a write whose ack was
        // lost was recognised by its id (`duplicate`) and acknowledged at its first sequence.
        #expect(acked == (1...UInt64(total)).map { $0 })
        // A new RAFT leader for the stream takes seconds when the killed server led it.
        #expect(longestPauseMs < 15_000, "writes paused \(longestPauseMs) ms")
        let killedLed = (try? leaderBeforeKill?.get().leader) == "s1"
        print("JetStreamClusterTests: the longest pause between acknowledged writes around the kill was \(longestPauseMs) ms"
              + " (the killed server \(killedLed ? "led" : "did not lead") the stream)")

        // And the stream holds exactly them, in order, readable from any surviving server.
        var read: [String] = []
        let consumer = OrderedConsumer(jetStream: js, stream: "R3", startAfter: 0, heartbeatMs: 1_000) { _, message in
            read.append(String(decoding: message.payload, as: UTF8.self))
        }
        defer { consumer.stop() }
        #expect(try turn(loop, until: { read.count >= total }, timeoutMs: 15_000))
        #expect(read == (1...total).map { "m\($0)" })
    }
}

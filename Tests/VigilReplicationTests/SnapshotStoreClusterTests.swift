import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// The snapshot bucket replicated 3 times on a NATS cluster of three `nats-server -js`: a put
/// acknowledged by a quorum, then read back (direct gets may be answered by any replica), and
/// read again from another server after the one the client was on is killed.
@Suite(.serialized) struct SnapshotStoreClusterTests {
    @Test func aSnapshotReplicatedThreeTimesSurvivesTheLossOfAServer() throws {
        let servers = try NATSServerProcess.startCluster(named: "VS")
        let loop = try EventLoop()
        let client = try makeClient(servers.map(\.url), loop: loop)
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        var settings = SnapshotStoreSettings(replicationName: "R", maxSnapshotBytes: 16 << 20, replicas: 3)
        settings.maxAcksOutstanding = 4
        let store = SnapshotStore(jetStream: JetStream(client: client, timeoutMs: 2_000), settings: settings)
        let h = SnapshotHarness(loop: loop, store: store)

        // The cluster elects its JetStream leader in its first seconds: the bucket's creation is
        // retried until it answers.
        var ready: JSStreamInfo?
        var lastFailure = "no answer"
        let deadline = monotonicMilliseconds() + 45_000
        while ready == nil && monotonicMilliseconds() < deadline {
            var outcome: Result<JSStreamInfo, SnapshotStoreError>?
            try? store.ensureBucket { outcome = $0 }
            _ = try turn(loop, until: { outcome != nil }, timeoutMs: 3_000)
            switch outcome {
            case .success(let info)?: ready = info
            case .failure(let error)?: lastFailure = "\(error)"; _ = try turn(loop, until: { false }, timeoutMs: 200)
            case nil: lastFailure = "no answer in 3 s"
            }
        }
        #expect(try #require(ready, "the bucket was not created: \(lastFailure)").replicas == 3)

        let bytes = seededBytes(3 << 20, seed: 21)
        let published = try h.put(bytes, sequence: 77).get()
        guard case .snapshot(let got) = try h.getNewest().get() else { Issue.record("no snapshot"); return }
        #expect(got.bytes == bytes && got.info.nuid == published.info.nuid)

        servers[0].kill()  // the server the client is on (the first URL)
        #expect(try turn(loop, until: { client.state != .connected }, timeoutMs: 3_000))
        #expect(try turn(loop, until: { client.state == .connected }, timeoutMs: 5_000))
        // The stream may need a new leader: a read that fails meanwhile is retried.
        var again: StoredSnapshot?
        for _ in 0..<20 where again == nil {
            if case .success(.snapshot(let s)) = try h.getNewest() { again = s } else { _ = try turn(loop, until: { false }, timeoutMs: 500) }
        }
        #expect(again?.bytes == bytes && again?.metadata.replicatedSequence == 77)
    }
}

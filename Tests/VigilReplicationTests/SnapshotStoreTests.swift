import Testing
import VigilReplication
import VigilLoop
import VigilNATS

/// Bytes from a seeded generator (SplitMix64), 8 at a time: fast enough in a debug build.
func seededBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { raw in
        var i = 0
        while i < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for b in 0..<min(8, count - i) { raw[i + b] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(b))) }
            i += 8
        }
    }
    return out
}

/// The object store's own calls, turned to completion on the test's loop.
struct SnapshotHarness {
    let loop: EventLoop
    let store: SnapshotStore
    var js: JetStream { store.jetStream }

    func put(_ bytes: [UInt8], sequence: UInt64, node: String = "n1", timeoutMs: Int64 = 30_000) throws -> Result<PublishedSnapshot, SnapshotStoreError> {
        var outcome: Result<PublishedSnapshot, SnapshotStoreError>?
        try store.put(bytes, metadata: SnapshotMetadata(replicatedSequence: sequence, nodeID: node, formatVersion: 3, takenAtMs: 1_764_000_000_000)) {
            outcome = $0
        }
        _ = try turn(loop, until: { outcome != nil }, timeoutMs: timeoutMs)
        return try #require(outcome)
    }

    func getNewest(timeoutMs: Int64 = 30_000) throws -> Result<SnapshotLookup, SnapshotStoreError> {
        var outcome: Result<SnapshotLookup, SnapshotStoreError>?
        try store.getNewest { outcome = $0 }
        _ = try turn(loop, until: { outcome != nil }, timeoutMs: timeoutMs)
        return try #require(outcome)
    }

    func streamInfo() throws -> JSStreamInfo {
        var info: Result<JSStreamInfo, JetStreamError>?
        try js.streamInfo(JSObjectStore.streamName(bucket: store.settings.bucket)) { info = $0 }
        _ = try turn(loop, until: { info != nil })
        return try #require(info).get()
    }

    /// A request answered by JetStream (a hand-made publish, a purge), its reply payload.
    func request(_ subject: String, headers: NATSHeaders? = nil, _ payload: [UInt8]) throws -> [UInt8] {
        var reply: Result<NATSMessage, NATSClientError>?
        try js.client.request(subject: subject, headers: headers, payload: payload, timeoutMs: 3_000) { reply = $0 }
        _ = try turn(loop, until: { reply != nil })
        return try #require(reply).get().payload
    }

    /// Publishes `info` as the object's meta by hand (rollup, as a put does).
    func publishMeta(_ payload: [UInt8]) throws {
        let subject = JSObjectStore.metaSubject(bucket: store.settings.bucket, name: store.settings.objectName)
        let ack = try request(subject, headers: NATSHeaders(fields: [JSObjectStore.rollupHeader]), payload)
        _ = try JSPubAck.decode(ack).get()
    }
}

func snapshotHarness(_ client: NATSClient, _ loop: EventLoop, maxSnapshotBytes: Int = 32 << 20) -> SnapshotHarness {
    let settings = SnapshotStoreSettings(replicationName: "T", maxSnapshotBytes: maxSnapshotBytes)
    return SnapshotHarness(loop: loop, store: SnapshotStore(jetStream: JetStream(client: client, timeoutMs: 3_000), settings: settings))
}

@Suite(.serialized) struct SnapshotStoreTests {
    @Test func roundTripsEmptySmallAndMultiChunkSnapshots() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop)

        // Nothing published yet, not even a bucket: a distinct "none", not an error.
        #expect(try h.getNewest().get() == .none)
        #expect(!h.store.bucketReady)

        for (i, bytes) in [[], Array("a small snapshot".utf8), seededBytes(5 * 1_048_576 + 123, seed: 7)].enumerated() {
            let published = try h.put(bytes, sequence: UInt64(100 + i)).get()
            let chunks = (bytes.count + 131_071) / 131_072
            #expect(published.info.size == UInt64(bytes.count) && published.info.chunks == chunks)
            #expect(published.info.name == "latest" && published.info.bucket == "T_SNAPSHOTS")
            guard case .snapshot(let got) = try h.getNewest().get() else { Issue.record("no snapshot after put \(i)"); return }
            #expect(got.bytes == bytes, "put \(i): \(got.bytes.count) bytes back for \(bytes.count)")
            #expect(got.metadata == SnapshotMetadata(replicatedSequence: UInt64(100 + i), nodeID: "n1", formatVersion: 3, takenAtMs: 1_764_000_000_000))
            #expect(got.info.digest == published.info.digest && got.metaSequence == published.metaSequence)
            #expect(got.storedAt.hasPrefix("20"))
        }
        // The bucket is the object store's stream: both subject spaces, rollups allowed.
        let info = try h.streamInfo()
        #expect(info.name == "OBJ_T_SNAPSHOTS" && Set(info.subjects) == ["$O.T_SNAPSHOTS.C.>", "$O.T_SNAPSHOTS.M.>"])
    }

    @Test func aPutReplacesTheObjectAndPurgesTheOldChunks() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop)

        let first = try h.put(seededBytes(3 * 1_048_576, seed: 1), sequence: 10).get()
        #expect(first.info.chunks == 24 && first.purgedMessages == 0)
        var info = try h.streamInfo()
        #expect(info.messages == 25)  // 24 chunks and the meta
        let second = try h.put(seededBytes(1_048_576 + 1, seed: 2), sequence: 20).get()
        #expect(second.info.chunks == 9 && second.purgedMessages == 24 && second.info.nuid != first.info.nuid)
        info = try h.streamInfo()
        // One object left: its 9 chunks and one meta (the rollup removed the first meta).
        #expect(info.messages == 10, "\(info.messages) messages left")
        #expect(info.bytes > 1_048_576 && info.bytes < 1_048_576 + 16_384, "\(info.bytes) bytes left")
        guard case .snapshot(let got) = try h.getNewest().get() else { Issue.record("no snapshot"); return }
        #expect(got.metadata.replicatedSequence == 20 && got.bytes == seededBytes(1_048_576 + 1, seed: 2))

        // A node behind the snapshot in the store does not replace it with an older one.
        #expect(try h.put(seededBytes(1_000, seed: 3), sequence: 19, node: "n2") == .failure(.superseded(20)))
        #expect(try h.streamInfo().messages == 10)
        guard case .snapshot(let kept) = try h.getNewest().get() else { Issue.record("no snapshot"); return }
        #expect(kept.metadata == got.metadata && kept.info.nuid == second.info.nuid)
    }

    @Test func corruptOrHostileObjectsAreRefusedWithClearErrors() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop, maxSnapshotBytes: 1 << 20)
        let bytes = seededBytes(300_000, seed: 3)
        let published = try h.put(bytes, sequence: 5).get()
        let stream = JSObjectStore.streamName(bucket: "T_SNAPSHOTS")
        let chunkSubject = JSObjectStore.chunkSubject(bucket: "T_SNAPSHOTS", nuid: published.info.nuid)

        // The same chunk sizes, one byte changed: only the digest can tell.
        _ = try JSPurge.decodePurged(h.request(JSAPI.streamPurge(stream), JSPurge.request(filter: chunkSubject))).get()
        var wrong = bytes
        wrong[200_000] ^= 0x01
        for start in stride(from: 0, to: wrong.count, by: 131_072) {
            _ = try JSPubAck.decode(h.request(chunkSubject, Array(wrong[start..<min(start + 131_072, wrong.count)]))).get()
        }
        guard case .failure(.digestMismatch(let expected, let actual)) = try h.getNewest() else {
            Issue.record("a changed chunk was not caught by the digest"); return
        }
        #expect(expected == published.info.digest && actual != expected)

        // The right chunks and one too many after them: not this object.
        _ = try JSPurge.decodePurged(h.request(JSAPI.streamPurge(stream), JSPurge.request(filter: chunkSubject))).get()
        for start in stride(from: 0, to: bytes.count, by: 131_072) {
            _ = try JSPubAck.decode(h.request(chunkSubject, Array(bytes[start..<min(start + 131_072, bytes.count)]))).get()
        }
        _ = try JSPubAck.decode(h.request(chunkSubject, [1, 2, 3])).get()
        guard case .failure(.corrupt(let why)) = try h.getNewest() else { Issue.record("an extra chunk was accepted"); return }
        #expect(why.contains("more than"))

        // Chunks missing (purged, as when replaced while being read): the end of the subject comes early.
        _ = try JSPurge.decodePurged(h.request(JSAPI.streamPurge(stream), JSPurge.request(filter: chunkSubject))).get()
        _ = try JSPubAck.decode(h.request(chunkSubject, Array(bytes[0..<131_072]))).get()
        let retriedBefore = h.store.attemptsRetried
        guard case .failure(.incomplete) = try h.getNewest() else { Issue.record("a missing chunk was not noticed"); return }
        #expect(h.store.attemptsRetried == retriedBefore + 2)  // 3 attempts, each from the meta

        // A meta announcing more than the maximum: refused before any chunk is asked for.
        var huge = published.info
        huge.size = 1 << 40
        huge.chunks = 8_388_608
        try h.publishMeta(huge.encode())
        let asked = monotonicMilliseconds()
        #expect(try h.getNewest() == .failure(.tooLarge(size: 1 << 40, max: 1 << 20)))
        #expect(monotonicMilliseconds() - asked < 1_000)

        // Not JSON; not a Vigil snapshot's metadata; another object's name.
        try h.publishMeta(Array("{\"name\":".utf8))
        guard case .failure(.corrupt) = try h.getNewest() else { Issue.record("a broken meta was accepted"); return }
        var foreign = published.info
        foreign.metadata = ["owner": "someone"]
        try h.publishMeta(foreign.encode())
        guard case .failure(.corrupt(let why2)) = try h.getNewest() else { Issue.record("a foreign object was accepted"); return }
        #expect(why2.contains("metadata"))

        // A deleted object (as `nats object rm` leaves it) is no snapshot.
        var deleted = published.info
        deleted.deleted = true
        deleted.digest = ""
        deleted.size = 0
        deleted.chunks = 0
        try h.publishMeta(deleted.encode())
        #expect(try h.getNewest() == .success(.none))

        // And a put over all of that puts a good snapshot back.
        _ = try h.put(bytes, sequence: 6).get()
        guard case .snapshot(let good) = try h.getNewest().get() else { Issue.record("no snapshot after repair"); return }
        #expect(good.bytes == bytes && good.metadata.replicatedSequence == 6)
    }

    @Test func aDownloadWhoseObjectIsReplacedMeanwhileStartsAgainFromTheNewMeta() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let reader = snapshotHarness(client, loop)
        let writer = snapshotHarness(client, loop)  // another node's store on the same bucket
        _ = try writer.put(seededBytes(16 << 20, seed: 31), sequence: 1).get()

        var outcome: Result<SnapshotLookup, SnapshotStoreError>?
        try reader.store.getNewest { outcome = $0 }
        #expect(try turn(loop, until: { reader.store.chunksReceived >= 3 }))
        // Replaced after 3 of 128 chunks: a one-chunk put (a few round trips) purges the old
        // chunks long before the download's 125 remaining ones are read.
        let replacement = seededBytes(50_000, seed: 32)
        #expect(try writer.put(replacement, sequence: 2).get().purgedMessages == 128)
        #expect(try turn(loop, until: { outcome != nil }, timeoutMs: 30_000))
        guard case .success(.snapshot(let got))? = outcome else { Issue.record("download: \(String(describing: outcome))"); return }
        #expect(got.bytes == replacement && got.metadata.replicatedSequence == 2)
        #expect(reader.store.attemptsRetried == 1)
    }

    @Test func sizesAboveTheMaximumAreRefusedBeforeAnythingMoves() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let big = snapshotHarness(client, loop, maxSnapshotBytes: 2 << 20)
        _ = try big.put(seededBytes(1_500_000, seed: 4), sequence: 1).get()
        #expect(throws: SnapshotStoreError.tooLarge(size: 3 << 20, max: 2 << 20)) {
            try big.store.put(seededBytes(3 << 20, seed: 5), metadata: SnapshotMetadata(replicatedSequence: 2, nodeID: "n1", formatVersion: 3, takenAtMs: 0)) { _ in }
        }
        #expect(!big.store.isPutting)
        // A node configured for smaller snapshots does not download this one.
        let small = snapshotHarness(client, loop, maxSnapshotBytes: 1 << 20)
        #expect(try small.getNewest() == .failure(.tooLarge(size: 1_500_000, max: 1 << 20)))
        #expect(small.store.chunksReceived == 0)
        // One put at a time.
        try big.store.put([1], metadata: SnapshotMetadata(replicatedSequence: 3, nodeID: "n1", formatVersion: 3, takenAtMs: 0)) { _ in }
        #expect(throws: SnapshotStoreError.busy) {
            try big.store.put([2], metadata: SnapshotMetadata(replicatedSequence: 4, nodeID: "n1", formatVersion: 3, takenAtMs: 0)) { _ in }
        }
        #expect(try turn(loop, until: { !big.store.isPutting }))
    }

    @Test func aStreamOfTheBucketsNameThatIsNotAnObjectStoreIsNotUsed() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop)
        // The bucket's name and subjects, as a plain stream would have them (no direct gets).
        var created: Result<JSStreamInfo, JetStreamError>?
        try h.js.ensureStream(JSStreamConfig(name: "OBJ_T_SNAPSHOTS", subjects: JSObjectStore.subjects(bucket: "T_SNAPSHOTS"),
                                             maxAgeSeconds: 3_600, maxBytes: 1 << 20)) { created = $0 }
        #expect(try turn(loop, until: { created != nil }))
        _ = try #require(created).get()
        guard case .failure(.jetStream(.mismatch(let why))) = try h.put([1, 2, 3], sequence: 1) else {
            Issue.record("a plain stream was used as the bucket"); return
        }
        #expect(why.contains("allow_rollup_hdrs"))
        #expect(!h.store.bucketReady && h.store.chunksAcknowledged == 0)
    }

    @Test func aPutWaitsForRoomWhenTheClientsOutputIsFull() throws {
        let server = try NATSServerProcess()
        try server.start()
        let loop = try EventLoop()
        var settings = NATSClientSettings()
        settings.tickMs = 20
        settings.maxPendingBytes = 150_000  // room for one 128 KiB chunk, not two
        let client = NATSClient(urls: [try NATSServerURL.parse(server.url).get()], options: NATSConnectOptions(name: "t"),
                                settings: settings, loop: loop)
        try client.start()
        defer { client.close() }
        #expect(try turn(loop, until: { client.state == .connected }))
        let h = snapshotHarness(client, loop)
        let bytes = seededBytes(1_048_576 + 7, seed: 13)
        // The second chunk of each window is refused by the client (outboundFull): the put sends
        // it after the first one's acknowledgement instead of failing or buffering.
        _ = try h.put(bytes, sequence: 1).get()
        guard case .snapshot(let got) = try h.getNewest().get() else { Issue.record("no snapshot"); return }
        #expect(got.bytes == bytes)
    }

    @Test func aServerKilledDuringAPutFailsItClearlyAndTheNextPutSucceeds() throws {
        let (server, loop, client) = try connectedClient()
        defer { client.close() }
        defer { withExtendedLifetime(server) {} }
        let h = snapshotHarness(client, loop)
        let before = try h.put(seededBytes(600_000, seed: 8), sequence: 1).get()

        var outcome: Result<PublishedSnapshot, SnapshotStoreError>?
        try h.store.put(seededBytes(5 << 20, seed: 9), metadata: SnapshotMetadata(replicatedSequence: 2, nodeID: "n1", formatVersion: 3, takenAtMs: 0)) {
            outcome = $0
        }
        #expect(try turn(loop, until: { h.store.chunksAcknowledged >= 10 }, timeoutMs: 10_000))
        server.kill()
        #expect(try turn(loop, until: { outcome != nil }, timeoutMs: 5_000))
        guard case .failure(.client(let why))? = outcome else { Issue.record("put outcome \(String(describing: outcome))"); return }
        #expect(why == .connectionLost || why == .timedOut)
        #expect(!h.store.isPutting)
        #expect(throws: SnapshotStoreError.client(.notConnected)) {
            try h.store.put([1], metadata: SnapshotMetadata(replicatedSequence: 3, nodeID: "n1", formatVersion: 3, takenAtMs: 0)) { _ in }
        }

        try server.start()  // same store directory: the acknowledged chunks of the failed put are back
        #expect(try turn(loop, until: { client.state == .connected }, timeoutMs: 5_000))
        // The previous snapshot is still the current one.
        guard case .snapshot(let still) = try h.getNewest().get() else { Issue.record("the previous snapshot is gone"); return }
        #expect(still.info.nuid == before.info.nuid && still.bytes == seededBytes(600_000, seed: 8))

        // JetStream may still be recovering just after the restart: a failed attempt is retried.
        let retry = seededBytes(2 << 20, seed: 10)
        var after: PublishedSnapshot?
        for _ in 0..<10 where after == nil {
            if case .success(let p) = try h.put(retry, sequence: 4) { after = p } else { _ = try turn(loop, until: { false }, timeoutMs: 300) }
        }
        let published = try #require(after)
        // The replaced object's chunks and the failed put's partial ones are purged: one object left.
        let info = try h.streamInfo()
        #expect(info.messages == UInt64(published.info.chunks + 1), "\(info.messages) messages for \(published.info.chunks) chunks")
        guard case .snapshot(let got) = try h.getNewest().get() else { Issue.record("no snapshot"); return }
        #expect(got.bytes == retry && got.metadata.replicatedSequence == 4)
    }
}

import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// End-to-end encrypted streams on disk and across a cluster: journal kinds 33 (start) and 34
/// (rekey), event kinds 7 (sealed location) and 8 (escalation with a sealed last), snapshot
/// version 9's e2e part, replay and the replicated apply. Nothing written holds a coordinate.
@Suite struct E2EDurabilityTests {
    static let circle = CircleID(high: 7, low: 9)

    static func sealed(_ fill: UInt8, count: Int = 92) -> SealedBytes { SealedBytes(bytes: [UInt8](repeating: fill, count: count)) }

    /// An e2e stream for a circle, as the hub makes it, and the records the server journals for
    /// it: the start, a sealed update, the escalation of its safety timer, a rekey and a sealed
    /// update under the new key.
    static func sample() -> (hub: PanicHub, id: StreamID, records: [JournalRecord]) {
        let secrets = TestSecrets()
        var hub = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        let kid = E2EKeyID(bytes: Array(0...15)), newKid = E2EKeyID(bytes: Array(16...31))
        let boxes = [MemberBox(member: 1, box: sealed(11, count: 60)), MemberBox(member: 3, box: sealed(13, count: 60))]
        let started = try! hub.start(owner: 1, status: .amber, origin: .e2e(E2EStart(keys: E2EKeys(kid: kid, boxes: boxes), sealed: sealed(1))),
                                     watchers: 1, timer: .at(1_700_000_600_000), circle: circle, secrets: secrets,
                                     now: 1_700_000_000_000, out: &out).get().stream
        let id = started.id
        var records: [JournalRecord] = [.panicStart(started)]
        func update(seq: UInt64, status: PanicStatus, kid: E2EKeyID, fill: UInt8, now: Int64) {
            let point = SealedPoint(kid: kid, status: status, sealed: sealed(fill))
            _ = try! hub.updateSealed(id, by: 1, ownerToken: nil, update: SealedUpdate(point: point, seq: seq), secrets: secrets,
                                      now: now, out: &out).get()
            records.append(JournalRecord.latestEvent(of: hub.stream(id)!)!)
        }
        update(seq: 2, status: .amber, kid: kid, fill: 2, now: 1_700_000_001_000)
        records += hub.tick(now: 1_700_000_600_000, out: &out).map { .panicEvent($0.stream, $0.event) }
        let keys = E2EKeys(kid: newKid, boxes: [MemberBox(member: 1, box: sealed(21, count: 60))])
        _ = try! hub.rekey(id, by: 1, ownerToken: nil, keys: keys, secrets: secrets, out: &out).get()
        records.append(.panicRekey(id, keys))
        update(seq: 4, status: .red, kid: newKid, fill: 4, now: 1_700_000_601_000)
        return (hub, id, records)
    }

    static func expectSame(_ a: PanicStream?, _ b: PanicStream?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let a, let b else { Issue.record("a stream is missing", sourceLocation: sourceLocation); return }
        #expect(a.hasTheSameState(as: b) && a.e2e == b.e2e && a.circle == b.circle && a.watchTokenDigests == b.watchTokenDigests,
                sourceLocation: sourceLocation)
    }

    @Test func theRecordsRoundTripAndUseTheirKinds() throws {
        let (_, _, records) = Self.sample()
        #expect(records.count == 5)
        let kinds = records.map { JournalCodec.encode($0)[JournalCodec.frameBytes] }
        #expect(kinds == [33, 4, 4, 34, 4])
        var segment: [UInt8] = []
        for r in records { JournalCodec.append(r, to: &segment) }
        #expect(JournalCodec.scan(segment).records == records)
        // The event kinds inside: a sealed location (7), the escalation with a sealed last (8).
        let eventKinds = records.compactMap { r -> UInt8? in
            guard case .panicEvent = r else { return nil }
            return JournalCodec.encode(r)[JournalCodec.frameBytes + 1 + 16 + 16]
        }
        #expect(eventKinds == [7, 8, 7])
        guard case .panicStart(let start) = records[0] else { Issue.record("not a start"); return }
        #expect(start.location == nil && start.note == nil && start.e2e?.keys.boxes.count == 2)
    }

    @Test func damagedRecordsAreRefused() throws {
        let (_, _, records) = Self.sample()
        for record in [records[0], records[3]] {
            let payload = Array(JournalCodec.encode(record)[JournalCodec.frameBytes...])
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Array(payload.dropLast())) }
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload + [0]) }
        }
        // The start's sealed value claims 27 bytes: below a nonce and a tag.
        var start = Array(JournalCodec.encode(records[0])[JournalCodec.frameBytes...])
        let lengthAt = start.count - 92 - 4
        #expect(start[lengthAt] == 92)
        start[lengthAt] = 27
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: start) }
    }

    @Test func aVersion9SnapshotKeepsTheStreamAndTheJournalRebuildsIt() throws {
        let (hub, id, records) = Self.sample()
        let stream = try #require(hub.stream(id))
        let bytes = SnapshotCodec.encode(StateSnapshot(takenAt: 1_700_000_700_000, journalSegment: 2, pins: [], streams: [stream]))
        #expect(bytes[8] == 9)
        let decoded = try SnapshotCodec.decode(bytes)
        Self.expectSame(decoded.streams.first, stream)
        #expect(decoded.streams.first?.e2e?.kid == E2EKeyID(bytes: Array(16...31)))
        // The journal alone rebuilds the same stream.
        var image = StateImage(StateSnapshot(takenAt: 0, journalSegment: 0, pins: [], streams: []))
        for r in records { image.apply(r) }
        for r in records { image.apply(r) }                       // replayed twice: nothing changes
        #expect(image.issueCount == 0)
        Self.expectSame(image.streams[id], stream)
        // A rekey of a clear stream, or of no stream, changes nothing.
        var clear = PanicStartRecord(Fixtures.stream(TestSecrets(), events: 1, capacity: 4))
        clear.id = StreamID(high: 1, low: 1)
        image.apply(.panicStart(clear))
        image.apply(.panicRekey(clear.id, E2EKeys(kid: E2EKeyID(bytes: Array(0...15)), boxes: [])))
        #expect(image.streams[clear.id]?.e2e == nil)
    }

    @Test func aClusterNodeAppliesTheSameRecords() throws {
        let (hub, id, records) = Self.sample()
        var replica = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        for r in records {
            switch r {
            case .panicStart(let start): #expect(replica.applyReplicatedStart(try start.stream(), owner: nil) == .applied)
            case .panicEvent(let id, let event): #expect(replica.applyReplicatedEvent(id, event, out: &out) == .applied)
            case .panicRekey(let id, let keys): #expect(replica.applyReplicatedRekey(id, keys, out: &out) == .applied)
            default: Issue.record("unexpected \(r)")
            }
        }
        Self.expectSame(replica.stream(id), hub.stream(id))
        guard case .panicRekey(_, let keys) = records[3] else { return }
        #expect(replica.applyReplicatedRekey(id, keys, out: &out) == .duplicate)
        // A clear location for the e2e stream is a conflict, never applied.
        let clear = PanicEvent(seq: 5, at: 1_700_000_602_000, kind: .location(PanicLocation(lat: 1, lon: 2)))
        #expect(replica.applyReplicatedEvent(id, clear, out: &out) != .applied && replica.stream(id)?.seq == 4)
    }

    @Test func inspectShowsSizesOnlyEvenWithContent() throws {
        let (hub, id, records) = Self.sample()
        let stream = try #require(hub.stream(id))
        var texts: [String] = []
        for content in [false, true] {
            var line = InspectorLine(file: "x", content: content)
            for r in records {
                line.begin("record")
                line.record(r)
                texts.append(String(decoding: line.w.bytes, as: UTF8.self))
            }
            line.begin("stream")
            line.stream(stream)
            texts.append(String(decoding: line.w.bytes, as: UTF8.self))
        }
        let secrets = [Self.sealed(1).text, Self.sealed(2).text, Self.sealed(4).text, Self.sealed(11, count: 60).text,
                       Self.sealed(21, count: 60).text,
                       E2EKeyID(bytes: Array(0...15)).text, E2EKeyID(bytes: Array(16...31)).text]
        for text in texts {
            for secret in secrets { #expect(!text.contains(secret), "\(text)") }
            #expect(!text.contains("\"lat\"") && !text.contains("\"member\""))
        }
        #expect(texts.contains { $0.contains(#""e2e":{"boxes":2,"box_bytes":120}"#) })
        #expect(texts.contains { $0.contains(#""sealed_bytes":92"#) })
    }
}

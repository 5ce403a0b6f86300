import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Check-in circles in the state formats: journal kinds 20 and 21, snapshot version 4, replay,
/// restore and the inspector.
@Suite struct CircleStateTests {
    static let settings = CheckinSettings(maxCircles: 10, maxMembers: 5, requestsPerMinute: 10, idleLifetimeMs: 100_000, maxHomeMs: 50_000)

    /// A circle with every part: members with and without labels (one revoked), a pending
    /// request, an answer with a note, home safe; and when `subscribed`, subscriptions: the
    /// owner's Web Push and two of member 1's (Web Push and a relay handle).
    static func circle(seed: UInt64 = 3, now: Int64 = 1_700_000_000_000, subscribed: Bool = false) throws -> CheckinCircle {
        let secrets = TestSecrets(seed: seed)
        var hub = CheckinHub(settings: settings)
        var out: [CheckinDelivery] = []
        let created = try hub.create(owner: 1, labels: ["Mum", nil, "道路 🚧"], secrets: secrets, now: now).get()
        let id = created.circle.id, owner = created.ownerToken
        _ = try hub.request(id, memberToken: created.memberTokens[0], secrets: secrets, now: now + 1, out: &out).get()
        _ = try hub.answer(id, ownerToken: owner, note: "home \"soon\"", secrets: secrets, now: now + 2, out: &out).get()
        _ = try hub.request(id, memberToken: created.memberTokens[1], secrets: secrets, now: now + 3, out: &out).get()
        _ = try hub.revoke(id, ownerToken: owner, member: 3, secrets: secrets, now: now + 4, out: &out).get()
        _ = try hub.setHome(id, ownerToken: owner, change: .forSeconds(30), secrets: secrets, now: now + 5, out: &out).get()
        if subscribed {
            let member = CheckinCredential.member(token: created.memberTokens[0])
            for (credential, target) in [(.owner(token: owner), pushTarget(secrets, "https://push.example/owner")),
                                         (member, pushTarget(secrets, "https://push.example/mum")), (member, .relay(handle: "fcm:mum-phone"))]
                as [(CheckinCredential, CheckinSubscription.Target)] {
                _ = try hub.register(id, credential: credential, target: target, secrets: secrets, now: now + 6).get()
            }
        }
        return try #require(hub.circle(id))
    }

    /// A Web Push destination with keys of the right shape (random, not a real point: the hub and
    /// the codecs check lengths and the first byte, the application checks the curve).
    static func pushTarget(_ secrets: TestSecrets, _ endpoint: String) -> CheckinSubscription.Target {
        .webPush(endpoint: endpoint, p256dh: [0x04] + secrets.randomBytes(64), auth: secrets.randomBytes(16))
    }

    @Test func journalRecordsRoundTripWithTheirOwnKinds() throws {
        let c = try Self.circle()
        #expect(c.members.count == 2 && c.requests.count == 1 && c.answer?.answered.count == 1 && c.home != nil && c.nextMember == 4)
        let records: [JournalRecord] = [.circlePut(c), .circleRemove(c.id)]
        var bytes: [UInt8] = []
        for r in records { JournalCodec.append(r, to: &bytes) }
        let scan = JournalCodec.scan(bytes)
        #expect(scan.records == records && scan.stop == nil)
        #expect(JournalCodec.encode(.circlePut(c))[8] == 20 && JournalCodec.encode(.circleRemove(c.id))[8] == 21)
        #expect(JournalRecord.circlePut(c).durability == .critical && JournalRecord.circleRemove(c.id).durability == .standard)
    }

    @Test func anInconsistentCircleIsDamageNotState() throws {
        let c = try Self.circle()
        // Two pending requests from the same member: no hub makes that.
        let twice = CheckinCircle(id: c.id, createdAt: c.createdAt, activeAt: c.activeAt, ownerDigest: c.ownerTokenDigest,
                                  members: c.members, nextMember: c.nextMember, requests: c.requests + c.requests,
                                  answer: c.answer, home: c.home)
        let payload = Array(JournalCodec.encode(.circlePut(twice)).dropFirst(JournalCodec.frameBytes))
        #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: payload) }
        // Every truncation of a good record is refused, never a trap.
        let good = Array(JournalCodec.encode(.circlePut(c)).dropFirst(JournalCodec.frameBytes))
        for cut in 0..<good.count {
            #expect(throws: StateError.self) { try JournalCodec.decodeRecord(payload: Array(good.prefix(cut))) }
        }
    }

    @Test func snapshotsSinceVersion4KeepCirclesAndOlderVersionsHaveNone() throws {
        let circles = [try Self.circle(seed: 3), try Self.circle(seed: 4)].sorted { $0.id < $1.id }
        let snapshot = StateSnapshot(takenAt: 5, journalSegment: 6, pins: [], streams: [], circles: circles)
        let bytes = SnapshotCodec.encode(snapshot)
        #expect(bytes[8] == SnapshotCodec.version)
        let decoded = try SnapshotCodec.decode(bytes)
        #expect(decoded.circles == circles)
        #expect(SnapshotCodec.encode(decoded) == bytes)
        // The writer that builds snapshots in slices makes the same bytes.
        var writer = SnapshotWriter(takenAt: 5, journalSegment: 6)
        for c in circles { writer.append(c) }
        #expect(writer.finish() == bytes)
        // Version 2 bytes (no circle list) still read, with no circles.
        var v2 = SnapshotCodec.encode(StateSnapshot(takenAt: 5, journalSegment: 6, pins: [], streams: []))
        v2.removeLast(20)                     // the empty circle, settlement, ack and kept answer counts, and the checksum
        v2.removeSubrange(36..<45)            // the cluster fields (version 5)
        v2[8] = 2
        v2 += SnapshotCodecTests.le32(CRC32C.checksum(v2))
        #expect(try SnapshotCodec.decode(v2).circles.isEmpty)
    }

    @Test func replayIsIdempotentAndRestoreDropsIdleCircles() throws {
        let c = try Self.circle()
        var image = StateImage()
        image.apply([.circlePut(c), .circlePut(c)])
        #expect(image.appliedCount == 1 && image.duplicateCount == 1 && image.circles[c.id] == c)
        let later = CheckinCircle(id: c.id, createdAt: c.createdAt, activeAt: c.activeAt + 10, ownerDigest: c.ownerTokenDigest,
                                  members: c.members, nextMember: c.nextMember, requests: [], answer: c.answer, home: nil)
        image.apply(.circlePut(later))
        #expect(image.circles[c.id] == later)
        #expect(image.snapshot(takenAt: 1, journalSegment: 1).circles == [later])
        #expect(image.restoreCircles(settings: Self.settings, now: later.activeAt + 99_999).circle(c.id) == later)
        #expect(image.restoreCircles(settings: Self.settings, now: later.activeAt + 100_000).count == 0)
        image.apply([.circleRemove(c.id), .circleRemove(c.id)])
        #expect(image.circles.isEmpty && image.appliedCount == 3 && image.duplicateCount == 2)
    }

    @Test func recoveryBringsCirclesBackFromSnapshotAndJournal() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let first = try Self.circle(seed: 3), second = try Self.circle(seed: 4)
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [], circles: [first])), segment: 1)
        let file = try dir.openSegment(1)
        file.append(.circlePut(second))
        file.append(.circleRemove(first.id))
        try file.close()
        let state = try dir.recover(pinSettings: PinSettings(), panicSettings: PanicSettings(), checkinSettings: Self.settings,
                                    now: second.activeAt + 1)
        #expect(state.checkin.count == 1 && state.checkin.circle(second.id) == second)
        #expect(state.logLines.contains { $0.contains("1 check-in circles") })
    }

    /// The inspector's lines of a state directory holding `c` in a snapshot and a journal record.
    static func inspectorLines(_ c: CheckinCircle, content: Bool) throws -> [String] {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [], circles: [c])), segment: 1)
        let file = try dir.openSegment(1)
        file.append(.circlePut(c))
        try file.close()
        var lines: [String] = []
        try StateInspector.inspect(path: tmp.path, content: content) { lines.append($0) }
        return lines
    }

    @Test func theInspectorShowsLabelsAndNotesOnlyWithContent() throws {
        let c = try Self.circle()
        let plain = try Self.inspectorLines(c, content: false), full = try Self.inspectorLines(c, content: true)
        let plainText = plain.joined(separator: "\n"), fullText = full.joined(separator: "\n")
        #expect(plain.contains { $0.contains("\"type\":\"circle\"") } && plain.contains { $0.contains("\"record\":\"circlePut\"") })
        #expect(plainText.contains("\"circles\":1") && plainText.contains("label_bytes") && plainText.contains("note_bytes"))
        #expect(!plainText.contains("Mum") && !plainText.contains("soon"))
        #expect(fullText.contains("Mum") && fullText.contains("soon"))
        #expect(!fullText.contains(InspectorLine.fullHex(c.ownerTokenDigest)))
    }
}

extension InspectorLine {
    static func fullHex(_ d: TokenDigest) -> String {
        d.bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}

/// Random sequences of circle operations: a snapshot taken part way plus the records journaled
/// after it restore exactly the live hub's circles (the glue journals each change as the circle's
/// whole state, a close or idle removal as its removal).
@Suite struct CircleReplayTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func snapshotPlusJournalRestoresTheLiveCircles(seed: UInt64) throws {
        let secrets = TestSecrets(seed: seed)
        let settings = CheckinSettings(maxCircles: 6, maxMembers: 4, requestsPerMinute: 3, idleLifetimeMs: 60_000, maxHomeMs: 20_000)
        var hub = CheckinHub(settings: settings)
        var owners: [CircleID: String] = [:]
        var members: [CircleID: [String]] = [:]
        var records: [JournalRecord] = []
        var snapshot: StateSnapshot?
        var now: Int64 = 1_000_000
        var out: [CheckinDelivery] = []
        for step in 0..<600 {
            now += Int64(secrets.roll(3_000))
            let ids = owners.keys.sorted()
            let id = ids.isEmpty ? nil : ids[secrets.roll(ids.count)]
            func put(_ changed: CheckinCircle?) { if let changed { records.append(.circlePut(changed)) } }
            switch (secrets.roll(9), id) {
            case (0, _), (_, nil):
                if case .success(let c) = hub.create(owner: 1, labels: [nil, "L\(step)"], secrets: secrets, now: now) {
                    owners[c.circle.id] = c.ownerToken
                    members[c.circle.id] = c.memberTokens
                    put(c.circle)
                }
            case (1, let id?):
                if case .success(let i) = hub.invite(id, ownerToken: owners[id]!, label: nil, secrets: secrets, now: now) {
                    members[id]!.append(i.token)
                    put(i.circle)
                }
            case (2, let id?):
                put(try? hub.revoke(id, ownerToken: owners[id]!, member: UInt32(1 + secrets.roll(5)), secrets: secrets, now: now, out: &out).get())
            case (3, let id?), (4, let id?):
                let tokens = members[id]!
                put(try? hub.request(id, memberToken: tokens[secrets.roll(tokens.count)], secrets: secrets, now: now, out: &out).get().circle)
            case (5, let id?):
                put(try? hub.answer(id, ownerToken: owners[id]!, note: secrets.roll(2) == 0 ? nil : "n", secrets: secrets, now: now, out: &out).get())
            case (6, let id?):
                let change: CheckinHomeChange = secrets.roll(3) == 0 ? .clear : .forSeconds(Int64(1 + secrets.roll(20)))
                put(try? hub.setHome(id, ownerToken: owners[id]!, change: change, secrets: secrets, now: now, out: &out).get())
            case (7, let id?):
                if secrets.roll(4) == 0, (try? hub.close(id, ownerToken: owners[id]!, secrets: secrets, out: &out).get()) != nil {
                    records.append(.circleRemove(id))
                    owners[id] = nil
                }
            default:
                break
            }
            for gone in hub.tick(now: now, out: &out) {
                records.append(.circleRemove(gone))
                owners[gone] = nil
            }
            if step == 300 {
                // A snapshot through the codec; the journal starts again after it.
                snapshot = try SnapshotCodec.decode(SnapshotCodec.encode(StateSnapshot(takenAt: now, journalSegment: 1, map: MapHub(settings: PinSettings()),
                                                                                     panic: PanicHub(settings: PanicSettings()), checkin: hub)))
                records = []
            }
        }
        var image = StateImage(try #require(snapshot))
        image.apply(records)
        #expect(image.issueCount == 0)
        let restored = image.restoreCircles(settings: settings, now: now)
        #expect(restored.exportCircles() == hub.exportCircles())
        // The run went through every kind of change and time: lapses, idle removals, closes.
        func count(_ match: (CheckinDelivery.Kind) -> Bool) -> Int { out.filter { match($0.kind) }.count }
        #expect(count { if case .home(_, lapsed: true) = $0 { return true } else { return false } } > 0)
        #expect(count { $0 == .closed(.idle) } > 0 && count { $0 == .closed(.closed) } > 0)
        #expect(count { if case .requested = $0 { return true } else { return false } } > 10)
        #expect(count { if case .answered = $0 { return true } else { return false } } > 10)
    }
}

import Testing
import VigilGeo
@testable import VigilCore
@testable import VigilState

/// Files written by the code before per-voter votes, abandonment and vote records (commit
/// 7fc8c89, by a program kept out of the tree: three votes by sessions 7, 9 and 12 on one pin, a
/// stream started, moved, set to amber and ended safe; a journal of a pin put twice, a stream
/// started and cancelled, the pin removed). This build reads them as they are: the snapshot and
/// journal formats gained a record kind and an end reason, and changed nothing else, so the
/// version stayed 1 then; the safety timer's stream fields made the snapshot version 2, and this
/// build still reads version 1.
@Suite struct FormatFixtureTests {
    static let snapshot = hex([
        "895647530d0a1a0a01000000108556eea101000003000000000000000100000001000000111122223333444455556666",
        "77778888c3f5285c8f424a408fc2f5285ccf2a40005e56eea1010000005e56eea1010000003bc4eea101000001000000",
        "000000000200000001000000060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324250f000000",
        "466f7820696e20746865207061726b120000004e6561722074686520656173742067617465080000007369676874696e",
        "67030000000700000000000000010900000000000000ff0c00000000000000010b30557a9fc4e90e33587da2c7ec1136",
        "02005e56eea1010000587956eea101000004000000000000009a99999999194840666666666666274002000000000080",
        "5640887156eea1010000010c00000077616c6b696e6720686f6d650101587956eea10100002b2c2d2e2f303132333435",
        "363738393a3b3c3d3e3f404142434445464748494a020000002b2c2d2e2f303132333435363738393a3b3c3d3e3f4041",
        "42434445464748494a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a00e80300000400",
        "00000100000000000000005e56eea101000001cdcccccccc0c4840333333333333274001000000000000204002000000",
        "00000000887156eea1010000019a99999999194840666666666666274002000000000080564003000000000000007075",
        "56eea101000002020400000000000000587956eea10100000301630521d2",
    ])

    static let journal = hex([
        "8956474a0d0a1a0a010000000300000000000000be57b714bd000000ca9f82f601111122223333444455556666777788",
        "88c3f5285c8f424a408fc2f5285ccf2a40005e56eea1010000005e56eea1010000003bc4eea101000001000000000000",
        "000200000001000000060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324250f000000466f78",
        "20696e20746865207061726b120000004e6561722074686520656173742067617465080000007369676874696e670300",
        "00000700000000000000010900000000000000ff0c0000000000000001bd000000ca9f82f60111112222333344445555",
        "666677778888c3f5285c8f424a408fc2f5285ccf2a40005e56eea1010000005e56eea1010000003bc4eea10100000100",
        "0000000000000200000001000000060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324250f00",
        "0000466f7820696e20746865207061726b120000004e6561722074686520656173742067617465080000007369676874",
        "696e67030000000700000000000000010900000000000000ff0c00000000000000017400000081070349030000000000",
        "000001000000000000000202000000000000f03f000000000000004000005e56eea1010000000102030405060708090a",
        "0b0c0d0e0f101112131415161718191a1b1c1d1e1f20010000000102030405060708090a0b0c0d0e0f10111213141516",
        "1718191a1b1c1d1e1f20e8030000230000008155ea6b04000000000000000100000000000000020200000000000000e8",
        "6156eea10100000302110000000586b8990211112222333344445555666677778888",
    ])

    /// A version 4 snapshot as the build before version 5 wrote it (the fuzz seed `circles.vgs`
    /// of commit bf7972a): one check-in circle, no pins or streams, no cluster fields.
    static let snapshotV4 = hex([
        "895647530d0a1a0a040000000068e5cf8b01000005000000000000000000000000000000010000000357eec96e9c319f",
        "1228144c5bf316bb0068e5cf8b0100000568e5cf8b01000013a2316ba22fe9c8490448e84ecfa1541674523355f64f05",
        "f571b4044df7279204000000020000000100000001030000004d756d0068e5cf8b0100006c9c2a38627190c758d59088",
        "744cc2e279df04d3a912498517bb3eb3b45d1a9d02000000000068e5cf8b010000a2c05f1051b63295803e98b2d5ad9a",
        "e97aecd26a6b8e08795d84b6c5ca1372af0100000002000000000368e5cf8b010000010268e5cf8b010000010b000000",
        "686f6d652022736f6f6e22010000000100000001030000004d756d0168e5cf8b010000010568e5cf8b01000035dde5cf",
        "8b01000084be1055",
    ])

    /// A version 5 snapshot as the build before version 6 wrote it (the fuzz seed `timers.vgs` of
    /// commit 60cfe83): two amber streams with safety timers, one escalated at its deadline
    /// (1,700,000,900,000), from before an escalation kept when it was sent.
    static let snapshotV5 = hex([
        "895647530d0a1a0a050000000068e5cf8b01000004000000000000000000000002000000000000000000000000631c64",
        "ec25f77a58ec5964bef9717c9c010068e5cf8b010000a023f3cf8b0100000400000000000000c4478a16ce3b50400847",
        "abecc827344002ecaa2706d1756240e86be5cf8b010000010c00000077616c6b206d6520686f6d65003c7e58017445bd",
        "ab3e44effe0f6f20a5628cb5203e71732899b8fbc4942f78f1010000006ee1e1607b1c39bb62afd39d8b5c9a7f23b806",
        "76d34b44082358d004e416ebfa00080000000400000001000000000000000068e5cf8b0100000118730d7ace2b3e404a",
        "9692c4796d57c00521ed648997224940541b8372296d2b400200000000000000e86be5cf8b01000001c4478a16ce3b50",
        "400847abecc827344002ecaa2706d17562400300000000000000d06fe5cf8b0100000401a023f3cf8b01000004000000",
        "00000000a023f3cf8b01000005a023f3cf8b010000c4478a16ce3b50400847abecc827344002ecaa2706d1756240e86b",
        "e5cf8b0100000001a023f3cf8b010000e709a30886f0ea7e430a3918c16d5249020068e5cf8b010000d06fe5cf8b0100",
        "000300000000000000694f132ca67e46c0ac22620821785e4004601a230332243140e86be5cf8b010000010c00000077",
        "616c6b206d6520686f6d6500b8c06c5cbadc6307a9481e151aed99a3c41bf8123d5189d8f859ede068b9265a01000000",
        "d6f315755b199bdf406fba92ce2d3c768e31610aa2dd11e6ccee0e04db4353f000080000000300000001000000000000",
        "000068e5cf8b01000001d43ee07e395654c0973e0cdfb1e152c0023a8ab94e8c745a400200000000000000e86be5cf8b",
        "01000001694f132ca67e46c0ac22620821785e4004601a2303322431400300000000000000d06fe5cf8b0100000401a0",
        "23f3cf8b01000001a023f3cf8b010000000000000089b13bff",
    ])

    /// A version 6 snapshot as the build before version 7 wrote it (the fuzz seed `timers.vgs` of
    /// commit f0779b7): the same two amber streams with safety timers, the escalated one with its
    /// sent_at, from before a stream kept the check-in circle it was started for.
    static let snapshotV6 = hex([
        "895647530d0a1a0a060000000068e5cf8b01000004000000000000000000000002000000000000000000000000631c64",
        "ec25f77a58ec5964bef9717c9c010068e5cf8b010000a023f3cf8b0100000400000000000000c4478a16ce3b50400847",
        "abecc827344002ecaa2706d1756240e86be5cf8b010000010c00000077616c6b206d6520686f6d65003c7e58017445bd",
        "ab3e44effe0f6f20a5628cb5203e71732899b8fbc4942f78f1010000006ee1e1607b1c39bb62afd39d8b5c9a7f23b806",
        "76d34b44082358d004e416ebfa00080000000400000001000000000000000068e5cf8b0100000118730d7ace2b3e404a",
        "9692c4796d57c00521ed648997224940541b8372296d2b400200000000000000e86be5cf8b01000001c4478a16ce3b50",
        "400847abecc827344002ecaa2706d17562400300000000000000d06fe5cf8b0100000401a023f3cf8b01000004000000",
        "00000000a023f3cf8b01000006a023f3cf8b010000c4478a16ce3b50400847abecc827344002ecaa2706d1756240e86b",
        "e5cf8b010000c823f3cf8b0100000001a023f3cf8b01000001c823f3cf8b010000e709a30886f0ea7e430a3918c16d52",
        "49020068e5cf8b010000d06fe5cf8b0100000300000000000000694f132ca67e46c0ac22620821785e4004601a230332",
        "243140e86be5cf8b010000010c00000077616c6b206d6520686f6d6500b8c06c5cbadc6307a9481e151aed99a3c41bf8",
        "123d5189d8f859ede068b9265a01000000d6f315755b199bdf406fba92ce2d3c768e31610aa2dd11e6ccee0e04db4353",
        "f000080000000300000001000000000000000068e5cf8b01000001d43ee07e395654c0973e0cdfb1e152c0023a8ab94e",
        "8c745a400200000000000000e86be5cf8b01000001694f132ca67e46c0ac22620821785e4004601a2303322431400300",
        "000000000000d06fe5cf8b0100000401a023f3cf8b01000001a023f3cf8b0100000000000000003fda6e4c",
    ])

    /// The journal payloads of that escalated stream as the same build wrote them (the fuzz seeds
    /// `record-12.bin` to `record-15.bin`): its start with a timer (record kind 9), a location, the
    /// timer moved, and the escalation as event kind 5, which has no sent_at.
    static let escalationRecordsV5: [[UInt8]] = [
        hex([
            "09631c64ec25f77a58ec5964bef9717c9c0218730d7ace2b3e404a9692c4796d57c00521ed648997224940541b837229",
            "6d2b400068e5cf8b010000010c00000077616c6b206d6520686f6d653c7e58017445bdab3e44effe0f6f20a5628cb520",
            "3e71732899b8fbc4942f78f1010000006ee1e1607b1c39bb62afd39d8b5c9a7f23b80676d34b44082358d004e416ebfa",
            "08000000c08feecf8b010000",
        ]),
        hex([
            "04631c64ec25f77a58ec5964bef9717c9c0200000000000000e86be5cf8b01000001c4478a16ce3b50400847abecc827",
            "344002ecaa2706d1756240",
        ]),
        hex([
            "04631c64ec25f77a58ec5964bef9717c9c0300000000000000d06fe5cf8b0100000401a023f3cf8b010000",
        ]),
        hex([
            "04631c64ec25f77a58ec5964bef9717c9c0400000000000000a023f3cf8b01000005a023f3cf8b010000c4478a16ce3b",
            "50400847abecc827344002ecaa2706d1756240e86be5cf8b010000",
        ]),
    ]

    /// A version 6 snapshot as the build before version 7 wrote it (the fuzz seed `circles.vgs` of
    /// commit f0779b7): one check-in circle, from before circles kept subscriptions.
    static let snapshotV6Circle = hex([
        "895647530d0a1a0a060000000068e5cf8b01000005000000000000000000000000000000000000000000000000010000",
        "000357eec96e9c319f1228144c5bf316bb0068e5cf8b0100000568e5cf8b01000013a2316ba22fe9c8490448e84ecfa1",
        "541674523355f64f05f571b4044df7279204000000020000000100000001030000004d756d0068e5cf8b0100006c9c2a",
        "38627190c758d59088744cc2e279df04d3a912498517bb3eb3b45d1a9d02000000000068e5cf8b010000a2c05f1051b6",
        "3295803e98b2d5ad9ae97aecd26a6b8e08795d84b6c5ca1372af0100000002000000000368e5cf8b010000010268e5cf",
        "8b010000010b000000686f6d652022736f6f6e22010000000100000001030000004d756d0168e5cf8b010000010568e5",
        "cf8b01000035dde5cf8b010000c5912c95",
    ])

    static func hex(_ lines: [String]) -> [UInt8] {
        let text = Array(lines.joined().utf8)
        func nibble(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10 }
        return stride(from: 0, to: text.count, by: 2).map { nibble(text[$0]) << 4 | nibble(text[$0 + 1]) }
    }

    static let pinID = PinID(high: 0x1111_2222_3333_4444, low: 0x5555_6666_7777_8888)

    /// A version 7 snapshot (`FuzzSeedTests`' "subscriptions.vgs" as version 7 wrote it: a circle
    /// with subscriptions, settlements and acknowledgements), from before kept answers (version 8).
    static let snapshotV7 = hex([
        "895647530d0a1a0a070000000068e5cf8b01000005000000000000000000000000000000000000000000000000010000",
        "000357eec96e9c319f1228144c5bf316bb0068e5cf8b0100000668e5cf8b01000013a2316ba22fe9c8490448e84ecfa1",
        "541674523355f64f05f571b4044df7279204000000020000000100000001030000004d756d0068e5cf8b0100006c9c2a",
        "38627190c758d59088744cc2e279df04d3a912498517bb3eb3b45d1a9d02000000000068e5cf8b010000a2c05f1051b6",
        "3295803e98b2d5ad9ae97aecd26a6b8e08795d84b6c5ca1372af0100000002000000000368e5cf8b010000010268e5cf",
        "8b010000010b000000686f6d652022736f6f6e22010000000100000001030000004d756d0168e5cf8b010000010568e5",
        "cf8b01000035dde5cf8b010000030000003e8623d5f60dfbb33b66cac5c24edf91000000000668e5cf8b010000011a00",
        "000068747470733a2f2f707573682e6578616d706c652f6f776e6572046d6013caf4189ea1e0978a3556a3104addc5cc",
        "1b7d6f4c81d7989e588286265b5436cd528ae5c8a7b33affe709a30886f0ea7e430a3918c16d52490a14a4771063e92d",
        "6694042ec5cc631c64ec25f77a77ccd61190a65c7a030115ed93ee2d66010000000668e5cf8b01000001180000006874",
        "7470733a2f2f707573682e6578616d706c652f6d756d0458ec5964bef9717c9c9dfc8d511a569b9ca91c27a01f4bf0b8",
        "7563d8e4b5e2162a2d8ac9fa28eabb76c9c8e6add022c8d8ddc96467cf1d45a74f6d97e8824cded7ca575fe185482de6",
        "f28e35e9cedbf9f45cabc24ffa24957974be0fce7ff359010000000668e5cf8b010000020d00000066636d3a6d756d2d",
        "70686f6e65020000000357eec96e9c319f1228144c5bf316bb0357eec96e9c319f1228144c5bf316bb010000018bcfe5",
        "680000000000003e8623d5f60dfbb33b66cac5c24edf91010357eec96e9c319f1228144c5bf316bb0357eec96e9c319f",
        "1228144c5bf316bb040000018bcfe56801000000010077ccd61190a65c7a030115ed93ee2d6602020000000357eec96e",
        "9c319f1228144c5bf316bb0357eec96e9c319f1228144c5bf316bb010000018bcfe56800000000000001000000f469e5",
        "cf8b0100000357eec96e9c319f1228144c5bf316bb0357eec96e9c319f1228144c5bf316bb040000018bcfe568010000",
        "00010000000000586ae5cf8b010000a468afd4",
    ])

    @Test func aVersion7SnapshotReadsWithNoKeptAnswers() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshotV7)
        #expect(snapshot.keptAnswers.isEmpty)
        #expect(snapshot.circles.count == 1 && !snapshot.circles[0].subscriptions.isEmpty)
        #expect(snapshot.settlements.count == 2 && snapshot.acks.count == 2)
        // Written again, it is version 8 with an empty list of kept answers, and reads the same.
        let again = try SnapshotCodec.decode(SnapshotCodec.encode(snapshot))
        #expect(again.circles == snapshot.circles && again.settlements == snapshot.settlements && again.acks == snapshot.acks)
    }

    @Test func anOldSnapshotReadsAndReencodesToTheSameBytes() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshot)
        #expect(snapshot.takenAt == 1_795_000_010_000 && snapshot.journalSegment == 3)
        let pin = try #require(snapshot.pins.first)
        #expect(snapshot.pins.count == 1 && pin.id == Self.pinID && pin.title == "Fox in the park" && pin.category == "sighting")
        #expect(pin.point == GeoPoint(lat: 52.52, lon: 13.405) && pin.createdAt == 1_795_000_000_000 && pin.expiresAt == 1_795_007_200_000)
        #expect(pin.votes == [7: 1, 9: -1, 12: 1] && pin.up == 2 && pin.down == 1 && pin.sequence == 1)
        let stream = try #require(snapshot.streams.first)
        #expect(snapshot.streams.count == 1 && stream.status == .amber && stream.seq == 4 && stream.note == "walking home")
        #expect(stream.ended == PanicEnd(reason: .safe, at: 1_795_000_007_000))
        #expect(stream.history.all.map(\.seq) == [1, 2, 3, 4] && stream.watchTokenDigests.count == 2)
        // Version 1 has no timer fields: its streams read as without a timer, and are written
        // back as version 7 (the same bytes but for the version, two absent timer fields, the
        // pin's absent range (4 bytes, since version 3), the count of an empty circle list
        // (4 bytes, since version 4), the cluster fields (9 bytes, since version 5), the
        // absent escalation's sent_at (1 byte, since version 6), the absent circle (1 byte,
        // since version 7) and the empty settlement and acknowledgement lists' counts (4 bytes
        // each, since version 7), the kept answers' count (4 bytes, since version 8), the last
        // position's kind and the absent e2e part (1 byte each, since version 9)).
        #expect(stream.dueAt == nil && stream.missedCheckInAt == nil && pin.rangeMeters == nil && snapshot.circles.isEmpty)
        #expect(snapshot.replicatedSequence == nil && stream.circle == nil)
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 9 && again.count == Self.snapshot.count + 2 + 4 + 4 + 9 + 1 + 1 + 4 + 4 + 4 + 1 + 1)
        expectSameStreams(try SnapshotCodec.decode(again).streams, snapshot.streams)

        // Votes kept by session number are votes by voter number now; new voters number on above them.
        var image = StateImage(snapshot)
        #expect(image.highestVoteSession == 12)
        image.apply(.pinVote(Self.pinID, voter: 9, value: 1))
        #expect(image.pins[Self.pinID]?.up == 3 && image.pins[Self.pinID]?.down == 0)
    }

    /// Version 4 reads as a standalone node's snapshot (no cluster sequence), and is written back
    /// as version 7: the same bytes but for the version, the 9 bytes of the cluster fields and
    /// the circle's empty subscription list, the empty settlement and acknowledgement lists (4
    /// bytes each, since version 7).
    @Test func aVersion4SnapshotReadsAsStandalone() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshotV4)
        #expect(Self.snapshotV4[8] == 4 && snapshot.replicatedSequence == nil)
        #expect(snapshot.takenAt == 1_700_000_000_000 && snapshot.journalSegment == 5 && snapshot.pins.isEmpty && snapshot.streams.isEmpty)
        let circle = try #require(snapshot.circles.first)
        #expect(snapshot.circles.count == 1 && circle.members.count == 2 && circle.home != nil)
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 9 && again.count == Self.snapshotV4.count + 9 + 4 + 4 + 4 + 4)   // no stream: nothing of version 9
        #expect(Array(again[45..<(again.count - 20)]) == Array(Self.snapshotV4[36..<(Self.snapshotV4.count - 4)]))
        #expect(Array(again[(again.count - 20)..<(again.count - 4)]) == [UInt8](repeating: 0, count: 16))
    }

    /// An escalation from before sent_at was kept reads as sent at its time (the deadline), in
    /// the stream and in its history, and is written back as version 7: one byte more per
    /// stream (sent_at absent or present), 8 more for the escalated stream's sent_at, 8 more
    /// for its event, now kind 6 with the sent_at, and one more per stream for its (absent) circle.
    @Test func aVersion5SnapshotsEscalationReadsAsSentAtItsTime() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshotV5)
        #expect(Self.snapshotV5[8] == 5 && snapshot.streams.count == 2)
        let escalated = try #require(snapshot.streams.first { $0.missedCheckInAt != nil })
        #expect(escalated.missedCheckInAt == 1_700_000_900_000 && escalated.missedCheckInSentAt == 1_700_000_900_000)
        let event = try #require(escalated.latestEvent)
        guard case .missedCheckIn(let due, _, let sentAt) = event.kind else {
            Issue.record("the escalated stream's newest event is \(event)")
            return
        }
        #expect(due == 1_700_000_900_000 && event.at == due && sentAt == event.at)
        #expect(snapshot.streams.allSatisfy { $0.missedCheckInAt != nil || $0.missedCheckInSentAt == nil })
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 9 && again.count == Self.snapshotV5.count + 2 + 8 + 8 + 2 + 4 + 4 + 4 + 2 * snapshot.streams.count)  // v9: position kind, e2e flag
        expectSameStreams(try SnapshotCodec.decode(again).streams, snapshot.streams)
    }

    /// The same escalation as the old build journaled it: event kind 5, replayed as sent at its
    /// time, with no issue; written again it is kind 6, 8 bytes longer for its sent_at.
    @Test func aVersion5JournalsEscalationReadsAsSentAtItsTime() throws {
        let records = try Self.escalationRecordsV5.map { try JournalCodec.decodeRecord(payload: $0) }
        guard records.count == 4, case .panicStart = records[0], case .panicEvent(let id, let event) = records[3],
              case .missedCheckIn(let due, _, let sentAt) = event.kind else {
            Issue.record("records: \(records)")
            return
        }
        #expect(event.seq == 4 && event.at == 1_700_000_900_000 && due == event.at && sentAt == event.at)
        var image = StateImage()
        image.apply(records)
        let stream = try #require(image.streams[id])
        #expect(stream.status == .red && stream.missedCheckInAt == event.at && stream.missedCheckInSentAt == event.at)
        #expect(image.issueCount == 0)
        let rewritten = JournalCodec.encode(records[3])
        #expect(rewritten.count == JournalCodec.frameBytes + Self.escalationRecordsV5[3].count + 8)
        #expect(try JournalCodec.decodeRecord(payload: Array(rewritten[JournalCodec.frameBytes...])) == records[3])
    }

    /// Streams from before circles had streams read as started for no circle, and are written
    /// back as version 7: one byte more per stream (the circle absent). The state digest of what
    /// was read does not depend on the version it was read from.
    @Test func aVersion6SnapshotsStreamsHaveNoCircle() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshotV6)
        #expect(Self.snapshotV6[8] == 6 && snapshot.streams.count == 2)
        #expect(snapshot.streams.allSatisfy { $0.circle == nil })
        #expect(snapshot.streams.contains { $0.missedCheckInSentAt == 1_700_000_900_040 })
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 9 && again.count == Self.snapshotV6.count + 2 + 4 + 4 + 4 + 2 + 2)   // v9: position kind, e2e flag per stream
        let reread = try SnapshotCodec.decode(again)
        expectSameStreams(reread.streams, snapshot.streams)
        let rules = StateDigest.Rules(now: snapshot.takenAt, endedGraceMs: 3_600_000, circleIdleLifetimeMs: 2_592_000_000)
        #expect(StateDigest.of(snapshot: reread, rules: rules) == StateDigest.of(snapshot: snapshot, rules: rules))
    }

    @Test func anOldJournalReadsRecordForRecord() throws {
        #expect(try JournalCodec.readHeader(Self.journal) == 3)
        let scan = JournalCodec.scan(Self.journal, from: JournalCodec.headerBytes)
        #expect(scan.stop == nil && scan.validLength == Self.journal.count)
        guard scan.records.count == 5, case .pinPut(let pin) = scan.records[0], case .pinPut(let again) = scan.records[1],
              case .panicStart(let start) = scan.records[2], case .panicEvent(let id, let end) = scan.records[3] else {
            Issue.record("records: \(scan.records)")
            return
        }
        #expect(pin.id == Self.pinID && pin.votes == [7: 1, 9: -1, 12: 1] && again == pin)
        #expect(start.id == StreamID(high: 1, low: 2) && start.status == .amber && start.note == nil && start.historyCapacity == 1000)
        #expect(id == start.id && end == PanicEvent(seq: 2, at: 1_795_000_001_000, kind: .ended(.cancelled)))
        #expect(scan.records[4] == .pinRemove(Self.pinID))
        var image = StateImage()
        image.apply(scan.records)
        #expect(image.pins.isEmpty && image.streams[start.id]?.ended?.reason == .cancelled && image.issueCount == 0)
    }
}

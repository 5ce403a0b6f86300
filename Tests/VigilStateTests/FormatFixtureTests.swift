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

    static func hex(_ lines: [String]) -> [UInt8] {
        let text = Array(lines.joined().utf8)
        func nibble(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10 }
        return stride(from: 0, to: text.count, by: 2).map { nibble(text[$0]) << 4 | nibble(text[$0 + 1]) }
    }

    static let pinID = PinID(high: 0x1111_2222_3333_4444, low: 0x5555_6666_7777_8888)

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
        // back as version 5 (the same bytes but for the version, two absent timer fields, the
        // pin's absent range (4 bytes, since version 3), the count of an empty circle list
        // (4 bytes, since version 4) and the cluster fields (9 bytes, since version 5)).
        #expect(stream.dueAt == nil && stream.missedCheckInAt == nil && pin.rangeMeters == nil && snapshot.circles.isEmpty)
        #expect(snapshot.clusterSequence == nil)
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 5 && again.count == Self.snapshot.count + 2 + 4 + 4 + 9)
        expectSameStreams(try SnapshotCodec.decode(again).streams, snapshot.streams)

        // Votes kept by session number are votes by voter number now; new voters number on above them.
        var image = StateImage(snapshot)
        #expect(image.highestVoteSession == 12)
        image.apply(.pinVote(Self.pinID, voter: 9, value: 1))
        #expect(image.pins[Self.pinID]?.up == 3 && image.pins[Self.pinID]?.down == 0)
    }

    /// Version 4 reads as a standalone node's snapshot (no cluster sequence), and is written back
    /// as version 5: the same bytes but for the version and the 9 bytes of the cluster fields.
    @Test func aVersion4SnapshotReadsAsStandalone() throws {
        let snapshot = try SnapshotCodec.decode(Self.snapshotV4)
        #expect(Self.snapshotV4[8] == 4 && snapshot.clusterSequence == nil)
        #expect(snapshot.takenAt == 1_700_000_000_000 && snapshot.journalSegment == 5 && snapshot.pins.isEmpty && snapshot.streams.isEmpty)
        let circle = try #require(snapshot.circles.first)
        #expect(snapshot.circles.count == 1 && circle.members.count == 2 && circle.home != nil)
        let again = SnapshotCodec.encode(snapshot)
        #expect(again[8] == 5 && again.count == Self.snapshotV4.count + 9)
        #expect(Array(again[45..<(again.count - 4)]) == Array(Self.snapshotV4[36..<(Self.snapshotV4.count - 4)]))
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

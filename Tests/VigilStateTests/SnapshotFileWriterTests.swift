import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The periodic snapshot written straight to its file in chunks (issue 28: its peak RSS) must be
/// the very bytes `SnapshotCodec.encode` gives for the same state, and the cleanup's chunked
/// reads must agree with the whole-file ones.
@Suite struct SnapshotFileWriterTests {
    /// Enough pins for several 1 MiB chunks, plus the sample's streams.
    static func large() -> StateSnapshot {
        let s = TestSecrets(seed: 5)
        let pins = (1...20_000).map { Fixtures.pin(s, sequence: UInt64($0), votes: $0 % 10 == 0 ? 3 : 0) }
        var snapshot = SnapshotCodecTests.sample()
        snapshot.pins = pins
        return snapshot
    }

    @Test func crcCombineIsTheChecksumOfTheJoinedBytes() {
        let s = TestSecrets(seed: 3)
        for (a, b) in [(0, 0), (1, 0), (0, 5), (45, 1), (45, 300_017), (7, 1 << 18)] {
            let x = s.randomBytes(a), y = s.randomBytes(b)
            #expect(CRC32C.combine(CRC32C.checksum(x), CRC32C.checksum(y), lengthB: y.count) == CRC32C.checksum(x + y))
        }
    }

    @Test(arguments: [nil, UInt64(77)])
    func writesTheBytesOfEncode(replicatedSequence: UInt64?) throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        var snapshot = Self.large()
        snapshot.replicatedSequence = replicatedSequence
        let file = try SnapshotFileWriter(directory: dir, segment: snapshot.journalSegment, takenAt: snapshot.takenAt,
                                          replicatedSequence: replicatedSequence)
        for pin in snapshot.pins { file.append(pin) }
        file.appendRest(streams: snapshot.streams)
        let count = try file.finish()
        let expected = SnapshotCodec.encode(snapshot)
        #expect(expected.count > 3 * SnapshotFileWriter.chunkBytes)
        let written = try dir.readSnapshot(segment: snapshot.journalSegment)
        #expect(count == expected.count)
        #expect(written == expected)
        #expect(try dir.listing().temps.isEmpty)
    }

    /// Streams written one by one (as the loop's slices do) and scanned back a window at a time,
    /// with a stream section of several windows and one stream larger than a window.
    @Test func streamsAppendedOneByOneAndScannedBackInWindows() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let s = TestSecrets(seed: 11)
        var snapshot = SnapshotCodecTests.sample()
        snapshot.streams = ((0..<40).map { _ in Fixtures.stream(s, events: 1_000, capacity: 1_000) }
            + [Fixtures.stream(s, events: 40_000, capacity: 40_000)]).sorted { $0.id < $1.id }
        let file = try SnapshotFileWriter(directory: dir, segment: snapshot.journalSegment, takenAt: snapshot.takenAt)
        for pin in snapshot.pins { file.append(pin) }
        for stream in snapshot.streams { file.append(stream) }
        file.appendRest()
        _ = try file.finish()
        let expected = SnapshotCodec.encode(snapshot)
        #expect(expected.count > 2 * SnapshotFileWriter.chunkBytes)
        #expect(try dir.readSnapshot(segment: snapshot.journalSegment) == expected)
        #expect(SnapshotFileScan.streamIDs(tmp.file("snapshot-000000000000002a.vgs")) == snapshot.streams.map(\.id))
    }

    @Test func anAbandonedSnapshotLeavesNoFile() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let file = try SnapshotFileWriter(directory: dir, segment: 9, takenAt: 1)
        for pin in SnapshotCodecTests.sample().pins { file.append(pin) }
        file.abandon()
        #expect(try dir.listing().temps.isEmpty && dir.listing().snapshots.isEmpty)
    }

    @Test func chunkedVerifyAndStreamScanAgreeWithTheWholeFile() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let snapshot = Self.large()
        let bytes = SnapshotCodec.encode(snapshot)
        try dir.writeSnapshot(bytes, segment: 42)
        let path = tmp.file("snapshot-000000000000002a.vgs")
        #expect(SnapshotFileScan.verifies(path))
        #expect(SnapshotFileScan.streamIDs(path) == snapshot.streams.map(\.id))
        for offset in [0, 9, 30, 5_000, bytes.count - 1] {
            var damaged = bytes
            damaged[offset] ^= 0x10
            tmp.write("snapshot-000000000000002a.vgs", damaged)
            #expect(SnapshotFileScan.verifies(path) == SnapshotCodec.verify(damaged))
            #expect(SnapshotFileScan.streamIDs(path) == nil)
        }
        tmp.write("snapshot-000000000000002a.vgs", Array(bytes.prefix(20)))
        #expect(!SnapshotFileScan.verifies(path) && SnapshotFileScan.streamIDs(path) == nil)
    }
}

import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Snapshot version 5: the last replicated-stream sequence a snapshot includes (nil for a
/// standalone node), in the header, through the codec, the writer, recovery and the inspector.
@Suite struct SnapshotReplicatedSequenceTests {
    static func snapshot(_ sequence: UInt64?) -> StateSnapshot {
        var s = SnapshotCodecTests.sample(seed: 7)
        s.replicatedSequence = sequence
        return s
    }

    static func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    @Test(arguments: [nil, 0, 1, 4_242, UInt64.max] as [UInt64?])
    func theSequenceRoundTrips(sequence: UInt64?) throws {
        let bytes = SnapshotCodec.encode(Self.snapshot(sequence))
        #expect(UInt16(bytes[8]) == SnapshotCodec.version && bytes[36] == (sequence == nil ? 0 : 1))
        #expect(Array(bytes[37..<45]) == Self.le64(sequence ?? 0))
        let decoded = try SnapshotCodec.decode(bytes)
        #expect(decoded.replicatedSequence == sequence)
        #expect(SnapshotCodec.encode(decoded) == bytes)
        // The writer that builds snapshots in slices writes the same header.
        let sample = Self.snapshot(sequence)
        var writer = SnapshotWriter(takenAt: sample.takenAt, journalSegment: sample.journalSegment, replicatedSequence: sequence)
        for pin in sample.pins { writer.append(pin) }
        for stream in sample.streams { writer.append(stream) }
        #expect(writer.finish() == bytes)
    }

    /// One form per value: an unknown flag, or a standalone snapshot with a sequence, is damage.
    @Test func malformedClusterFieldsAreRefused() throws {
        func patched(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
            var bytes = SnapshotCodec.encode(Self.snapshot(nil))
            bytes.removeLast(4)
            change(&bytes)
            return bytes + SnapshotCodecTests.le32(CRC32C.checksum(bytes))
        }
        #expect(throws: StateError.invalid(what: "snapshot header", offset: 36, reason: "unknown cluster flag 2")) {
            try SnapshotCodec.decode(patched { $0[36] = 2 })
        }
        #expect(throws: StateError.invalid(what: "snapshot header", offset: 37, reason: "a standalone snapshot has cluster sequence 7")) {
            try SnapshotCodec.decode(patched { $0[37] = 7 })
        }
        // A version 5 file cut inside its cluster fields is cut short, not read as version 4.
        let cut = Array(SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 1, pins: [], streams: [])).prefix(40))
        #expect(throws: StateError.self) { try SnapshotCodec.decode(cut, verifyingChecksum: false) }
    }

    /// Recovery hands the restored snapshot's sequence to the caller, and the inspector prints it.
    @Test func recoveryAndTheInspectorSeeTheSequence() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 3, pins: [], streams: [], replicatedSequence: 99)),
                              segment: 3)
        let recovered = try dir.recover(pinSettings: PinSettings(), panicSettings: PanicSettings(), now: 2)
        #expect(recovered.replicatedSequence == 99 && recovered.snapshotFile == "snapshot-0000000000000003.vgs")
        var lines: [String] = []
        try StateInspector.inspect(path: tmp.path) { lines.append($0) }
        #expect(lines.first?.contains(#""cluster_sequence":99"#) == true, "\(lines)")

        let standalone = TemporaryDirectory()
        let other = try StateDirectory(path: standalone.path)
        try other.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 1, journalSegment: 3, pins: [], streams: [])), segment: 3)
        #expect(try other.recover(pinSettings: PinSettings(), panicSettings: PanicSettings(), now: 2).replicatedSequence == nil)
        lines = []
        try StateInspector.inspect(path: standalone.path) { lines.append($0) }
        #expect(lines.first?.contains(#""cluster_sequence":null"#) == true, "\(lines)")
    }
}

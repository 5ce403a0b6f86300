import Glibc
import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Data that leaves when it should: after a snapshot, no file kept as a fallback holds a stream
/// that is no longer held, and the fallback still restores.
@Suite struct StateScrubTests {
    static let trail = [PanicLocation(lat: 12.3456789012345, lon: -98.7654321098765),
                        PanicLocation(lat: 12.3456799012345, lon: -98.7654331098765, accuracyM: 7.25)]
    static let note = "a note that must leave the disk"

    /// The bytes as the codecs store them: coordinates as little-endian doubles, the note as UTF-8,
    /// the id as its 16 bytes.
    static func needles(_ id: StreamID) -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = [("note", Array(note.utf8))]
        for (i, location) in trail.enumerated() {
            out.append(("lat \(i)", withUnsafeBytes(of: location.lat.bitPattern.littleEndian, Array.init)))
            out.append(("lon \(i)", withUnsafeBytes(of: location.lon.bitPattern.littleEndian, Array.init)))
        }
        var w = StateWriter()
        w.streamID(id)
        out.append(("id", w.bytes))
        return out
    }

    static func holders(_ tmp: TemporaryDirectory, of id: StreamID, in names: [String]) -> [String] {
        names.flatMap { name in
            let bytes = tmp.read(name)
            return needles(id).filter { bytes.contains($0.1) }.map { "\(name): \($0.0)" }
        }
    }

    @Test func aRemovedStreamLeavesTheFallbackSnapshotAndItsJournal() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let secrets = TestSecrets(seed: 77)
        // Stream `gone` has a trail and a note; `kept` is still held, and so is a pin.
        let gone = PanicStartRecord(id: StreamID(random: secrets.randomBytes(16)), status: .red, location: Self.trail[0],
                                        note: Self.note, startedAt: 1_000, ownerDigest: secrets.digest(ofToken: "o"),
                                        watchTokens: [secrets.digest(ofToken: "w")], historyCapacity: 8)
        var kept = Fixtures.stream(secrets, events: 3, capacity: 8, start: 900)
        let pin = Fixtures.pin(secrets, sequence: 1)
        // Fallback snapshot 1 holds both streams; segment 1 moves and ends `gone`, and moves `kept`.
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 1_000, journalSegment: 1, pins: [pin],
                                                                 streams: [try gone.stream(), kept])), segment: 1)
        var goneStream = try gone.stream()
        let moved = goneStream.record(.location(Self.trail[1]), now: 1_100)
        let ended = goneStream.record(.ended(.safe), now: 1_200)
        let keptEvent = kept.record(.location(Fixtures.location(secrets)), now: 1_300)
        var segment1 = JournalCodec.header(segment: 1)
        let records: [JournalRecord] = [.panicEvent(gone.id, moved), .pinPut(pin), .panicInvite(gone.id, secrets.digest(ofToken: "x")),
                                        .panicEvent(kept.id, keptEvent), .panicEvent(gone.id, ended)]
        for record in records { JournalCodec.append(record, to: &segment1) }
        tmp.write("journal-0000000000000001.vgj", segment1)
        // Its grace over, `gone` is removed (segment 2), and snapshot 2 holds `kept` alone.
        var segment2 = JournalCodec.header(segment: 2)
        JournalCodec.append(.panicRemove(gone.id), to: &segment2)
        tmp.write("journal-0000000000000002.vgj", segment2)
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 2_000, journalSegment: 2, pins: [pin], streams: [kept])), segment: 2)
        tmp.write("journal-0000000000000001.vgj.tmp", segment1)        // a rewrite a crash cut short
        let older = ["snapshot-0000000000000001.vgs", "journal-0000000000000001.vgj"]
        let held = Set(Self.holders(tmp, of: gone.id, in: older).map { $0.split(separator: ":")[1] })
        #expect(held.count == Self.needles(gone.id).count, "the setup holds the whole trail")

        let touched = try dir.removeObsolete(before: 2, liveStreams: [kept.id])
        #expect(touched.sorted() == ["journal-0000000000000001.vgj", "journal-0000000000000001.vgj.tmp", "snapshot-0000000000000001.vgs"])
        #expect(tmp.names() == ["journal-0000000000000001.vgj", "journal-0000000000000002.vgj", "snapshot-0000000000000001.vgs",
                                "snapshot-0000000000000002.vgs"])
        // Nothing older than the newest snapshot mentions `gone` (segment 2's removal record names
        // its id only, and goes with the next snapshot).
        #expect(Self.holders(tmp, of: gone.id, in: older) == [])
        #expect(Self.holders(tmp, of: gone.id, in: tmp.names()) == ["journal-0000000000000002.vgj: id"])
        // The rewritten fallback is whole: it verifies, and keeps everything else in order.
        let fallback = try SnapshotCodec.decode(tmp.read("snapshot-0000000000000001.vgs"))
        #expect(fallback.streams.map(\.id) == [kept.id] && fallback.pins.count == 1 && fallback.takenAt == 1_000)
        let scan = JournalCodec.scan(tmp.read("journal-0000000000000001.vgj"), from: JournalCodec.headerBytes)
        #expect(scan.stop == nil && scan.records == [.pinPut(pin), .panicEvent(kept.id, keptEvent)])
        #expect(fileMode(tmp.file("snapshot-0000000000000001.vgs")) == 0o600 && fileMode(tmp.file("journal-0000000000000001.vgj")) == 0o600)
        // Restoring from the fallback alone (the newest snapshot lost) gives `kept` and the pin.
        unlink(tmp.file("snapshot-0000000000000002.vgs"))
        let state = try dir.recover(pinSettings: StateReplayTests.pinSettings, panicSettings: StateReplayTests.panicSettings, now: 2_000)
        #expect(state.snapshotFile == "snapshot-0000000000000001.vgs" && state.journal.corruption == nil)
        #expect(state.panic.exportStreams().map(\.id) == [kept.id] && state.map.store.count == 1)
        // A second pass has nothing left to do.
        #expect(try dir.scrub(before: 2, liveStreams: [kept.id]).isEmpty)
    }

    @Test func aDamagedSegmentKeepsItsTailAndAnUnreadableSnapshotGoes() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let secrets = TestSecrets(seed: 78)
        let gone = Fixtures.stream(secrets, events: 1, capacity: 4)
        var segment = JournalCodec.header(segment: 4)
        JournalCodec.append(.panicStart(PanicStartRecord(gone)), to: &segment)
        let tail: [UInt8] = [0x40, 0, 0, 0, 9, 9, 9, 9, 1, 2, 3]
        tmp.write("journal-0000000000000004.vgj", segment + tail)
        tmp.write("snapshot-0000000000000003.vgs", [0x89, 0x56, 0x47, 0x53, 0, 0])
        let touched = try dir.scrub(before: 5, liveStreams: [])
        #expect(touched.sorted() == ["journal-0000000000000004.vgj", "snapshot-0000000000000003.vgs"])
        #expect(tmp.read("journal-0000000000000004.vgj") == JournalCodec.header(segment: 4) + tail)
        #expect(!tmp.names().contains("snapshot-0000000000000003.vgs"))
    }
}

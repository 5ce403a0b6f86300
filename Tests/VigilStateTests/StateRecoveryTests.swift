import Glibc
import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// The startup sequence end to end, on real files: recover, open the next segment, snapshot,
/// clean up, crash, recover again.
@Suite struct StateRecoveryTests {
    let pins = StateReplayTests.pinSettings
    let panic = StateReplayTests.panicSettings

    @Test func anEmptyDirectoryRecoversToNothing() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let state = try dir.recover(pinSettings: pins, panicSettings: panic, now: 0)
        #expect(state.map.store.count == 0 && state.panic.count == 0)
        #expect(state.nextSegment == 0 && state.snapshotFile == nil && state.journal.corruption == nil)
        #expect(state.logLines.first == "no snapshot: starting from the journal alone")
    }

    /// Issue 27: a cluster node replays no journal; its lines say what it restores and that the
    /// stream brings it up to date, and a standalone node's journal is refused.
    @Test func aClusterNodeSaysWhatItRestoresAndRefusesAStandaloneJournal() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let empty = try dir.recover(pinSettings: pins, panicSettings: panic, now: 0)
        #expect(empty.replicatedLogLines.first == "no snapshot: the state comes from the stream (or a cluster snapshot)")
        #expect(!empty.replicatedLogLines.contains { $0.contains("journal") })
        #expect(empty.replicationNodeRefusal == nil)

        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: 5, journalSegment: 3, pins: [], streams: [],
                                                                  replicatedSequence: 42)), segment: 3)
        tmp.write("journal-0000000000000003.vgj", JournalCodec.header(segment: 3))
        let restored = try dir.recover(pinSettings: pins, panicSettings: panic, now: 10)
        #expect(restored.replicatedLogLines.first == "restored snapshot-0000000000000003.vgs (taken at 5 ms) at stream sequence 42; the stream brings it up to date")
        #expect(restored.replicationNodeRefusal == nil)

        let id = StreamID(high: 1, low: 2)
        tmp.write("journal-0000000000000003.vgj", JournalCodec.header(segment: 3)
                  + JournalCodec.encode(.panicEvent(id, PanicEvent(seq: 7, at: 1_000, kind: .status(.red)))))
        let standalone = try dir.recover(pinSettings: pins, panicSettings: panic, now: 10)
        #expect(standalone.replicationNodeRefusal?.hasPrefix("its journal holds 1 record(s) of a standalone node") == true)
    }

    /// Issue 12: the start-up log names no stream; records that cannot be applied are counted.
    @Test func recoveryLinesCountUnappliedRecordsWithoutNamingStreams() throws {
        let tmp = TemporaryDirectory()
        let id = StreamID(high: 0x0123_4567_89AB_CDEF, low: 0x0FED_CBA9_8765_4320)
        let orphan = JournalRecord.panicEvent(id, PanicEvent(seq: 7, at: 1_000, kind: .status(.red)))
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 0) + JournalCodec.encode(orphan) + JournalCodec.encode(orphan))
        let dir = try StateDirectory(path: tmp.path)
        let state = try dir.recover(pinSettings: pins, panicSettings: panic, now: 2_000)
        #expect(state.replayIssueCount == 2)
        #expect(state.replayIssues.contains { $0.contains(id.description) })
        #expect(state.logLines.contains { $0.hasPrefix("2 journal record(s) not applied") })
        #expect(!state.logLines.contains { $0.contains(id.description) })
    }

    @Test func restartsLoseNoSyncedRecord() throws {
        let tmp = TemporaryDirectory()
        var run = StateReplayTests.drive(seed: 61, operations: 400, snapshotAt: 200)
        let dir = try StateDirectory(path: tmp.path)
        // Lay the run out as the daemon would have: segment 0, snapshot at 1, segment 1 with a torn tail.
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 0) + run.before)
        try dir.writeSnapshot(try #require(run.snapshot), segment: 1)
        tmp.write("journal-0000000000000001.vgj", JournalCodec.header(segment: 1) + run.after + [0x40, 0, 0, 0, 1, 2])

        var state = try dir.recover(pinSettings: pins, panicSettings: panic, now: run.now)
        #expect(state.snapshotFile == "snapshot-0000000000000001.vgs")
        #expect(state.journal.truncatedTail?.keptBytes == JournalCodec.headerBytes + run.after.count)
        #expect(state.nextSegment == 2 && state.replayIssueCount == 0 && state.journal.corruption == nil)
        #expect(state.logLines.contains { $0.hasPrefix("cut a torn write off journal-0000000000000001.vgj") })
        StateReplayTests.expectEquivalent(live: &run, restoredMap: state.map, restoredPanic: state.panic, secrets: TestSecrets())

        // Steps 3 and 4 of the startup sequence, then new writes, then a crash (no close).
        let journal = try dir.openSegment(state.nextSegment)
        try dir.writeSnapshot(SnapshotCodec.encode(StateSnapshot(takenAt: run.now, journalSegment: state.nextSegment,
                                                                  map: state.map, panic: state.panic)), segment: state.nextSegment)
        let removed = try dir.removeObsolete(before: state.nextSegment, liveStreams: Set(state.panic.exportStreams().map(\.id)))
        // Segment 0 goes; the fallback (snapshot 1 and segment 1) is kept, rewritten without the
        // streams the drive ended whose grace is over (restore dropped them).
        #expect(removed == ["journal-0000000000000000.vgj", "snapshot-0000000000000001.vgs", "journal-0000000000000001.vgj"])
        var out: [PinDelivery] = []
        let secrets = TestSecrets(seed: 5)
        let draft = PinDraft(point: .init(lat: 1, lon: 1), title: "after restart", description: "", category: "general", ttlSeconds: 3600)
        let made = try state.map.create(draft, id: PinID(high: 1, low: 2), editDigest: secrets.digest(ofToken: "e"), now: run.now, out: &out).get()
        journal.append(.pinState(made.id, in: state.map))
        try journal.write()
        try journal.sync()

        let again = try dir.recover(pinSettings: pins, panicSettings: panic, now: run.now)
        #expect(again.snapshotFile == "snapshot-0000000000000002.vgs" && again.nextSegment == 3)
        expectSamePins(again.map.exportPins(), state.map.exportPins())
        expectSameStreams(again.panic.exportStreams(), state.panic.exportStreams())

        // The scrubbed fallback still restores the same state on its own (the newest snapshot lost).
        unlink(tmp.file("snapshot-0000000000000002.vgs"))
        let fallback = try dir.recover(pinSettings: pins, panicSettings: panic, now: run.now)
        #expect(fallback.snapshotFile == "snapshot-0000000000000001.vgs" && fallback.journal.corruption == nil)
        expectSamePins(fallback.map.exportPins(), state.map.exportPins())
        expectSameStreams(fallback.panic.exportStreams(), state.panic.exportStreams())
    }

    @Test func aDamagedNewestSnapshotFallsBackToThePreviousOneAndItsJournal() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        var run = StateReplayTests.drive(seed: 62, operations: 300, snapshotAt: 100)
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 0) + run.before)
        try dir.writeSnapshot(try #require(run.snapshot), segment: 1)
        tmp.write("journal-0000000000000001.vgj", JournalCodec.header(segment: 1) + run.after)
        // A newer snapshot (segment 2) that is damaged, and an empty segment 2.
        var newer = SnapshotCodec.encode(StateSnapshot(takenAt: run.now, journalSegment: 2, map: run.map, panic: run.panic))
        newer[newer.count / 3] ^= 0x08
        tmp.write("snapshot-0000000000000002.vgs", newer)
        tmp.write("journal-0000000000000002.vgj", JournalCodec.header(segment: 2))
        let state = try dir.recover(pinSettings: pins, panicSettings: panic, now: run.now)
        #expect(state.snapshotFile == "snapshot-0000000000000001.vgs")
        #expect(state.snapshotFallbacks.count == 1 && state.snapshotFallbacks[0].contains("checksum mismatch"))
        #expect(state.nextSegment == 3)
        StateReplayTests.expectEquivalent(live: &run, restoredMap: state.map, restoredPanic: state.panic, secrets: TestSecrets())
    }

    @Test func corruptionIsReportedAndTheStateSoFarReturned() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        let records = JournalFileTests.records(6)
        var first = JournalCodec.header(segment: 0)
        for r in records[0..<3] { JournalCodec.append(r, to: &first) }
        first[first.count - 1] ^= 1
        var second = JournalCodec.header(segment: 1)
        for r in records[3..<6] { JournalCodec.append(r, to: &second) }
        tmp.write("journal-0000000000000000.vgj", first)
        tmp.write("journal-0000000000000001.vgj", second)
        let state = try dir.recover(pinSettings: pins, panicSettings: panic, now: 0)
        #expect(state.journal.records == 2 && state.journal.corruption != nil)
        #expect(state.nextSegment == 2, "never reuses a segment number present")
        #expect(state.logLines.contains { $0.hasPrefix("journal replay stopped early: journal-0000000000000000.vgj") })
    }

    @Test func highestVoteSessionIsReported() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        var pin = Fixtures.pin(TestSecrets(), sequence: 1, now: 0)
        pin.expiresAt = 10_000
        pin.votes = [77: 1]
        pin.up = 1
        tmp.write("journal-0000000000000000.vgj", JournalCodec.header(segment: 0) + JournalCodec.encode(.pinPut(pin)))
        #expect(try dir.recover(pinSettings: pins, panicSettings: panic, now: 0).highestVoteSession == 77)
    }

    @Test func theLockKeepsASecondDaemonOut() throws {
        let tmp = TemporaryDirectory()
        let dir = try StateDirectory(path: tmp.path)
        var lock: StateLock? = try StateLock(dir)
        #expect(throws: StateError.locked(path: tmp.path)) { try StateLock(dir) }
        #expect(StateError.locked(path: "/x").description.contains("another vigild"))
        _ = lock
        lock = nil
        _ = try StateLock(dir)
    }
}

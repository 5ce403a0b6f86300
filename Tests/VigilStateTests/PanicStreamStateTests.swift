import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// `PanicStream.restored`, `replay`, `replayInvite`, `replayRevoke`.
@Suite struct PanicStreamStateTests {
    let secrets = TestSecrets(seed: 31)

    func rebuild(_ s: PanicStream, history: [PanicEvent]? = nil, capacity: Int? = nil, seq: UInt64? = nil,
                 ended: (reason: PanicEndReason, at: Int64)?? = nil, lastAt: Int64? = nil) throws(PanicRestoreError) -> PanicStream {
        try PanicStream.restored(id: s.id, status: s.status, startedAt: s.startedAt, updatedAt: s.updatedAt, seq: seq ?? s.seq,
                                 lastLocation: s.last.clearLocation!, lastLocationAt: lastAt ?? s.last.at, note: s.note,
                                 ended: ended ?? s.ended.map { ($0.reason, $0.at) }, history: history ?? s.history.all,
                                 historyCapacity: capacity ?? s.history.capacity, ownerDigest: s.ownerTokenDigest,
                                 watchTokens: s.watchTokenDigests, staleNotified: s.isStaleNotified)
    }

    @Test func restoredFromItsPartsEqualsTheOriginal() throws {
        for (events, capacity, end) in [(0, 1, nil), (5, 3, nil), (5, 30, PanicEndReason.safe), (40, 7, .cancelled)] as [(Int, Int, PanicEndReason?)] {
            var original = Fixtures.stream(secrets, events: events, capacity: capacity, end: end)
            original.staleNotified = events % 2 == 1
            let copy = try rebuild(original)
            expectSameStream(copy, original)
            #expect(copy.owner == nil && copy.watcherCount == 0)
            // It goes on exactly like the original.
            if original.isActive {
                var a = original, b = copy
                let ea = a.record(.status(.amber), now: 1_800_000_000_000)
                let eb = b.record(.status(.amber), now: 1_800_000_000_000)
                #expect(ea == eb)
                expectSameStream(a, b)
                #expect(a.events(after: a.seq - 2) == b.events(after: b.seq - 2))
            }
        }
    }

    @Test func contradictionsAreRefusedWithTheirReason() {
        let s = Fixtures.stream(secrets, events: 4, capacity: 3)
        let events = s.history.all
        #expect(throws: PanicRestoreError.invalidHistoryCapacity(0)) { try rebuild(s, capacity: 0) }
        #expect(throws: PanicRestoreError.historyOverCapacity(count: 3, capacity: 2)) { try rebuild(s, capacity: 2) }
        #expect(throws: PanicRestoreError.emptyHistory) { try rebuild(s, history: []) }
        #expect(throws: PanicRestoreError.historyNotAtSeq(newest: 5, seq: 6)) { try rebuild(s, seq: 6) }
        #expect(throws: PanicRestoreError.historyNotContiguous) { try rebuild(s, history: [events[0], events[2]]) }
        #expect(throws: PanicRestoreError.seqOutOfRange(0)) { try rebuild(s, seq: 0) }
        #expect(throws: PanicRestoreError.seqOutOfRange(.max)) { try rebuild(s, seq: .max) }
        #expect(throws: PanicRestoreError.timeOutOfRange(.max)) { try rebuild(s, lastAt: .max) }
        #expect(throws: PanicRestoreError.endMismatch) { try rebuild(s, ended: .some((.safe, 5))) }
        var ended = s
        _ = ended.record(.ended(.safe), now: 1_800_000_000_000)
        #expect(throws: PanicRestoreError.endMismatch) { try rebuild(ended, ended: .some(nil)) }
        #expect(throws: PanicRestoreError.endMismatch) { try rebuild(ended, ended: .some((.cancelled, 1_800_000_000_000))) }
        #expect(PanicRestoreError.historyNotAtSeq(newest: 5, seq: 6).description == "newest history event has seq 5, the stream is at seq 6")
    }

    @Test func replayAppliesTheNextSeqAndSkipsOnesHeld() {
        var live = Fixtures.stream(secrets, events: 2, capacity: 4)
        var copy = live
        let e1 = live.record(.location(PanicLocation(lat: 5, lon: 6)), now: 1_800_000_000_001)
        let e2 = live.record(.ended(.safe), now: 1_800_000_000_002)
        let outcomes = [copy.replay(e1), copy.replay(e1), copy.replay(e2)]
        #expect(outcomes == [.applied, .alreadyApplied, .applied])
        expectSameStream(copy, live)
        let afterEnd = copy.replay(PanicEvent(seq: e2.seq + 1, at: 1, kind: .status(.red)))
        #expect(afterEnd == .refused("stream \(live.id) ended at seq 5; event seq 6 comes after its end"))
        var fresh = Fixtures.stream(secrets, events: 0, capacity: 4)
        guard case .refused(let why) = fresh.replay(PanicEvent(seq: 3, at: 1, kind: .status(.amber))) else { Issue.record("gap accepted"); return }
        #expect(why.contains("leaves a gap"))
        guard case .refused = fresh.replay(PanicEvent(seq: 2, at: 1, kind: .location(PanicLocation(lat: 91, lon: 0)))) else { Issue.record("bad location accepted"); return }
        #expect(fresh.seq == 1)
    }

    @Test func replayedLocationClearsTheStaleNotice() {
        var s = Fixtures.stream(secrets, events: 0, capacity: 4)
        s.staleNotified = true
        let status = s.replay(PanicEvent(seq: 2, at: 1_700_000_000_500, kind: .status(.amber)))
        #expect(status == .applied && s.isStaleNotified)
        let location = s.replay(PanicEvent(seq: 3, at: 1_700_000_000_600, kind: .location(PanicLocation(lat: 0, lon: 0))))
        #expect(location == .applied)
        #expect(!s.isStaleNotified && s.lastLocationAt == 1_700_000_000_600)
    }

    @Test func invitesAndRevocationsAreIdempotent() {
        var s = Fixtures.stream(secrets, events: 0, capacity: 4, tokens: 1)
        let d = secrets.digest(ofToken: "contact")
        let invited = [s.replayInvite(d), s.replayInvite(d)]
        #expect(invited == [true, false])
        #expect(s.watchTokenDigests.count == 2 && s.watchTokenDigests.last == d)
        s.watchers = [7: d, 8: s.watchTokenDigests[0]]
        let revoked = [s.replayRevoke(d), s.replayRevoke(d)]
        #expect(revoked == [true, false])
        #expect(s.watchTokenDigests.count == 1 && s.watchers.keys.sorted() == [8])
    }

    @Test func latestEventIsTheNewest() {
        var s = Fixtures.stream(secrets, events: 3, capacity: 2)
        let e = s.record(.status(.amber), now: 1_800_000_000_000)
        #expect(s.latestEvent == e)
    }
}

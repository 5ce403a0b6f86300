import Testing
@testable import VigilCore
import VigilTestSupport

/// What the hub does against streams that are started and left behind: abandonment by its clock,
/// the reserved share of capacity, the idle test the server decides eligibility with, and the
/// operations that change nothing (so the server journals and syncs nothing for them).
@Suite struct PanicHubAbuseTests {
    static let day: Int64 = 86_400_000

    /// A stream whose owner sends nothing for `abandonAfterMs` is ended by the clock at exactly
    /// `updatedAt + abandonAfterMs`, with the next seq, told to its watchers like any end and
    /// returned for the journal; then it is kept for the grace time like any ended stream.
    @Test func aSilentStreamIsAbandonedAtItsOwnDeadline() throws {
        var rig = PanicRig(PanicSettings(staleAfterMs: 60_000, endedGraceMs: 3_600_000))
        let s = rig.start(now: 0)
        rig.watch(s.id, 10, s.watch[0])
        rig.update(s.id, now: 1_000)
        rig.status(s.id, .amber, now: 5_000)                              // a status change counts as word from the owner
        rig.status(s.id, .amber, now: 9_000)                              // the same status again does not: it changed nothing
        _ = rig.hub.resume(s.id, by: 2, ownerToken: s.owner, secrets: rig.secrets)   // nor does a reconnect
        _ = rig.take()
        #expect(rig.tick(5_000 + Self.day - 1).isEmpty)
        #expect(rig.take().map(\.kind) == [.stale(since: 1_000)])
        let ended = rig.tick(5_000 + Self.day + 40)                       // the tick runs late: the time is the deadline's
        let end = PanicEvent(seq: 4, at: 5_000 + Self.day, kind: .ended(.abandoned))
        #expect(ended == [StreamEvent(stream: s.id, event: end)])
        let told = rig.take()
        #expect(told.map(\.kind) == [.event(end)] && told.map(\.recipients) == [[10]] && told.map(\.stream) == [s.id])
        let stream = try #require(rig.hub.stream(s.id))
        #expect(stream.ended == PanicEnd(reason: .abandoned, at: 5_000 + Self.day) && stream.updatedAt == 5_000 + Self.day)
        #expect(rig.update(s.id, by: 2).failure == .ended && rig.status(s.id, by: 2, .red).failure == .ended)
        #expect(try rig.watch(s.id, 11, s.watch[1], since: 3).get().events == [end])    // a late contact learns how it ended
        #expect(rig.tick(5_000 + Self.day + 3_600_000 - 1).isEmpty && rig.hub.stream(s.id) != nil)
        rig.tick(5_000 + Self.day + 3_600_000)
        #expect(rig.hub.stream(s.id) == nil)
    }

    /// A stream whose phone keeps talking is never abandoned, and keeps one abandonment entry
    /// however many events it has: the timer costs nothing for streams that are not due.
    @Test func aTalkingStreamKeepsOneEntryAndIsNeverAbandoned() {
        var rig = PanicRig(PanicSettings(abandonAfterMs: 10_000))
        let s = rig.start(now: 0)
        for t in stride(from: Int64(1_000), through: 100_000, by: 1_000) {
            rig.update(s.id, now: t)
            #expect(rig.tick(t).isEmpty)
        }
        #expect(rig.hub.abandonDeadlines.count == 1 && rig.hub.staleDeadlines.count <= 2)
        #expect(rig.hub.stream(s.id)?.isActive == true)
    }

    /// Entries of streams that ended long before their abandonment deadline do not pile up.
    @Test func abandonmentEntriesOfEndedStreamsAreDropped() {
        var rig = PanicRig(PanicSettings(endedGraceMs: 1, maxStreams: 100_000))
        for i in 0..<5_000 {
            let s = rig.start(owner: WatcherID(i), now: Int64(i))
            rig.end(s.id, by: WatcherID(i), now: Int64(i))
        }
        rig.tick(10_000)
        #expect(rig.hub.count == 0)
        #expect(rig.hub.abandonDeadlines.count <= 1_024, "\(rig.hub.abandonDeadlines.count) entries for no stream")
    }

    /// A restored stream whose deadline passed while the server was down is ended by the first
    /// tick, at that deadline (nobody watches yet, so only the journal hears of it).
    @Test func aRestoredStreamPastItsDeadlineIsAbandonedAtTheFirstTick() throws {
        var live = PanicRig(PanicSettings(abandonAfterMs: 50_000))
        let s = live.start(now: 0)
        live.update(s.id, now: 7_000)
        var restored = PanicHub(settings: live.hub.settings)
        restored.restoreStreams(live.hub.exportStreams(), now: 500_000)
        #expect(restored.nextDeadline ?? .max <= 57_000)
        var out: [PanicDelivery] = []
        let ended = restored.tick(now: 500_000, out: &out)
        #expect(ended == [StreamEvent(stream: s.id, event: PanicEvent(seq: 3, at: 57_000, kind: .ended(.abandoned)))])
        #expect(out.isEmpty && restored.stream(s.id)?.isActive == false)
    }

    /// Once `maxStreams × (1 − reservedShare)` streams are held, only an eligible start gets in,
    /// up to `maxStreams`.
    @Test func theReservedShareIsForEligibleStartsOnly() {
        var rig = PanicRig(PanicSettings(maxStreams: 10, reservedShare: 0.2))
        #expect(rig.hub.settings.unreservedStreams == 8)
        for _ in 0..<8 { #expect(Self.start(&rig, eligible: false) == nil) }
        #expect(Self.start(&rig, eligible: false) == .reserveOnly)
        #expect(Self.start(&rig, eligible: true) == nil)
        #expect(Self.start(&rig, eligible: false) == .reserveOnly)
        #expect(Self.start(&rig, eligible: true) == nil)
        #expect(Self.start(&rig, eligible: true) == .capacityExceeded)
        #expect(RequestError.from(PanicFailure.reserveOnly).code == "capacity_exceeded")
    }

    /// A start's failure, if any. (A function of its own taking the rig inout: a nested function
    /// capturing it would access `rig.hub` and `rig.out` at once through the capture.)
    static func start(_ rig: inout PanicRig, eligible: Bool) -> PanicFailure? {
        rig.hub.start(owner: 1, status: .red, location: PanicRig.at(0), note: nil, watchers: 1, reserveEligible: eligible,
                      secrets: rig.secrets, now: 0, out: &rig.out).failure
    }

    @Test func unreservedStreamsRoundsTheReserveUp() {
        #expect(PanicSettings().unreservedStreams == 80_000)
        #expect(PanicSettings(maxStreams: 7, reservedShare: 0.2).unreservedStreams == 5)       // 1.4 reserved → 2
        #expect(PanicSettings(maxStreams: 7, reservedShare: 0).unreservedStreams == 7)
        #expect(PanicSettings(maxStreams: 7, reservedShare: 1).unreservedStreams == 0)
    }

    /// Idle: active and without a location for `staleAfterMs`. A status change is not a location;
    /// an ended stream, or one no longer held, is not idle.
    @Test func idleStreamsAreThoseWithoutALocationForTheStaleTime() {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000))
        let a = rig.start(now: 0)
        let b = rig.start(now: 0)
        rig.update(b.id, now: 600)
        rig.status(a.id, .amber, now: 900)
        #expect(!rig.hub.hasIdleStream(among: [a.id, b.id], now: 999))
        #expect(rig.hub.hasIdleStream(among: [a.id, b.id], now: 1_000) && rig.hub.hasIdleStream(among: [a.id], now: 1_000))
        #expect(!rig.hub.hasIdleStream(among: [b.id], now: 1_599) && rig.hub.hasIdleStream(among: [b.id], now: 1_600))
        rig.end(a.id, now: 2_000)
        #expect(!rig.hub.hasIdleStream(among: [a.id, StreamID(high: 1, low: 1)], now: 5_000))
        #expect(!rig.hub.hasIdleStream(among: [], now: 5_000))
    }

    @Test func ownersCannotClaimTheHubsReason() {
        let decoder = RequestDecoder(settings: PinSettings())
        let text = #"{"op":"panic.end","stream":"s","reason":"abandoned"}"#
        guard case .failure(let rejected) = Array(text.utf8).withUnsafeBytes({ decoder.decode($0) }) else {
            Issue.record("accepted")
            return
        }
        #expect(rejected.error.code == "invalid_reason" && rejected.error.field == "reason")
    }
}

import Testing
@testable import VigilCore
import VigilTestSupport

/// A cluster node's tick (`deciding: false`): escalations and abandonments wait, reported by
/// `dueDecisions`, until their record comes back through the log, or until another record makes
/// them moot. (That applied at once they give what a deciding tick gives is the property test's
/// part, in VigilStateTests.)
@Suite struct PanicHubDecisionTests {
    static let t0: Int64 = 1_700_000_000_000
    static let settings = PanicSettings(staleAfterMs: 30_000, abandonAfterMs: 600_000, maxTimerMs: 300_000)

    /// An amber stream (owner 1, watcher 7), with a safety timer due at t0 + 60 s if `timed`.
    static func hub(timed: Bool) throws -> (PanicHub, StreamID) {
        let secrets = TestSecrets(seed: 11)
        var hub = PanicHub(settings: settings)
        var out: [PanicDelivery] = []
        let started = try hub.start(owner: 1, status: .amber, location: PanicLocation(lat: 1, lon: 2), note: nil, watchers: 1,
                                    timer: timed ? .inSeconds(60) : nil, secrets: secrets, now: t0, out: &out).get()
        _ = try hub.watch(started.stream.id, watcher: 7, watchToken: started.watchTokens[0], since: nil, secrets: secrets, out: &out).get()
        return (hub, started.stream.id)
    }

    static func localTick(_ hub: inout PanicHub, _ now: Int64) -> [PanicDelivery] {
        var out: [PanicDelivery] = []
        var removed: [StreamID] = []
        #expect(hub.tick(now: now, out: &out, removed: &removed, deciding: false).isEmpty)
        return out
    }

    @Test func anEscalationWaitsForItsRecordAndIsAppliedOnce() throws {
        var (hub, id) = try Self.hub(timed: true)
        let due = Self.t0 + 60_000
        #expect(hub.dueDecisions(now: due - 1).isEmpty)
        _ = Self.localTick(&hub, due + 1)
        let stream = try #require(hub.stream(id))
        #expect(stream.status == .amber && stream.seq == 1 && stream.dueAt == due)     // not taken
        let expected = StreamEvent(stream: id, event: PanicEvent(seq: 2, at: due, kind: .missedCheckIn(dueAt: due, last: stream.last, sentAt: due + 1)))
        #expect(hub.dueDecisions(now: due + 1) == [expected])
        _ = Self.localTick(&hub, due + 5_000)
        // The same event however late, timed at the deadline; sent when decided.
        let later = try #require(hub.dueDecisions(now: due + 5_000).first)
        #expect(later.event.isSameChange(as: expected.event) && later.event.kind.sentAt == due + 5_000 && later.event.at == due)
        var out: [PanicDelivery] = []
        #expect(hub.applyReplicatedEvent(id, expected.event, out: &out) == .applied)
        #expect(out.map(\.recipients) == [[1, 7]] && hub.stream(id)?.status == .red)  // the owner hears it too
        #expect(hub.dueDecisions(now: due + 5_000).isEmpty)
        // Another node published it too, deciding on its own clock: a duplicate, and the first
        // record's sent_at holds.
        out = []
        #expect(hub.applyReplicatedEvent(id, expected.event, out: &out) == .duplicate)
        #expect(hub.applyReplicatedEvent(id, later.event, out: &out) == .duplicate && out.isEmpty)
        #expect(hub.stream(id)?.missedCheckInSentAt == due + 1)
        // Not the same change: another deadline, or a record sent before its time.
        var other = later.event
        other.kind = .missedCheckIn(dueAt: due + 1, last: stream.last, sentAt: due + 5_000)
        #expect(hub.applyReplicatedEvent(id, other, out: &out) == .conflict("the stream moved on"))
        let early = PanicEvent(seq: 3, at: due + 6_000, kind: .missedCheckIn(dueAt: due, last: stream.last, sentAt: due + 5_999))
        #expect(hub.applyReplicatedEvent(id, early, out: &out) == .conflict("the escalation was sent before its time"))
        _ = Self.localTick(&hub, due + 900_000)
        #expect(hub.dueDecisions(now: due + 900_000).isEmpty)                          // escalated: never abandoned
    }

    @Test func theOwnerMovingTheTimerFirstMakesTheEscalationMoot() throws {
        var (hub, id) = try Self.hub(timed: true)
        let due = Self.t0 + 60_000
        _ = Self.localTick(&hub, due + 1)
        let pending = try #require(hub.dueDecisions(now: due + 1).first)
        // The owner's timer move, validated on another node before the deadline, comes first.
        var out: [PanicDelivery] = []
        let moved = PanicEvent(seq: 2, at: due - 10, kind: .timer(dueAt: due + 120_000))
        #expect(hub.applyReplicatedEvent(id, moved, out: &out) == .applied)
        #expect(hub.dueDecisions(now: due + 1).isEmpty)
        #expect(hub.applyReplicatedEvent(id, pending.event, out: &out) == .conflict("the stream moved on"))
        _ = Self.localTick(&hub, due + 2)
        #expect(hub.dueDecisions(now: due + 2).isEmpty)
        _ = Self.localTick(&hub, due + 120_000)
        let next = try #require(hub.dueDecisions(now: due + 120_000).first)
        #expect(next.event.seq == 3 && next.event.at == due + 120_000)
    }

    @Test func aLocationFirstPutsTheAbandonmentOff() throws {
        var (hub, id) = try Self.hub(timed: false)
        let abandonAt = Self.t0 + 600_000
        let staleNotices = Self.localTick(&hub, abandonAt)
        #expect(staleNotices.map(\.kind) == [.stale(since: Self.t0)])                 // local: told at once
        #expect(hub.stream(id)?.isActive == true)
        #expect(hub.dueDecisions(now: abandonAt) == [StreamEvent(stream: id, event: PanicEvent(seq: 2, at: abandonAt, kind: .ended(.abandoned)))])
        var out: [PanicDelivery] = []
        #expect(hub.applyReplicatedEvent(id, PanicEvent(seq: 2, at: abandonAt - 5, kind: .location(PanicLocation(lat: 3, lon: 4))), out: &out) == .applied)
        #expect(hub.dueDecisions(now: abandonAt).isEmpty)
        _ = Self.localTick(&hub, abandonAt + 1)
        #expect(hub.dueDecisions(now: abandonAt + 1).isEmpty)
        let later = abandonAt - 5 + 600_000
        _ = Self.localTick(&hub, later)
        #expect(hub.dueDecisions(now: later).map(\.event) == [PanicEvent(seq: 3, at: later, kind: .ended(.abandoned))])
    }

    @Test func aDecidingTickTakesWhatWasSetAside() throws {
        var (hub, id) = try Self.hub(timed: true)
        let due = Self.t0 + 60_000
        _ = Self.localTick(&hub, due + 1)
        let pending = hub.dueDecisions(now: due + 1)
        var out: [PanicDelivery] = []
        #expect(hub.tick(now: due + 1, out: &out) == pending && pending.count == 1)
        #expect(hub.stream(id)?.seq == 2 && hub.dueDecisions(now: due + 1).isEmpty)
    }
}

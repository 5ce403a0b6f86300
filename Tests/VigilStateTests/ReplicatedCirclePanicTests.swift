import Testing
@testable import VigilCore
@testable import VigilState
import VigilTestSupport

/// Streams of a circle on a cluster node that applies another node's records: the circle's
/// listeners hear a start, an escalation and an end, and a member revoked in a `circlePut` loses
/// its watchers of the circle's streams, as on the writer (V1Application joins the hubs there).
@Suite struct ReplicatedCirclePanicTests {
    static let t0: Int64 = 1_700_000_000_000

    @Test func aReplicaTellsTheCircleAndCutsARevokedMember() throws {
        let secrets = TestSecrets(seed: 24)
        // The writer: a circle with two members, and a stream for it with a safety timer.
        var writer = ReplicaNode()
        let created = try writer.checkin.create(owner: 1, labels: ["Mum", nil], secrets: secrets, now: Self.t0).get()
        let circle = created.circle.id
        var none: [PanicDelivery] = []
        let started = try writer.panic.start(owner: 1, status: .amber, location: PanicLocation(lat: 1, lon: 2), note: nil, watchers: 1,
                                             timer: .at(Self.t0 + 50_000), circle: circle, secrets: secrets, now: Self.t0 + 10,
                                             out: &none).get().stream
        // The replica: the circle, a member listening (connection 7) and watching as a member (8).
        var replica = ReplicaNode()
        #expect(ReplicatedApplyRuleTests.apply(&replica, .circlePut(created.circle), owner: nil).0 == .applied)
        _ = try replica.checkin.join(circle, by: 7, memberToken: created.memberTokens[0], secrets: secrets).get()
        let (startOutcome, startOut) = ReplicatedApplyRuleTests.apply(&replica, .panicStart(PanicStartRecord(started)))
        #expect(startOutcome == .applied)
        #expect(startOut.checkin.map(\.kind) == [.panic(CirclePanic(stream: started.id, event: .started, status: .amber, at: Self.t0 + 10))])
        #expect(startOut.checkin.first?.recipients == [7])
        // The same start again is a duplicate: told once.
        #expect(ReplicatedApplyRuleTests.apply(&replica, .panicStart(PanicStartRecord(started))).1.isEmpty)
        let member = created.circle.members[0].tokenDigest
        _ = try replica.panic.watch(started.id, watcher: 8, asMember: member, of: circle, since: nil, out: &none).get()

        // The escalation, decided on the writer, applied here: the watcher and the listener hear it.
        let escalation = try #require(writer.panic.tick(now: Self.t0 + 50_000, out: &none).first)
        let (escalated, escalatedOut) = ReplicatedApplyRuleTests.apply(&replica, .panicEvent(escalation.stream, escalation.event))
        #expect(escalated == .applied)
        #expect(escalatedOut.panic.first?.recipients == [8])
        #expect(escalatedOut.checkin.map(\.kind) == [.panic(CirclePanic(stream: started.id, event: .escalated, status: .red, at: Self.t0 + 50_000))])

        // A location is the watchers' news only.
        _ = try writer.panic.update(started.id, by: 1, ownerToken: nil, location: PanicLocation(lat: 1, lon: 3), secrets: secrets,
                                    now: Self.t0 + 51_000, out: &none).get()
        let location = try #require(writer.panic.stream(started.id)?.latestEvent)
        #expect(ReplicatedApplyRuleTests.apply(&replica, .panicEvent(started.id, location)).1.checkin.isEmpty)

        // Member 1 revoked on the writer: its listener is told, its watcher cut.
        var checkinOut: [CheckinDelivery] = []
        let revoked = try #require(try writer.checkin.revoke(circle, ownerToken: created.ownerToken, member: 1, secrets: secrets,
                                                             now: Self.t0 + 52_000, out: &checkinOut).get())
        let (cut, cutOut) = ReplicatedApplyRuleTests.apply(&replica, .circlePut(revoked), base: created.circle.revision)
        #expect(cut == .applied)
        #expect(cutOut.checkin.map(\.kind) == [.revoked(member: 1)])
        #expect(cutOut.panic.map(\.kind) == [.revoked] && cutOut.panic.first?.recipients == [8])
        #expect(!replica.panic.isWatching(started.id, watcher: 8))

        // The end reaches nobody now (nobody listens), and changes the stream as on the writer.
        _ = try writer.panic.end(started.id, by: 1, ownerToken: nil, reason: .safe, secrets: secrets, now: Self.t0 + 53_000, out: &none).get()
        let end = try #require(writer.panic.stream(started.id)?.latestEvent)
        let (ended, endedOut) = ReplicatedApplyRuleTests.apply(&replica, .panicEvent(started.id, end))
        #expect(ended == .applied && endedOut.isEmpty)
        #expect(replica.panic.stream(started.id)?.circle == circle)
    }
}

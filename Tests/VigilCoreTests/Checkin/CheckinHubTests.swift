import Testing
import VigilTestSupport
@testable import VigilCore

@Suite struct CheckinHubTests {
    let secrets = TestSecrets()
    static let settings = CheckinSettings(maxCircles: 3, maxMembers: 3, requestsPerMinute: 2, idleLifetimeMs: 10_000, maxHomeMs: 5_000)

    /// A hub with one circle owned by connection 1, members "Mum" and unlabelled.
    func circle(_ hub: inout CheckinHub, now: Int64 = 1_000) -> (id: CircleID, owner: String, members: [String]) {
        let created = try! hub.create(owner: 1, labels: ["Mum", nil], secrets: secrets, now: now).get()
        return (created.circle.id, created.ownerToken, created.memberTokens)
    }

    @Test func createMintsTokensStoredOnlyAsDigestsAndTheOwnerListens() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let held = try #require(hub.circle(c.id))
        #expect(held.members.map(\.id) == [1, 2] && held.members.map(\.label) == ["Mum", nil] && held.nextMember == 3)
        #expect(held.members[0].tokenDigest == secrets.digest(ofToken: c.members[0]))
        #expect(held.ownerTokenDigest == secrets.digest(ofToken: c.owner))
        #expect(hub.listenerCount(c.id) == 1)
        #expect(held.idleDeadline(Self.settings) == 11_000)
    }

    @Test func aRequestGoesToEveryoneListeningAndANewerOneReplacesTheOlder() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        _ = try hub.join(c.id, by: 2, memberToken: c.members[0], secrets: secrets).get()
        _ = try hub.join(c.id, by: 3, memberToken: c.members[1], secrets: secrets).get()
        var out: [CheckinDelivery] = []
        let first = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 2_000, out: &out).get()
        #expect(first.ask == CheckinAsk(member: 1, label: "Mum", at: 2_000))
        #expect(out.count == 1 && out[0].recipients == [1, 2, 3] && out[0].kind == .requested(first.ask))
        _ = try hub.request(c.id, memberToken: c.members[1], secrets: secrets, now: 2_100, out: &out).get()
        _ = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 2_200, out: &out).get()
        #expect(hub.circle(c.id)?.requests == [CheckinAsk(member: 2, label: nil, at: 2_100), CheckinAsk(member: 1, label: "Mum", at: 2_200)])
        #expect(hub.circle(c.id)?.activeAt == 2_200)
    }

    @Test func theAnswerAnswersEveryPendingRequest() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        var out: [CheckinDelivery] = []
        _ = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 2_000, out: &out).get()
        out = []
        let answered = try hub.answer(c.id, ownerToken: c.owner, note: "ok", secrets: secrets, now: 3_000, out: &out).get()
        let answer = CheckinAnswer(at: 3_000, note: "ok", answered: [CheckinAsk(member: 1, label: "Mum", at: 2_000)])
        #expect(answered.answer == answer && answered.requests.isEmpty)
        #expect(out.map(\.kind) == [.answered(answer)] && out[0].recipients == [1])
        #expect(hub.answer(c.id, ownerToken: c.members[0], note: nil, secrets: secrets, now: 3_000, out: &out).failure == .forbidden)
    }

    @Test func requestsPerMinuteAreCountedPerMember() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        var out: [CheckinDelivery] = []
        for t in [1_000, 1_001] as [Int64] { _ = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: t, out: &out).get() }
        #expect(hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 1_002, out: &out).failure == .rateLimited(retryAfterMs: 29_998))  // the bucket is anchored at its first take, 1_000
        _ = try hub.request(c.id, memberToken: c.members[1], secrets: secrets, now: 1_002, out: &out).get()
        _ = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 31_001, out: &out).get()
    }

    @Test func wrongTokensAndUnknownCirclesAreOneAnswer() {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let unknown = CircleID(high: 1, low: 2)
        var out: [CheckinDelivery] = []
        for id in [c.id, unknown] {
            #expect(hub.open(id, by: 5, ownerToken: c.members[0], secrets: secrets).failure == .forbidden)
            #expect(hub.join(id, by: 5, memberToken: c.owner, secrets: secrets).failure == .forbidden)
            #expect(hub.request(id, memberToken: "nope", secrets: secrets, now: 1, out: &out).failure == .forbidden)
            #expect(hub.invite(id, ownerToken: c.members[1], label: nil, secrets: secrets, now: 1).failure == .forbidden)
            #expect(hub.close(id, ownerToken: "nope", secrets: secrets, out: &out).failure == .forbidden)
            // A bad home time is told only to the owner.
            #expect(hub.setHome(id, ownerToken: "nope", change: .until(0), secrets: secrets, now: 1, out: &out).failure == .forbidden)
        }
        #expect(out.isEmpty && hub.listenerCount(c.id) == 1)
    }

    @Test func revokeCutsTheMembersConnectionsAndRequestAndNumbersAreNotReused() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        _ = try hub.join(c.id, by: 2, memberToken: c.members[1], secrets: secrets).get()
        _ = try hub.join(c.id, by: 3, memberToken: c.members[1], secrets: secrets).get()
        _ = try hub.join(c.id, by: 4, memberToken: c.members[0], secrets: secrets).get()
        var out: [CheckinDelivery] = []
        _ = try hub.request(c.id, memberToken: c.members[1], secrets: secrets, now: 2_000, out: &out).get()
        out = []
        let changed = try #require(try hub.revoke(c.id, ownerToken: c.owner, member: 2, secrets: secrets, now: 2_500, out: &out).get())
        #expect(changed.members.map(\.id) == [1] && changed.requests.isEmpty)
        #expect(out.count == 1 && out[0].kind == .revoked(member: 2) && out[0].recipients == [2, 3])
        #expect(hub.listenerCount(c.id) == 2)
        #expect(hub.join(c.id, by: 2, memberToken: c.members[1], secrets: secrets).failure == .forbidden)
        #expect(try hub.revoke(c.id, ownerToken: c.owner, member: 2, secrets: secrets, now: 2_600, out: &out).get() == nil)
        let invited = try hub.invite(c.id, ownerToken: c.owner, label: "New", secrets: secrets, now: 2_700).get()
        #expect(invited.member.id == 3)
        _ = try hub.invite(c.id, ownerToken: c.owner, label: nil, secrets: secrets, now: 2_700).get()
        #expect(hub.invite(c.id, ownerToken: c.owner, label: nil, secrets: secrets, now: 2_700).failure == .tooManyMembers)
    }

    @Test func homeSafeLapsesAtItsTimeAndAnIdleCircleIsRemoved() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        var out: [CheckinDelivery] = []
        #expect(hub.setHome(c.id, ownerToken: c.owner, change: .forSeconds(6), secrets: secrets, now: 1_000, out: &out).failure == .invalidHome)
        #expect(hub.setHome(c.id, ownerToken: c.owner, change: .until(1_000), secrets: secrets, now: 1_000, out: &out).failure == .invalidHome)
        let set = try #require(try hub.setHome(c.id, ownerToken: c.owner, change: .forSeconds(2), secrets: secrets, now: 1_000, out: &out).get())
        #expect(set.home == CheckinHome(at: 1_000, until: 3_000) && out.map(\.kind) == [.home(set.home, lapsed: false)])
        out = []
        #expect(hub.nextDeadline == 3_000)
        #expect(hub.tick(now: 2_999, out: &out).isEmpty && out.isEmpty)
        #expect(hub.tick(now: 3_000, out: &out).isEmpty)
        #expect(out.map(\.kind) == [.home(CheckinHome(at: 1_000, until: 3_000), lapsed: true)])
        #expect(hub.circle(c.id)?.home == nil && hub.nextDeadline == 11_000)
        out = []
        #expect(hub.tick(now: 10_999, out: &out).isEmpty)
        #expect(hub.tick(now: 11_000, out: &out) == [c.id])
        #expect(out.map(\.kind) == [.closed(.idle)] && out[0].recipients == [1])
        #expect(hub.count == 0 && hub.listenerCount(c.id) == 0 && hub.nextDeadline == nil)
    }

    @Test func activityPushesTheIdleRemovalBackAndClearingHomeMeansNoLapse() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        var out: [CheckinDelivery] = []
        _ = try hub.setHome(c.id, ownerToken: c.owner, change: .until(4_000), secrets: secrets, now: 1_000, out: &out).get()
        _ = try hub.setHome(c.id, ownerToken: c.owner, change: .clear, secrets: secrets, now: 2_000, out: &out).get()
        #expect(try hub.setHome(c.id, ownerToken: c.owner, change: .clear, secrets: secrets, now: 2_000, out: &out).get() == nil)
        _ = try hub.request(c.id, memberToken: c.members[0], secrets: secrets, now: 9_000, out: &out).get()
        out = []
        #expect(hub.tick(now: 18_999, out: &out).isEmpty && out.isEmpty)
        #expect(hub.tick(now: 19_000, out: &out) == [c.id])
    }

    @Test func aCircleThatGaveOutEveryNumberTakesNoMoreMembers() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        let held = try #require(hub.circle(c.id))
        let worn = CheckinCircle(id: held.id, createdAt: held.createdAt, activeAt: held.activeAt, ownerDigest: held.ownerTokenDigest,
                                 members: held.members, nextMember: .max - 1, requests: [], answer: nil, home: nil)
        var restored = CheckinHub(settings: Self.settings)
        restored.restoreCircles([worn], now: held.activeAt)
        #expect(try restored.invite(c.id, ownerToken: c.owner, label: nil, secrets: secrets, now: 2_000).get().member.id == .max - 1)
        var out: [CheckinDelivery] = []
        _ = try restored.revoke(c.id, ownerToken: c.owner, member: 1, secrets: secrets, now: 2_000, out: &out).get()
        #expect(restored.invite(c.id, ownerToken: c.owner, label: nil, secrets: secrets, now: 2_000).failure == .tooManyMembers)
    }

    @Test func capacityAndMembersAtCreate() {
        var hub = CheckinHub(settings: Self.settings)
        #expect(hub.create(owner: 1, labels: [nil, nil, nil, nil], secrets: secrets, now: 0).failure == .tooManyMembers)
        for _ in 0..<3 { _ = circle(&hub) }
        #expect(hub.create(owner: 1, labels: [], secrets: secrets, now: 0).failure == .capacityExceeded)
    }

    @Test func closeTellsEveryoneAndDisconnectForgetsTheConnection() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        _ = try hub.join(c.id, by: 2, memberToken: c.members[0], secrets: secrets).get()
        hub.disconnected(2)
        #expect(hub.listenerCount(c.id) == 1)
        var out: [CheckinDelivery] = []
        try hub.close(c.id, ownerToken: c.owner, secrets: secrets, out: &out).get()
        #expect(out.map(\.kind) == [.closed(.closed)] && out[0].recipients == [1] && hub.count == 0)
        #expect(hub.listening.isEmpty && hub.listeners.isEmpty && hub.buckets.isEmpty)
    }

    @Test func revertPutsTheCircleAndItsListenersBack() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c = circle(&hub)
        _ = try hub.join(c.id, by: 2, memberToken: c.members[1], secrets: secrets).get()
        let before = hub.checkpoint(c.id)
        var out: [CheckinDelivery] = []
        _ = try hub.revoke(c.id, ownerToken: c.owner, member: 2, secrets: secrets, now: 2_000, out: &out).get()
        hub.revert(to: before, connected: { _ in true })
        #expect(hub.circle(c.id)?.members.map(\.id) == [1, 2] && hub.listenerCount(c.id) == 2)

        let created = try hub.create(owner: 7, labels: [], secrets: secrets, now: 3_000).get()
        hub.revert(to: .created(created.circle.id), connected: { _ in true })
        #expect(hub.circle(created.circle.id) == nil && hub.listening[7] == nil && hub.count == 1)
        #expect(hub.tick(now: 1_000_000, out: &out) == [c.id])  // the undone circle's timer entry is skipped
    }

    @Test func restoreDropsIdleCirclesAndLapsedHomeAndArmsTimers() throws {
        var hub = CheckinHub(settings: Self.settings)
        let c1 = circle(&hub, now: 1_000)
        let c2 = circle(&hub, now: 5_000)
        var out: [CheckinDelivery] = []
        _ = try hub.setHome(c2.id, ownerToken: c2.owner, change: .until(8_000), secrets: secrets, now: 5_000, out: &out).get()
        var restored = CheckinHub(settings: Self.settings)
        restored.restoreCircles(hub.exportCircles(), now: 11_000)
        #expect(restored.circle(c1.id) == nil)
        #expect(restored.circle(c2.id)?.home == nil && restored.nextDeadline == 15_000 && restored.listenerCount(c2.id) == 0)
    }

    @Test func stalerTimerEntriesAreCompacted() throws {
        var hub = CheckinHub(settings: CheckinSettings(maxCircles: 3, maxMembers: 3, requestsPerMinute: 2, idleLifetimeMs: 10_000_000, maxHomeMs: 5_000_000))
        let c = circle(&hub)
        var out: [CheckinDelivery] = []
        for i in 0..<1_000 as Range<Int64> {
            _ = try hub.setHome(c.id, ownerToken: c.owner, change: .until(4_000_000 - i), secrets: secrets, now: 1_000, out: &out).get()
        }
        #expect(hub.deadlines.count <= 2 * hub.filed.count + 65)
    }
}

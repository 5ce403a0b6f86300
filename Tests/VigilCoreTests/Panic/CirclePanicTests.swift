import Testing
@testable import VigilCore
import VigilTestSupport

/// Streams started for a check-in circle (issue 24, "Circles as standing contacts"): the panic
/// hub's side (the circle's id on the stream, member watchers, cutting a member) and the checkin
/// hub's (the circle's news), each hub alone, as the application joins them.
@Suite struct CirclePanicTests {
    let secrets = TestSecrets()
    static let circle = CircleID(high: 7, low: 9)
    static let other = CircleID(high: 8, low: 9)

    func start(_ hub: inout PanicHub, circle: CircleID? = Self.circle, owner: WatcherID = 1, timer: PanicTimer? = nil,
               status: PanicStatus = .red, now: Int64 = 1_000) -> PanicStream {
        var out: [PanicDelivery] = []
        return try! hub.start(owner: owner, status: status, location: PanicRig.at(0), note: nil, watchers: 1, timer: timer,
                              circle: circle, secrets: secrets, now: now, out: &out).get().stream
    }

    @Test func aStreamKeepsItsCircleAndTheHubListsTheCirclesStreams() {
        var hub = PanicHub(settings: PanicSettings())
        let a = start(&hub, now: 1_000)
        let b = start(&hub, now: 2_000)
        _ = start(&hub, circle: Self.other)
        _ = start(&hub, circle: nil)
        #expect(hub.stream(a.id)?.circle == Self.circle)
        #expect(hub.streams(of: Self.circle).map(\.id) == [a.id, b.id])
        #expect(hub.streams(of: CircleID(high: 1, low: 1)).isEmpty)
        // Taken back, removed after its grace, or replicated away: no longer listed.
        hub.revertStart(a.id)
        #expect(hub.streams(of: Self.circle).map(\.id) == [b.id])
        _ = hub.applyReplicatedRemove(b.id)
        #expect(hub.streams(of: Self.circle).isEmpty)
    }

    @Test func aMemberWatchesOnlyStreamsOfItsCircle() throws {
        var hub = PanicHub(settings: PanicSettings())
        let s = start(&hub)
        let loose = start(&hub, circle: nil)
        let member = secrets.digest(ofToken: "member")
        var out: [PanicDelivery] = []
        let watch = try hub.watch(s.id, watcher: 5, asMember: member, of: Self.circle, since: 0, out: &out).get()
        #expect(watch.replay == 1...1 && !watch.gap)
        #expect(out.map(\.kind) == [.watchers(count: 1)] && out[0].recipients == [1])
        #expect(hub.isWatching(s.id, watcher: 5))
        // Another circle's member, a stream of no circle, an unknown stream: the same forbidden.
        #expect(hub.watch(s.id, watcher: 6, asMember: member, of: Self.other, since: nil, out: &out).failure == .forbidden)
        #expect(hub.watch(loose.id, watcher: 6, asMember: member, of: Self.circle, since: nil, out: &out).failure == .forbidden)
        #expect(hub.watch(StreamID(high: 3, low: 3), watcher: 6, asMember: member, of: Self.circle, since: nil, out: &out).failure == .forbidden)
        #expect(hub.watch(s.id, watcher: 6, asMember: member, of: Self.circle, since: 9, out: &out).failure == .sinceAhead)
        // A member's digest opens nothing as a watch token.
        #expect(hub.watch(s.id, watcher: 6, watchToken: "member", since: nil, secrets: secrets, out: &out).failure == .forbidden)
    }

    @Test func cuttingAMemberRevokesItsWatchersOfEveryStreamOfTheCircleOnly() throws {
        var hub = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        let a = start(&hub, owner: 1)
        let b = start(&hub, owner: 2)
        let elsewhere = start(&hub, circle: Self.other, owner: 3)
        let gone = secrets.digest(ofToken: "gone"), stays = secrets.digest(ofToken: "stays")
        for (stream, circle) in [(a.id, Self.circle), (b.id, Self.circle), (elsewhere.id, Self.other)] {
            _ = try hub.watch(stream, watcher: 10, asMember: gone, of: circle, since: nil, out: &out).get()
        }
        _ = try hub.watch(a.id, watcher: 11, asMember: gone, of: Self.circle, since: nil, out: &out).get()
        _ = try hub.watch(a.id, watcher: 12, asMember: stays, of: Self.circle, since: nil, out: &out).get()
        out = []
        let touched = hub.cutMember(gone, of: Self.circle, out: &out)
        #expect(Set(touched) == [a.id, b.id])
        let revoked = out.filter { $0.kind == .revoked }
        #expect(revoked.count == 2)
        #expect(revoked.first { $0.stream == a.id }?.recipients == [10, 11])
        #expect(revoked.first { $0.stream == b.id }?.recipients == [10])
        #expect(out.contains { $0.stream == a.id && $0.kind == .watchers(count: 1) && $0.recipients == [1] })
        #expect(!hub.isWatching(a.id, watcher: 10) && !hub.isWatching(a.id, watcher: 11) && hub.isWatching(a.id, watcher: 12))
        // The same member in another circle keeps watching that circle's stream.
        #expect(hub.isWatching(elsewhere.id, watcher: 10))
        #expect(hub.streamsWatched(by: 10) == [elsewhere.id])
        // Nothing left to cut: nothing told.
        out = []
        #expect(hub.cutMember(gone, of: Self.circle, out: &out).isEmpty && out.isEmpty)
    }

    @Test func aCutIsTakenBackWithTheStreamsCheckpoints() throws {
        var hub = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        let s = start(&hub)
        let member = secrets.digest(ofToken: "m")
        _ = try hub.watch(s.id, watcher: 4, asMember: member, of: Self.circle, since: nil, out: &out).get()
        let before = try #require(hub.checkpoint(s.id, keepingWatchers: true))
        hub.cutMember(member, of: Self.circle, out: &out)
        #expect(!hub.isWatching(s.id, watcher: 4))
        hub.revert(to: before, connected: { _ in true })
        #expect(hub.isWatching(s.id, watcher: 4) && hub.streamsWatched(by: 4) == [s.id])
    }

    @Test func restoredAndReplicatedStreamsKeepTheirCircle() throws {
        var hub = PanicHub(settings: PanicSettings())
        let s = start(&hub)
        var restored = PanicHub(settings: PanicSettings())
        restored.restoreStreams(hub.exportStreams(), now: 2_000)
        #expect(restored.stream(s.id)?.circle == Self.circle && restored.streams(of: Self.circle).map(\.id) == [s.id])
        var replica = PanicHub(settings: PanicSettings())
        #expect(replica.applyReplicatedStart(s, owner: nil) == .applied)
        #expect(replica.streams(of: Self.circle).map(\.id) == [s.id])
    }

    @Test func theNewsOfAStreamIsItsStartEscalationAndEndOnly() throws {
        var hub = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        let s = start(&hub, timer: .at(5_000), status: .amber, now: 1_000)
        #expect(CirclePanic.started(s) == CirclePanic(stream: s.id, event: .started, status: .amber, at: 1_000))
        let location = try #require(hub.stream(s.id)?.latestEvent)
        #expect(CirclePanic.of(location, in: s) == nil)
        let escalation = try #require(hub.tick(now: 5_050, out: &out).first)
        let escalated = try #require(hub.stream(s.id))
        #expect(CirclePanic.of(escalation.event, in: escalated) == CirclePanic(stream: s.id, event: .escalated, status: .red, at: 5_000))
        _ = try hub.end(s.id, by: 1, ownerToken: nil, reason: .safe, secrets: secrets, now: 6_000, out: &out).get()
        let ended = try #require(hub.stream(s.id))
        let end = try #require(ended.latestEvent)
        #expect(CirclePanic.of(end, in: ended) == CirclePanic(stream: s.id, event: .ended(.safe), status: .red, at: 6_000))
    }

    @Test func theCircleTellsItsListenersAndChecksOwnersAndMembers() throws {
        var hub = CheckinHub(settings: CheckinSettings())
        let created = try hub.create(owner: 1, labels: ["Mum", nil], secrets: secrets, now: 1_000).get()
        let id = created.circle.id
        _ = try hub.join(id, by: 2, memberToken: created.memberTokens[0], secrets: secrets).get()
        #expect(hub.isOwner(id, ownerToken: created.ownerToken, secrets: secrets))
        #expect(!hub.isOwner(id, ownerToken: created.memberTokens[0], secrets: secrets))
        #expect(!hub.isOwner(Self.other, ownerToken: created.ownerToken, secrets: secrets))
        #expect(hub.liveMember(id, memberToken: created.memberTokens[1], secrets: secrets)?.id == 2)
        #expect(hub.liveMember(id, memberToken: created.ownerToken, secrets: secrets) == nil)
        #expect(hub.liveMember(nil, memberToken: created.memberTokens[1], secrets: secrets) == nil)
        let news = CirclePanic(stream: StreamID(high: 1, low: 2), event: .started, status: .red, at: 1_500)
        var out: [CheckinDelivery] = []
        hub.tell(news, of: id, out: &out)
        #expect(out.count == 1 && out[0].kind == .panic(news) && out[0].recipients == [1, 2])
        // Reading changes nothing: the circle is not kept alive by its streams.
        #expect(hub.circle(id)?.activeAt == 1_000)
        // A revoked member is no member; a closed circle tells nobody.
        _ = try hub.revoke(id, ownerToken: created.ownerToken, member: 2, secrets: secrets, now: 2_000, out: &out).get()
        #expect(hub.liveMember(id, memberToken: created.memberTokens[1], secrets: secrets) == nil)
        _ = try hub.close(id, ownerToken: created.ownerToken, secrets: secrets, out: &out).get()
        out = []
        hub.tell(news, of: id, out: &out)
        #expect(out.isEmpty)
    }

    func parse(_ w: JSONWriter) throws -> JSONObject {
        try #require(w.withUnsafeBytes { try JSONParser.parse($0, maxDepth: 16) }.object)
    }

    @Test func theNewsAndTheStateOnTheWire() throws {
        var hub = PanicHub(settings: PanicSettings())
        var out: [PanicDelivery] = []
        let walking = start(&hub, timer: .at(5_000), status: .amber, now: 1_000)
        let ended = start(&hub, now: 1_500)
        _ = hub.tick(now: 5_000, out: &out)
        _ = try hub.end(ended.id, by: 1, ownerToken: nil, reason: .cancelled, secrets: secrets, now: 5_500, out: &out).get()
        var w = JSONWriter(capacity: 512)
        let news = CirclePanic(stream: walking.id, event: .ended(.safe), status: .red, at: 6_000)
        ServerMessages.checkinDelivery(CheckinDelivery(circle: Self.circle, kind: .panic(news), recipients: [1]), now: 7_000, into: &w)
        let o = try parse(w)
        #expect(o["type"]?.string == "checkin.panic" && o["circle"]?.string == Self.circle.description)
        #expect(o["stream"]?.string == walking.id.description && o["event"]?.string == "ended" && o["reason"]?.string == "safe")
        #expect(o["status"]?.string == "red" && o["at"]?.int64 == 6_000, "at is the event's time, not the clock's")
        w = JSONWriter(capacity: 512)
        ServerMessages.checkinDelivery(CheckinDelivery(circle: Self.circle, kind: .panic(CirclePanic.started(walking)), recipients: [1]),
                                       now: 7_000, into: &w)
        let started = try parse(w)
        #expect(started["event"]?.string == "started" && started["reason"] == nil && started["at"]?.int64 == 1_000)
        // The state lists the active streams only, with their escalation.
        let circle = CheckinCircle(id: Self.circle, createdAt: 0, activeAt: 0, ownerDigest: secrets.digest(ofToken: "o"), members: [],
                                   nextMember: 1, requests: [], answer: nil, home: nil)
        w = JSONWriter(capacity: 512)
        ServerMessages.checkinState(circle, role: .owner, settings: CheckinSettings(), panics: hub.streams(of: Self.circle), into: &w)
        let panics = try #require(try parse(w)["panics"]?.array)
        #expect(panics.count == 1)
        let p = try #require(panics.first?.object)
        #expect(p["stream"]?.string == walking.id.description && p["status"]?.string == "red")
        #expect(p["started_at"]?.int64 == 1_000 && p["escalated_at"]?.int64 == 5_000)
        w = JSONWriter(capacity: 512)
        ServerMessages.checkinState(circle, role: .owner, settings: CheckinSettings(), into: &w)
        #expect(try parse(w)["panics"]?.array?.isEmpty == true)
    }

    @Test func theStartReplyEchoesTheCircle() throws {
        var w = JSONWriter(capacity: 512)
        let stream = StreamID(high: 1, low: 2)
        ServerMessages.reply(.panicStarted(stream: stream, seq: 1, ownerToken: "o", watchTokens: ["w"], dueAt: nil, circle: Self.circle),
                             ref: nil, into: &w)
        #expect(try parse(w)["circle"]?.string == Self.circle.description)
        w = JSONWriter(capacity: 512)
        ServerMessages.reply(.panicStarted(stream: stream, seq: 1, ownerToken: "o", watchTokens: ["w"], dueAt: nil), ref: nil, into: &w)
        #expect(try parse(w)["circle"] == nil)
    }
}

import Testing
@testable import VigilCore
import VigilTestSupport

/// A hub with deterministic secrets, and a delivery log the tests read and clear.
struct PanicRig {
    var hub: PanicHub
    let secrets = TestSecrets()
    var out: [PanicDelivery] = []

    init(_ settings: PanicSettings = PanicSettings()) { hub = PanicHub(settings: settings) }

    static func at(_ i: Double) -> PanicLocation { PanicLocation(lat: 50 + i / 1000, lon: 8 + i / 1000, accuracyM: 5) }

    mutating func start(owner: WatcherID = 1, watchers: Int = 2, status: PanicStatus = .red, now: Int64 = 0)
        -> (id: StreamID, owner: String, watch: [String]) {
        let r = try! hub.start(owner: owner, status: status, location: Self.at(0), note: "help", watchers: watchers,
                               secrets: secrets, now: now, out: &out).get()
        return (r.stream.id, r.ownerToken, r.watchTokens)
    }

    @discardableResult
    mutating func update(_ id: StreamID, by c: WatcherID = 1, token: String? = nil, _ i: Double = 1, now: Int64 = 0) -> Result<UInt64, PanicFailure> {
        hub.update(id, by: c, ownerToken: token, location: Self.at(i), secrets: secrets, now: now, out: &out)
    }

    @discardableResult
    mutating func status(_ id: StreamID, by c: WatcherID = 1, token: String? = nil, _ s: PanicStatus, now: Int64 = 0) -> Result<PanicChange, PanicFailure> {
        hub.setStatus(id, by: c, ownerToken: token, status: s, secrets: secrets, now: now, out: &out)
    }

    @discardableResult
    mutating func end(_ id: StreamID, by c: WatcherID = 1, token: String? = nil, _ r: PanicEndReason = .safe, now: Int64 = 0) -> Result<UInt64, PanicFailure> {
        hub.end(id, by: c, ownerToken: token, reason: r, secrets: secrets, now: now, out: &out)
    }

    @discardableResult
    mutating func watch(_ id: StreamID, _ w: WatcherID, _ token: String, since: UInt64? = nil)
        -> Result<PanicWatch, PanicFailure> {
        hub.watch(id, watcher: w, watchToken: token, since: since, secrets: secrets, out: &out)
    }

    @discardableResult
    mutating func revoke(_ id: StreamID, by c: WatcherID = 1, token: String? = nil, _ watchToken: String) -> Result<PanicRevocation, PanicFailure> {
        hub.revoke(id, by: c, ownerToken: token, watchToken: watchToken, secrets: secrets, out: &out)
    }

    mutating func invite(_ id: StreamID, by c: WatcherID = 1, token: String? = nil) -> Result<String, PanicFailure> {
        hub.invite(id, by: c, ownerToken: token, secrets: secrets)
    }

    @discardableResult
    mutating func tick(_ now: Int64) -> [StreamEvent] { hub.tick(now: now, out: &out) }

    /// The deliveries so far, cleared.
    mutating func take() -> [PanicDelivery] {
        defer { out.removeAll() }
        return out
    }
}

extension Result {
    var failure: Failure? { if case .failure(let f) = self { return f } else { return nil } }
    var ok: Bool { failure == nil }
}

func seqs(_ deliveries: [PanicDelivery]) -> [UInt64] {
    deliveries.compactMap { if case .event(let e) = $0.kind { return e.seq } else { return nil } }
}

@Suite struct PanicHubTests {
    @Test func startIssuesTokensAndSeqOneAndDeliversNothing() throws {
        var rig = PanicRig()
        let r = try rig.hub.start(owner: 7, status: .amber, location: PanicRig.at(0), note: "walking home", watchers: 3,
                                  secrets: rig.secrets, now: 1_000, out: &rig.out).get()
        #expect(r.ownerToken.utf8.count == 43)
        #expect(r.watchTokens.count == 3 && r.watchTokens.allSatisfy { $0.utf8.count == 43 })
        #expect(Set(r.watchTokens + [r.ownerToken]).count == 4)
        let s = r.stream
        #expect(s.seq == 1 && s.status == .amber && s.startedAt == 1_000 && s.updatedAt == 1_000)
        #expect(s.last == LastLocation(location: PanicRig.at(0), at: 1_000))
        #expect(s.note == "walking home" && s.ended == nil && s.owner == 7)
        #expect(s.trail == [PanicEvent(seq: 1, at: 1_000, kind: .location(PanicRig.at(0)))])
        #expect(s.events(after: 0) == s.trail)
        #expect(StreamID(s.id.description) == s.id)
        #expect(rig.hub.count == 1 && rig.hub.watcherCount(s.id) == 0)
        #expect(rig.hub.stream(s.id)?.seq == 1)
        #expect(rig.out.isEmpty)
        // Only digests are kept.
        #expect(rig.hub.stream(s.id)!.watchTokens == r.watchTokens.map { rig.secrets.digest(ofToken: $0) })
    }

    @Test func updatesTakeTheNextSeqAndReachEveryWatcher() {
        var rig = PanicRig()
        let s = rig.start()
        rig.watch(s.id, 10, s.watch[0])
        rig.watch(s.id, 11, s.watch[1])
        _ = rig.take()
        #expect(rig.update(s.id, 1, now: 100) == .success(2))
        #expect(rig.update(s.id, 2, now: 200) == .success(3))
        let out = rig.take()
        #expect(out.map(\.recipients) == [[10, 11], [10, 11]])
        #expect(out.map(\.kind) == [.event(PanicEvent(seq: 2, at: 100, kind: .location(PanicRig.at(1)))),
                                    .event(PanicEvent(seq: 3, at: 200, kind: .location(PanicRig.at(2))))])
        #expect(out.allSatisfy { $0.stream == s.id })
        let st = rig.hub.stream(s.id)!
        #expect(st.seq == 3 && st.updatedAt == 200 && st.last == LastLocation(location: PanicRig.at(2), at: 200))
        #expect(st.trail.map(\.seq) == [1, 2, 3])
    }

    @Test func updatesWithoutWatchersDeliverNothingButStillCount() {
        var rig = PanicRig()
        let s = rig.start()
        #expect(rig.update(s.id) == .success(2))
        #expect(rig.out.isEmpty)
        let w = try! rig.watch(s.id, 10, s.watch[0], since: 1).get()
        #expect(w.events.map(\.seq) == [2] && !w.gap)
    }

    @Test func statusChangeIsAnEventAndTheSameStatusIsNot() {
        var rig = PanicRig()
        let s = rig.start(status: .red)
        rig.watch(s.id, 10, s.watch[0])
        _ = rig.take()
        #expect(rig.status(s.id, .red, now: 5) == .success(.unchanged(seq: 1)))
        #expect(rig.out.isEmpty && rig.hub.stream(s.id)!.updatedAt == 0, "the same status changes nothing, not even the time")
        #expect(rig.status(s.id, .amber, now: 6) == .success(.recorded(PanicEvent(seq: 2, at: 6, kind: .status(.amber)))))
        #expect(rig.take().map(\.kind) == [.event(PanicEvent(seq: 2, at: 6, kind: .status(.amber)))])
        #expect(rig.hub.stream(s.id)!.status == .amber && rig.hub.stream(s.id)!.updatedAt == 6)
        #expect(rig.hub.stream(s.id)!.lastLocationAt == 0)   // a status is not a location
    }

    @Test func endIsTheLastEventAndRefusesWhatFollows() {
        var rig = PanicRig()
        let s = rig.start()
        rig.watch(s.id, 10, s.watch[0])
        rig.update(s.id)
        _ = rig.take()
        #expect(rig.end(s.id, .cancelled, now: 50) == .success(3))
        #expect(rig.take().map(\.kind) == [.event(PanicEvent(seq: 3, at: 50, kind: .ended(.cancelled)))])
        #expect(rig.hub.stream(s.id)!.ended == PanicEnd(reason: .cancelled, at: 50))
        #expect(rig.update(s.id).failure == .ended)
        #expect(rig.status(s.id, .amber).failure == .ended)
        #expect(rig.end(s.id).failure == .ended)
        #expect(rig.invite(s.id).failure == .ended)
        #expect(rig.out.isEmpty)
        #expect(rig.hub.stream(s.id)!.seq == 3)
        // Still readable in grace, with replay.
        let w = try! rig.watch(s.id, 11, s.watch[1], since: 1).get()
        #expect(w.stream.ended?.reason == .cancelled && w.events.map(\.seq) == [2, 3] && !w.gap)
        // Someone without rights learns nothing about the end.
        #expect(rig.update(s.id, by: 99).failure == .forbidden)
    }

    @Test func anotherConnectionSteersOnlyWithTheOwnerTokenAndDoesNotBecomeOwner() {
        var rig = PanicRig()
        let s = rig.start(owner: 1)
        #expect(rig.update(s.id, by: 2).failure == .forbidden)
        #expect(rig.update(s.id, by: 2, token: s.watch[0]).failure == .forbidden)
        #expect(rig.update(s.id, by: 2, token: "nope").failure == .forbidden)
        #expect(rig.update(s.id, by: 2, token: s.owner) == .success(2))
        #expect(rig.hub.stream(s.id)!.owner == 1)
        #expect(rig.update(s.id, by: 2).failure == .forbidden)
        // The owner connection needs no token, and a wrong one does not cost it the update.
        #expect(rig.update(s.id, by: 1, token: "stale") == .success(3))
    }

    @Test func resumeMovesOwnerRights() {
        var rig = PanicRig()
        let s = rig.start(owner: 1)
        #expect(rig.hub.resume(s.id, by: 5, ownerToken: "wrong", secrets: rig.secrets).failure == .forbidden)
        #expect(rig.hub.resume(s.id, by: 5, ownerToken: s.watch[0], secrets: rig.secrets).failure == .forbidden)
        let resumed = try! rig.hub.resume(s.id, by: 5, ownerToken: s.owner, secrets: rig.secrets).get()
        #expect(resumed.owner == 5 && resumed.seq == 1)
        #expect(rig.update(s.id, by: 1).failure == .forbidden)            // old connection: no token-less rights
        #expect(rig.update(s.id, by: 5) == .success(2))                   // new owner needs no token
        #expect(rig.update(s.id, by: 1, token: s.owner) == .success(3))   // the token still works from anywhere
        #expect(rig.update(s.id, by: 9, token: s.owner) == .success(4))
        // Counts go to the new owner; the old connection's disconnect touches nothing.
        rig.watch(s.id, 10, s.watch[0])
        #expect(rig.take().map(\.recipients) == [[5]])
        rig.hub.disconnected(1, out: &rig.out)
        #expect(rig.out.isEmpty && rig.hub.stream(s.id)!.owner == 5)
        // Resuming where it already is changes nothing.
        #expect(rig.hub.resume(s.id, by: 5, ownerToken: s.owner, secrets: rig.secrets).ok)
        #expect(rig.hub.stream(s.id)!.owner == 5)
    }

    @Test func resumeWorksOnAnEndedStreamInGrace() {
        var rig = PanicRig()
        let s = rig.start(owner: 1)
        rig.end(s.id)
        rig.hub.disconnected(1, out: &rig.out)
        let r = try! rig.hub.resume(s.id, by: 2, ownerToken: s.owner, secrets: rig.secrets).get()
        #expect(r.ended?.reason == .safe && r.owner == 2)
    }

    @Test func inviteIssuesAWorkingTokenUpToTheLimit() {
        var rig = PanicRig(PanicSettings(maxWatchTokens: 3))
        let s = rig.start(watchers: 2)
        let t3 = try! rig.invite(s.id).get()
        #expect(t3.utf8.count == 43 && !s.watch.contains(t3))
        #expect(rig.watch(s.id, 10, t3).ok)
        #expect(rig.invite(s.id).failure == .tooManyWatchTokens)
        #expect(rig.invite(s.id, by: 2).failure == .forbidden)
        #expect(rig.revoke(s.id, s.watch[0]).ok)
        #expect(rig.invite(s.id, by: 2, token: s.owner).ok)           // a freed slot, by token from elsewhere
        #expect(rig.invite(s.id).failure == .tooManyWatchTokens)
    }

    @Test func revokeCutsOnlyTheWatchersOfThatToken() {
        var rig = PanicRig()
        let s = rig.start(watchers: 2)
        rig.watch(s.id, 12, s.watch[0])
        rig.watch(s.id, 10, s.watch[0])      // the same contact on a second device
        rig.watch(s.id, 11, s.watch[1])
        rig.update(s.id)
        _ = rig.take()
        #expect(rig.revoke(s.id, s.watch[0]).ok)
        let out = rig.take()
        #expect(out.map(\.kind) == [.revoked, .watchers(count: 1)])
        #expect(out.map(\.recipients) == [[10, 12], [1]])
        #expect(rig.hub.stream(s.id)!.watchTokens.count == 1)
        rig.update(s.id)
        #expect(rig.take().map(\.recipients) == [[11]])
        #expect(rig.watch(s.id, 10, s.watch[0]).failure == .forbidden)
        #expect(rig.watch(s.id, 13, s.watch[0], since: 1).failure == .forbidden)
        #expect(rig.watch(s.id, 13, s.watch[1]).ok)
        // Revoking again, or a token never issued: nothing happens, and the caller is told so.
        _ = rig.take()
        #expect(rig.revoke(s.id, s.watch[0]) == .success(.notLive))
        #expect(rig.revoke(s.id, "never-issued") == .success(.notLive))
        #expect(rig.out.isEmpty)
        #expect(rig.revoke(s.id, by: 11, s.watch[1]).failure == .forbidden)   // a watcher cannot revoke
    }

    @Test func revokeOfAnUnusedTokenSendsNothingButKillsIt() {
        var rig = PanicRig()
        let s = rig.start(watchers: 2)
        rig.watch(s.id, 10, s.watch[0])
        _ = rig.take()
        #expect(rig.revoke(s.id, s.watch[1]) == .success(.revoked), "a live token nobody watches with still dies")
        #expect(rig.out.isEmpty)
        #expect(rig.watch(s.id, 11, s.watch[1]).failure == .forbidden)
    }

    @Test func revokeWorksDuringGrace() {
        var rig = PanicRig()
        let s = rig.start(watchers: 1)
        rig.end(s.id)
        rig.watch(s.id, 10, s.watch[0])
        _ = rig.take()
        #expect(rig.revoke(s.id, s.watch[0]).ok)
        #expect(rig.take().map(\.kind) == [.revoked, .watchers(count: 0)])
    }

    @Test func wrongTokenAndUnknownStreamAreTheSameForbidden() {
        var rig = PanicRig()
        let s = rig.start(owner: 1)
        let unknown = StreamID(high: 42, low: 42)
        for id in [s.id, unknown] {
            let by: WatcherID = id == s.id ? 2 : 1        // on the real stream, a non-owner
            #expect(rig.update(id, by: by, token: "x").failure == .forbidden)
            #expect(rig.status(id, by: by, token: "x", .amber).failure == .forbidden)
            #expect(rig.end(id, by: by, token: "x").failure == .forbidden)
            #expect(rig.invite(id, by: by, token: "x").failure == .forbidden)
            #expect(rig.revoke(id, by: by, token: "x", s.watch[0]).failure == .forbidden)
            #expect(rig.watch(id, 10, "x").failure == .forbidden)
            #expect(rig.hub.resume(id, by: by, ownerToken: "x", secrets: rig.secrets).failure == .forbidden)
        }
        #expect(rig.watch(unknown, 10, s.watch[0]).failure == .forbidden)     // a real token, another stream
        #expect(rig.watch(s.id, 10, s.owner).failure == .forbidden)           // the owner token does not watch
        #expect(rig.update(unknown, by: 1, token: s.owner).failure == .forbidden)
        #expect(rig.out.isEmpty && rig.hub.watcherCount(s.id) == 0)
    }

    @Test func historyWindowReplaysExactlyOrReportsAGap() {
        var rig = PanicRig(PanicSettings(historyEvents: 5))
        let s = rig.start()
        for i in 2...8 { rig.update(s.id, Double(i), now: Int64(i)) }      // seq 8; holds 4...8
        let inside = try! rig.watch(s.id, 10, s.watch[0], since: 3).get()
        #expect(!inside.gap && inside.events.map(\.seq) == [4, 5, 6, 7, 8] && inside.replay == 4...8)
        #expect(inside.events == rig.hub.stream(s.id)!.events(after: 3))
        #expect(inside.events.first == PanicEvent(seq: 4, at: 4, kind: .location(PanicRig.at(4))))
        let tail = try! rig.watch(s.id, 11, s.watch[0], since: 6).get()
        #expect(!tail.gap && tail.events.map(\.seq) == [7, 8])
        let old = try! rig.watch(s.id, 12, s.watch[0], since: 2).get()
        #expect(old.gap && old.events.isEmpty && old.stream.seq == 8)
        let zero = try! rig.watch(s.id, 13, s.watch[0], since: 0).get()
        #expect(zero.gap && zero.events.isEmpty)
        let current = try! rig.watch(s.id, 14, s.watch[0], since: 8).get()
        #expect(!current.gap && current.events.isEmpty && current.replay == nil)
        #expect(old.replay == nil && zero.replay == nil)
        // One event at a time, as the server replays: exactly the held seqs.
        let stream = rig.hub.stream(s.id)!
        #expect((4...8).map { stream.event(seq: $0)?.seq } == [4, 5, 6, 7, 8])
        #expect(stream.event(seq: 3) == nil && stream.event(seq: 9) == nil && stream.event(seq: 0) == nil)
        let fresh = try! rig.watch(s.id, 15, s.watch[0]).get()
        #expect(!fresh.gap && fresh.events.isEmpty)
        #expect(rig.watch(s.id, 16, s.watch[0], since: 9).failure == .sinceAhead)
        #expect(rig.hub.watcherCount(s.id) == 6)     // 16 was refused and is not subscribed
        #expect(rig.hub.stream(s.id)!.trail.map(\.seq) == [4, 5, 6, 7, 8])
    }

    @Test func staleFiresExactlyAtTheDeadlineOnceAndIsReArmedByALocation() {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000))
        let s = rig.start(now: 0)
        rig.watch(s.id, 10, s.watch[0])
        _ = rig.take()
        rig.tick(999)
        #expect(rig.out.isEmpty)
        rig.tick(1_000)
        #expect(rig.take().map(\.kind) == [.stale(since: 0)])
        rig.tick(50_000)
        #expect(rig.out.isEmpty)
        rig.status(s.id, .amber, now: 50_001)               // a status does not end the silence
        _ = rig.take()
        rig.tick(60_000)
        #expect(rig.out.isEmpty)
        rig.update(s.id, now: 60_000)
        _ = rig.take()
        rig.tick(60_999)
        #expect(rig.out.isEmpty)
        rig.tick(61_000)
        let out = rig.take()
        #expect(out.map(\.kind) == [.stale(since: 60_000)] && out[0].recipients == [10] && out[0].stream == s.id)
        #expect(rig.hub.nextDeadline == 86_400_000, "no stale entry left; the abandonment entry filed at the start")
    }

    @Test func aLocationBeforeTheDeadlinePostponesIt() {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000))
        let s = rig.start(now: 0)
        rig.watch(s.id, 10, s.watch[0])
        rig.update(s.id, now: 400)
        rig.update(s.id, now: 700)
        _ = rig.take()
        rig.tick(1_000)
        rig.tick(1_699)
        #expect(rig.out.isEmpty)
        #expect(rig.hub.nextDeadline == 1_700)
        rig.tick(1_700)
        #expect(rig.take().map(\.kind) == [.stale(since: 700)])
    }

    @Test func noStaleForEndedStreamsAndNoneLostWithoutWatchers() {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000))
        let ended = rig.start(now: 0)
        rig.watch(ended.id, 10, ended.watch[0])
        rig.end(ended.id, now: 10)
        let quiet = rig.start(now: 0)                          // nobody watching when it goes stale
        _ = rig.take()
        rig.tick(5_000)
        #expect(rig.out.isEmpty)
        #expect(rig.hub.stream(quiet.id)!.staleNotified)
        rig.watch(quiet.id, 11, quiet.watch[0])
        _ = rig.take()
        rig.tick(6_000)
        #expect(rig.out.isEmpty)                               // once per silence, watched or not
    }

    /// Every removal reaches the tick's `removed` list once (the server journals each), also
    /// one made by a `start` that needed the room, and a tick without the list drops them.
    @Test func removalsAreReportedOnceByTheNextTick() {
        var rig = PanicRig(PanicSettings(endedGraceMs: 100, maxStreams: 2))
        let a = rig.start(owner: 1, now: 0), b = rig.start(owner: 2, now: 0)
        rig.end(a.id, now: 1_000)
        rig.end(b.id, by: 2, now: 1_050)
        var removed: [StreamID] = []
        rig.hub.tick(now: 1_099, out: &rig.out, removed: &removed)
        #expect(removed.isEmpty)
        rig.hub.tick(now: 1_100, out: &rig.out, removed: &removed)
        #expect(removed == [a.id])
        // At capacity, a start removes `b` (its grace over) before the tick does.
        let c = rig.start(owner: 3, now: 1_150)
        #expect(rig.hub.stream(b.id) == nil)
        removed = []
        rig.hub.tick(now: 1_150, out: &rig.out, removed: &removed)
        #expect(removed == [b.id])
        removed = []
        rig.hub.tick(now: 1_200, out: &rig.out, removed: &removed)
        #expect(removed.isEmpty)
        rig.end(c.id, by: 3, now: 1_200)
        rig.hub.tick(now: 1_300, out: &rig.out)                  // reported to nobody, and not again
        rig.hub.tick(now: 1_301, out: &rig.out, removed: &removed)
        #expect(removed.isEmpty && rig.hub.count == 0)
    }

    @Test func endedStreamIsRemovedExactlyAtGraceAndItsTokensDie() {
        var rig = PanicRig(PanicSettings(endedGraceMs: 100))
        let s = rig.start(owner: 1, now: 0)
        rig.watch(s.id, 10, s.watch[0])
        rig.end(s.id, now: 1_000)
        _ = rig.take()
        rig.tick(1_099)
        #expect(rig.hub.stream(s.id) != nil && rig.watch(s.id, 11, s.watch[1]).ok)
        _ = rig.take()
        rig.tick(1_100)
        #expect(rig.out.isEmpty)
        #expect(rig.hub.stream(s.id) == nil && rig.hub.count == 0 && rig.hub.watcherCount(s.id) == 0)
        #expect(rig.watch(s.id, 12, s.watch[0]).failure == .forbidden)
        #expect(rig.hub.resume(s.id, by: 1, ownerToken: s.owner, secrets: rig.secrets).failure == .forbidden)
        #expect(rig.revoke(s.id, s.watch[0]).failure == .forbidden)
        // Nothing of it is left in the connection indexes.
        rig.hub.disconnected(10, out: &rig.out)
        rig.hub.disconnected(1, out: &rig.out)
        rig.hub.unwatch(s.id, watcher: 11, out: &rig.out)
        #expect(rig.out.isEmpty)
        rig.tick(120_000)                                      // the lazy stale entry of the gone stream
        #expect(rig.hub.nextDeadline == 86_400_000)            // and its abandonment entry, filed at the start
        rig.tick(86_400_000)
        #expect(rig.hub.nextDeadline == nil && rig.out.isEmpty)
    }

    @Test func theOwnerHearsEveryChangeInTheNumberOfWatchingConnections() {
        var rig = PanicRig()
        let s = rig.start(owner: 1, watchers: 2)
        rig.watch(s.id, 10, s.watch[0])
        rig.watch(s.id, 11, s.watch[1])
        rig.watch(s.id, 10, s.watch[1])                        // re-watch: same count, nothing
        rig.watch(s.id, 12, s.watch[0])
        rig.hub.unwatch(s.id, watcher: 11, out: &rig.out)
        rig.hub.unwatch(s.id, watcher: 11, out: &rig.out)      // not watching: nothing
        rig.hub.disconnected(12, out: &rig.out)
        rig.revoke(s.id, s.watch[1])                           // 10 moved to watch[1]
        let out = rig.take()
        #expect(out.map(\.kind) == [.watchers(count: 1), .watchers(count: 2), .watchers(count: 3), .watchers(count: 2),
                                    .watchers(count: 1), .revoked, .watchers(count: 0)])
        #expect(out.filter { $0.kind != .revoked }.allSatisfy { $0.recipients == [1] })
        #expect(rig.hub.watcherCount(s.id) == 0)
    }

    @Test func ownerDisconnectLeavesTheStreamActiveAndOwnerless() {
        var rig = PanicRig(PanicSettings(staleAfterMs: 1_000))
        let s = rig.start(owner: 1)
        rig.watch(s.id, 1, s.watch[0])                         // the owner's connection also watches
        rig.watch(s.id, 10, s.watch[1])
        _ = rig.take()
        rig.hub.disconnected(1, out: &rig.out)
        #expect(rig.out.isEmpty)                               // no owner left to tell
        let st = rig.hub.stream(s.id)!
        #expect(st.isActive && st.owner == nil && rig.hub.watcherCount(s.id) == 1)
        rig.tick(86_399_999)                                   // silent a day less a millisecond: not abandoned
        #expect(rig.hub.stream(s.id)?.isActive == true)
        #expect(rig.take().map(\.kind) == [.stale(since: 0)])
        #expect(rig.update(s.id, by: 1).failure == .forbidden) // a new connection 1 is nobody
        #expect(rig.update(s.id, by: 1, token: s.owner) == .success(2))
        #expect(rig.take().map(\.recipients) == [[10]])
        #expect(rig.hub.resume(s.id, by: 3, ownerToken: s.owner, secrets: rig.secrets).ok)
        rig.hub.disconnected(10, out: &rig.out)
        #expect(rig.take().map(\.kind) == [.watchers(count: 0)])
    }

    @Test func watcherDisconnectUnsubscribesFromEveryStream() {
        var rig = PanicRig()
        let a = rig.start(owner: 1)
        let b = rig.start(owner: 2)
        rig.watch(a.id, 10, a.watch[0])
        rig.watch(b.id, 10, b.watch[0])
        rig.watch(b.id, 11, b.watch[1])
        _ = rig.take()
        rig.hub.disconnected(10, out: &rig.out)
        let out = rig.take()
        #expect(Set(out.map(\.recipients)) == [[1], [2]])
        #expect(out.first { $0.stream == b.id }?.kind == .watchers(count: 1))
        rig.update(a.id, by: 1)
        rig.update(b.id, by: 2)
        #expect(rig.take().map(\.recipients) == [[11]])
    }

    @Test func capacityLimits() {
        var rig = PanicRig(PanicSettings(endedGraceMs: 100, maxStreams: 2, maxWatchersOnStart: 4))
        let a = rig.start(now: 0)
        _ = rig.start(now: 0)
        let third = rig.hub.start(owner: 3, status: .red, location: PanicRig.at(0), note: nil, watchers: 1,
                                  secrets: rig.secrets, now: 0, out: &rig.out)
        #expect(third.failure == .capacityExceeded)
        rig.end(a.id, now: 10)
        let inGrace = rig.hub.start(owner: 3, status: .red, location: PanicRig.at(0), note: nil, watchers: 1,
                                    secrets: rig.secrets, now: 109, out: &rig.out)
        #expect(inGrace.failure == .capacityExceeded)          // an ended stream holds its place in grace
        let afterGrace = rig.hub.start(owner: 3, status: .red, location: PanicRig.at(0), note: nil, watchers: 1,
                                       secrets: rig.secrets, now: 110, out: &rig.out)
        #expect(afterGrace.ok && rig.hub.count == 2 && rig.hub.stream(a.id) == nil)
        let tooMany = rig.hub.start(owner: 3, status: .red, location: PanicRig.at(0), note: nil, watchers: 5,
                                    secrets: rig.secrets, now: 0, out: &rig.out)
        #expect(tooMany.failure == .tooManyWatchTokens)
    }

    @Test func startBeyondMaxWatchTokensIsRefused() {
        var rig = PanicRig(PanicSettings(maxWatchTokens: 2, maxWatchersOnStart: 16))
        let r = rig.hub.start(owner: 1, status: .red, location: PanicRig.at(0), note: nil, watchers: 3,
                              secrets: rig.secrets, now: 0, out: &rig.out)
        #expect(r.failure == .tooManyWatchTokens && rig.hub.count == 0)
    }
}

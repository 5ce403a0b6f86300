import Foundation
import Testing
@testable import VigilClient

// What a reconnect restores, with scripted server replies: the map subscription and its pin set
// reconciled, a watch from its last seq (exactly once, in order, or a gap), an owner resumed
// with its token, the clusters view. (Twins of reconnect.test.js and models.test.js.)

func pin(_ id: String, lat: Double = 40.5, lon: Double = 10.5, up: Int = 0, updated: Int = 1, range: Int? = nil) -> JSONValue {
    var o: JSONObject = ["id": .string(id), "lat": .number(lat), "lon": .number(lon), "title": .string(id), "description": "",
                         "category": "general", "created_at": 1_795_000_000_000, "updated_at": .number(Double(updated)),
                         "expires_at": 1_795_014_400_000, "up": .number(Double(up)), "down": 0]
    if let range { o["range_m"] = .number(Double(range)) }
    return .object(o)
}

func panicState(_ stream: String, seq: Int, status: String = "red", trail: [Int] = []) -> JSONValue {
    ["stream": .string(stream), "status": .string(status), "started_at": 1000, "updated_at": 2000, "seq": .number(Double(seq)),
     "last": ["lat": 1, "lon": 2, "at": 2000],
     "trail": .array(trail.map { ["seq": .number(Double($0)), "lat": 1, "lon": 2, "at": 1000] })]
}

func location(_ stream: String, _ seq: Int) -> JSONObject {
    ["type": "panic.location", "stream": .string(stream), "seq": .number(Double(seq)), "lat": 1, "lon": .number(Double(seq)), "at": 5]
}

extension MapEvent {
    var summary: String {
        switch self {
        case .added(let p): "added \(p.id)"
        case .updated(let p): "updated \(p.id)"
        case .removed(let p, let r): "removed \(p.id) \(r)"
        case .synced(let n, let t, let r): "synced \(n) \(t) \(r)"
        case .error(let e): "error \(e.code)"
        }
    }
}

extension WatchEvent {
    var seq: Int? {
        switch self {
        case .location(let e): e.seq
        case .status(let e): e.seq
        case .timer(let e): e.seq
        case .ended(let e): e.seq
        default: nil
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct RestoreTests {
    @Test func aSubscriberReSubscribesAfterAReconnectAndItsPinSetIsReconciled() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let subscribing = c.subscribe(area: .bbox(south: 40, west: 10, north: 41, east: 11), categories: ["general"], viewer: Coordinate(lat: 40.5, lon: 10.5))
        let sub = try await conn.expect("subscribe")
        #expect(sub["categories"] == ["general"])
        #expect(sub["viewer"] == ["lat": 40.5, "lon": 10.5])
        conn.ok(sub, ["pins": [pin("A"), pin("B")]])
        let map = try await subscribing
        let events = Reader(map.events)
        var seen: [String] = []
        for _ in 0..<3 { seen.append(await events.next()!.summary) }
        #expect(seen == ["added A", "added B", "synced 2 false false"])
        conn.push(["type": "pin.added", "pin": pin("C")])
        #expect(await events.next()?.summary == "added C")

        // While away: A deleted, C expired, B voted on, D created.
        let back = try await cutAndReconnect(c, conn, server, clock)
        let again = try await back.expect("subscribe")
        #expect(again["area"] == sub["area"] && again["viewer"] == sub["viewer"])
        back.ok(again, ["pins": [pin("D"), pin("B", up: 1, updated: 2)]])
        seen = []
        for _ in 0..<5 { seen.append(await events.next()!.summary) }
        #expect(seen == ["removed A reconciled", "removed C reconciled", "added D", "updated B", "synced 2 false true"])
        #expect(Set(await map.pins().map(\.id)) == ["B", "D"])
        #expect(await map.pins().first { $0.id == "B" }?.up == 1)
        // Live again.
        back.push(["type": "pin.removed", "pin": pin("D"), "reason": "flagged"])
        back.push(["type": "pin.expired", "pin": pin("B")])
        #expect(await events.next()?.summary == "removed D flagged")
        #expect(await events.next()?.summary == "removed B expired")
        await c.close()
        #expect(await events.next() == nil, "finished at close")
    }

    @Test func mapEventsAddUpdateRemoveAndAPanReconciles() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let subscribing = c.subscribe(area: .circle(lat: 30.5, lon: 30.5, radiusMeters: 2000))
        let sub = try await conn.expect("subscribe")
        #expect(sub["area"] == ["center": ["lat": 30.5, "lon": 30.5], "radius_m": 2000])
        conn.ok(sub, ["pins": [pin("before")]])
        let map = try await subscribing
        let events = Reader(map.events)
        _ = await events.next(where: { if case .synced = $0 { true } else { false } })
        conn.push(["type": "pin.added", "pin": pin("new", range: 1500)])
        conn.push(["type": "pin.updated", "pin": pin("before", updated: 5)])
        conn.push(["type": "pin.removed", "pin": pin("before"), "reason": "deleted"])
        conn.push(["type": "pin.removed", "pin": pin("never-seen"), "reason": "moved"])
        conn.push(["type": "pin.added", "pin": ["id": "broken"]])
        #expect(await events.next()?.summary == "added new")
        #expect(await map.pins().first?.rangeM == 1500)
        #expect(await events.next()?.summary == "updated before")
        #expect(await events.next()?.summary == "removed before deleted")
        #expect(await events.next()?.summary == "error bad_message", "a pin that is not one is an error event")
        // A pan: the new reply replaces the set.
        async let moving: Void = map.update(area: .bbox(south: 0, west: 0, north: 1, east: 1))
        let pan = try await conn.expect("subscribe")
        conn.ok(pan, ["pins": [pin("far")], "truncated": true])
        try await moving
        #expect(await events.next()?.summary == "removed new reconciled")
        #expect(await events.next()?.summary == "added far")
        #expect(await events.next()?.summary == "synced 1 true false")
        #expect(Pin(id: "x", lat: 0, lon: 0, title: "", description: "", category: "", createdAt: 0, updatedAt: 0, expiresAt: 10_000, up: 0, down: 0)
            .timeLeft(nowMs: 8500) == .milliseconds(1500))
        await c.close()
    }

    @Test func clustersViewSnapshotAndChangesAcrossAReconnect() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let subscribing = c.subscribeClusters(area: .bbox(south: 47.3, west: 5.9, north: 55, east: 15), categories: ["hazard"])
        let sub = try await conn.expect("subscribe")
        #expect(sub["view"] == "clusters")
        conn.ok(sub, ["precision": 3, "clusters": [["cell": "u33", "count": 2, "by_category": ["hazard": 2], "lat": 52.5, "lon": 13.4]]])
        let view = try await subscribing
        let events = Reader(view.events)
        guard case .snapshot(let v, false)? = await events.next() else { Issue.record("no snapshot"); return }
        #expect(v.precision == 3 && v.clusters.first?.byCategory == ["hazard": 2])
        conn.push(["type": "clusters.changed", "precision": 3, "cells": [["cell": "u33", "count": 0], ["cell": "u0y", "count": 1]]])
        guard case .changed(3, let cells)? = await events.next() else { Issue.record("no change"); return }
        #expect(cells.map(\.count) == [0, 1])
        #expect(await view.cells().cells.map(\.cell) == ["u0y"])
        let back = try await cutAndReconnect(c, conn, server, clock)
        let again = try await back.expect("subscribe")
        #expect(again["view"] == "clusters")
        back.ok(again, ["precision": 3, "clusters": []])
        guard case .snapshot(_, true)? = await events.next() else { Issue.record("no resubscribe"); return }
        #expect(await view.cells().cells.isEmpty)
        await c.close()
    }

    @Test func aWatcherGetsEveryEventExactlyOnceAndInOrderAcrossReconnects() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let watching = c.watch(stream: "S", watchToken: "W")
        let first = try await conn.expect("panic.watch")
        #expect(first["watch_token"] == "W" && first["since"] == nil)
        conn.ok(first, ["state": panicState("S", seq: 1, trail: [1])])
        let watch = try await watching
        let events = Reader(watch.events)
        guard case .state(let s, false)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.seq == 1 && s.trail.count == 1)
        for seq in 2...4 { conn.push(location("S", seq)) }
        conn.push(location("S", 3))  // a duplicate
        var seqs: [Int] = []
        for _ in 2...4 { seqs.append(await events.next()?.seq ?? -1) }

        let back = try await cutAndReconnect(c, conn, server, clock)
        let rewatch = try await back.expect("panic.watch")
        #expect(rewatch["since"] == 4, "since = the last seq delivered")
        // Events behind the reply before it came are ignored (they come again with the replay).
        back.push(location("S", 7))
        back.ok(rewatch, ["state": panicState("S", seq: 6)])
        for seq in 3...6 { back.push(location("S", seq)) }  // the replay, from since (one repeated)
        back.push(["type": "panic.status", "stream": "S", "seq": 7, "status": "amber", "at": 9])
        back.push(["type": "panic.timer", "stream": "S", "seq": 8, "due_at": 99, "at": 9])
        back.push(["type": "panic.stale", "stream": "S", "last_location_at": 5, "at": 10])
        back.push(["type": "panic.ended", "stream": "S", "seq": 9, "reason": "safe", "at": 11])
        guard case .state(_, false)? = await events.next() else { Issue.record("no re-watch state"); return }
        for _ in 5...8 { seqs.append(await events.next()?.seq ?? -1) }
        guard case .stale(let stale)? = await events.next() else { Issue.record("no stale"); return }
        #expect(stale.lastLocationAt == 5)
        guard case .ended(let end)? = await events.next() else { Issue.record("no end"); return }
        seqs.append(end.seq)
        #expect(seqs == Array(2...9), "seqs 2…9 once each, in order")
        #expect(await events.next() == nil, "nothing follows the end")
        #expect(await watch.lastSeq() == 9)
        // Ended: not watched again at the next reconnect.
        let third = try await cutAndReconnect(c, back, server, clock)
        async let barrier = c.request("unsubscribe")
        let m = try await third.next()
        #expect(m["op"] == "unsubscribe")
        third.ok(m)
        _ = try await barrier
        await c.close()
    }

    @Test func aWatcherThatMissedMoreThanTheServerHoldsIsToldWithGap() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let watching = c.watch(stream: "S", watchToken: "W", since: 0)
        let first = try await conn.expect("panic.watch")
        #expect(first["since"] == 0)
        conn.ok(first, ["state": panicState("S", seq: 1)])
        conn.push(location("S", 1))
        let watch = try await watching
        let events = Reader(watch.events)
        _ = await events.next()
        #expect(await events.next()?.seq == 1)
        let back = try await cutAndReconnect(c, conn, server, clock)
        let rewatch = try await back.expect("panic.watch")
        #expect(rewatch["since"] == 1)
        back.ok(rewatch, ["state": panicState("S", seq: 7), "gap": true])
        guard case .gap(let state, let last)? = await events.next() else { Issue.record("no gap"); return }
        #expect(last == 1 && state.seq == 7)
        guard case .state(_, true)? = await events.next() else { Issue.record("no state"); return }
        back.push(location("S", 8))
        #expect(await events.next()?.seq == 8)
        await c.close()
    }

    @Test func aHoleOnALiveConnectionIsFilledWithSince() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let watching = c.watch(stream: "S", watchToken: "W")
        let first = try await conn.expect("panic.watch")
        conn.ok(first, ["state": panicState("S", seq: 41)])
        let watch = try await watching
        let events = Reader(watch.events)
        _ = await events.next()
        conn.push(location("S", 42))
        conn.push(location("S", 57))  // conflated: 43…56 missing
        conn.push(location("S", 58))
        #expect(await events.next()?.seq == 42)
        let again = try await conn.expect("panic.watch")
        #expect(again["since"] == 42)
        conn.ok(again, ["state": panicState("S", seq: 58)])
        for seq in 43...58 { conn.push(location("S", seq)) }
        _ = await events.next()  // the state
        var seqs: [Int] = []
        for _ in 43...58 { seqs.append(await events.next()?.seq ?? -1) }
        #expect(seqs == Array(43...58))
        await c.close()
    }

    @Test func aFirstWatchCutOffBeforeItsReplyIsAnsweredAfterTheReconnect() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let watching = c.watch(stream: "S", memberToken: "M")
        let m = try await conn.expect("panic.watch")
        #expect(m["member_token"] == "M")
        let back = try await cutAndReconnect(c, conn, server, clock)
        let again = try await back.expect("panic.watch")
        #expect(again["since"] == nil, "still the first watch")
        back.ok(again, ["state": panicState("S", seq: 1)])
        let watch = try await watching
        #expect(await watch.lastSeq() == 1)
        back.push(location("S", 2))
        let events = Reader(watch.events)
        _ = await events.next()
        #expect(await events.next()?.seq == 2)
        await c.close()
    }

    @Test func aRevokedWatchEnds() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let watching = c.watch(stream: "S", watchToken: "W")
        let m = try await conn.expect("panic.watch")
        conn.ok(m, ["state": panicState("S", seq: 1)])
        let watch = try await watching
        let events = Reader(watch.events)
        _ = await events.next()
        conn.push(["type": "panic.revoked", "stream": "S"])
        #expect(await events.next() == .revoked)
        #expect(await events.next() == nil)
        #expect(await watch.isActive() == false)
        await c.close()
    }

    @Test(.timeLimit(.minutes(1))) func aStreamThatEndedBeforeItsFirstWatchEndsTheWatchAfterItsState() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let watching = c.watch(stream: "S", watchToken: "W")
        let m = try await conn.expect("panic.watch")
        guard case .object(var state) = panicState("S", seq: 3) else { Issue.record("no state"); return }
        state["ended"] = ["reason": "safe", "at": 3000]
        conn.ok(m, ["state": .object(state)])
        let watch = try await watching
        let events = Reader(watch.events)
        guard case .state(let s, _)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.ended?.reason == "safe")
        #expect(await events.next() == nil)
        #expect(await watch.isActive() == false)
        await c.close()
    }

    @Test func anOwnerIsResumedWithItsTokenAfterAReconnect() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let starting = c.startPanic(status: .red, position: Position(lat: 52.5, lon: 13.4, accuracyM: 5), note: "walking", watchers: 2)
        let start = try await conn.expect("panic.start")
        #expect(start["status"] == "red" && start["watchers"] == 2 && start["accuracy_m"] == 5 && start["note"] == "walking")
        conn.ok(start, ["stream": "S", "seq": 1, "owner_token": "O", "watch_tokens": ["w1", "w2"]])
        conn.push(["type": "panic.watchers", "stream": "S", "count": 1])
        let owner = try await starting
        let events = Reader(owner.events)
        #expect(await events.next() == .watchers(1))
        #expect(await owner.snapshot()?.watchTokens == ["w1", "w2"])

        async let updating = owner.update(Position(lat: 52.51, lon: 13.4, heading: 400))
        let up = try await conn.expect("panic.update")
        #expect(up["owner_token"] == "O" && up["stream"] == "S" && up["heading"] == nil)
        conn.ok(up, ["seq": 2])
        #expect(try await updating == 2)

        let back = try await cutAndReconnect(c, conn, server, clock)
        let resume = try await back.expect("panic.resume")
        #expect(resume["owner_token"] == "O" && resume["stream"] == "S")
        var state = panicState("S", seq: 5, status: "amber").objectValue!
        state["timer"] = ["due_at": 777]
        back.ok(resume, ["state": .object(state)])
        guard case .resumed(let s)? = await events.next() else { Issue.record("not resumed"); return }
        #expect(s.seq == 5)
        let snap = await owner.snapshot()
        #expect(snap?.status == .amber && snap?.seq == 5 && snap?.dueAt == 777)
        await c.close()
    }

    @Test func theSafetyTimerOpsAndTheMissedCheckIn() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let starting = c.startPanic(status: .amber, position: Position(lat: 20, lon: 20), dueIn: .seconds(600))
        let start = try await conn.expect("panic.start")
        #expect(start["due_in_s"] == 600)
        conn.ok(start, ["stream": "S", "seq": 1, "owner_token": "O", "watch_tokens": ["w"], "due_at": 5000])
        let owner = try await starting
        #expect(await owner.snapshot()?.dueAt == 5000)
        async let moving = owner.setTimer(dueAt: 9000)
        let t = try await conn.expect("panic.timer")
        #expect(t["due_at"] == 9000)
        conn.ok(t, ["seq": 2, "due_at": 9000])
        #expect(try await moving == 9000)
        async let cancelling: Void = owner.cancelTimer()
        let cancel = try await conn.expect("panic.timer")
        #expect(cancel["cancel"] == true)
        conn.ok(cancel, ["seq": 3, "due_at": nil])
        try await cancelling
        #expect(await owner.snapshot()?.dueAt == nil)
        async let again = owner.setTimer(dueIn: .seconds(60))
        let t2 = try await conn.expect("panic.timer")
        #expect(t2["due_in_s"] == 60)
        conn.ok(t2, ["seq": 4, "due_at": 65000])
        _ = try await again
        conn.push(["type": "panic.status", "stream": "S", "seq": 5, "status": "red", "reason": "missed_check_in", "due_at": 65000,
                   "last": ["lat": 21, "lon": 22, "accuracy_m": 7, "at": 60000], "at": 65000, "sent_at": 65020])
        let events = Reader(owner.events)
        guard case .missedCheckIn(let e)? = await events.next() else { Issue.record("no missed check-in"); return }
        #expect(e.sentAt == 65020 && e.last?.accuracyM == 7)
        let snap = await owner.snapshot()
        #expect(snap?.status == .red && snap?.dueAt == nil && snap?.escalated == Escalation(reason: "missed_check_in", at: 65000, sentAt: 65020))
        async let ending = owner.end("safe")
        let end = try await conn.expect("panic.end")
        #expect(end["reason"] == "safe")
        conn.ok(end, ["seq": 6])
        #expect(try await ending == 6)
        #expect(await events.next() == nil, "the owner's events finish with the end")
        await c.close()
    }
}

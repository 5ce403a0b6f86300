import Foundation
import Testing
@testable import VigilClient

// Writes that are safe to retry: the outbox keeps writes made offline and writes whose
// connection dropped before the answer, in order, and sends them again on reconnect with the
// same `idem` key; each ends in its answer or a clear error (the bound, its timeout, close()).
// And the position follower's bounded rate (models.test.js's followPosition twin).

/// Cuts `conn` and waits until the client waits to reconnect (the backoff not yet passed).
func goOffline(_ c: VigilClient, _ conn: FakeConnection) async -> Duration {
    let events = Reader(await c.events())
    conn.cut()
    return await events.next(where: { $0.reconnecting != nil })?.reconnecting?.1 ?? .zero
}

/// Waits until `n` requests wait for the connection.
func waitQueued(_ c: VigilClient, _ n: Int) async {
    while await c.queuedCount < n { await Task.yield() }
}

@Suite(.timeLimit(.minutes(1)))
struct OutboxTests {
    @Test func writesMadeOfflineAreSentInOrderOnReconnectEachWithItsKey() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        let delay = await goOffline(c, conn)
        async let a = c.createPin(NewPin(lat: 1, lon: 2, title: "first", ttlSeconds: 60))
        await waitQueued(c, 1)
        async let b = c.vote(pin: "p", up: false)
        await waitQueued(c, 2)
        async let d = c.request("pin.delete", ["id": "q", "edit_token": "t"])
        await waitQueued(c, 3)
        #expect(conn.sent.drain().isEmpty)
        clock.advance(by: delay)
        let back = try await server.nextConnection()
        let m1 = try await back.expect("pin.create"), m2 = try await back.expect("pin.vote"), m3 = try await back.expect("pin.delete")
        #expect(m1["pin"]?["ttl_s"] == 60 && m2["value"] == -1)
        let keys = [m1, m2, m3].compactMap { $0["idem"]?.stringValue }
        #expect(keys.count == 3 && Set(keys).count == 3)
        back.ok(m1, ["pin": pin("p1"), "edit_token": "e"])
        back.ok(m2, ["pin": pin("p", up: 0)])
        back.ok(m3, ["id": "q"])
        #expect(try await a.pin.id == "p1")
        #expect(try await b.id == "p")
        #expect(try await d["id"] == "q")
        await c.close()
    }

    @Test func aWriteWhoseConnectionDroppedBeforeTheAnswerIsSentAgainWithTheSameKey() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let created = c.createPin(NewPin(lat: 1, lon: 2, title: "once"))
        async let read = outcome { () async throws(VigilError) -> JSONObject in try await c.request("unsubscribe") }
        let first = try await conn.expect("pin.create")
        _ = try await conn.expect("unsubscribe")
        let back = try await cutAndReconnect(c, conn, server, clock)
        guard case .failure(let e) = await read else { Issue.record("answered"); return }
        #expect(e.code == "disconnected", "a read in flight fails as in the JS client")
        let again = try await back.expect("pin.create")
        #expect(again["idem"] == first["idem"], "the same logical write, the same key")
        #expect(again["pin"] == first["pin"])
        // The server had applied it: it answers the repeat with the first answer.
        back.ok(again, ["pin": pin("p1"), "edit_token": "e", "repeat": true])
        #expect(try await created.editToken == "e")
        await c.close()
    }

    @Test func theOutboxIsBoundedAndEachWriteKeepsItsOwnTimeout() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client { $0.outboxLimit = 2 }
        let delay = await goOffline(c, conn)
        async let a = outcome { () async throws(VigilError) -> JSONObject in
            try await c.request("pin.delete", ["id": "a", "edit_token": "t"], timeout: .milliseconds(100))
        }
        await waitQueued(c, 1)
        async let b = c.request("pin.delete", ["id": "b", "edit_token": "t"], timeout: .seconds(30))
        await waitQueued(c, 2)
        do {
            _ = try await c.request("pin.delete", ["id": "c", "edit_token": "t"])
            Issue.record("a third write was taken")
        } catch {
            #expect(error.code == VigilError.Code.outboxFull)
        }
        // A read does not count against the outbox.
        async let r = c.request("unsubscribe")
        await waitQueued(c, 3)
        clock.advance(by: .milliseconds(100))
        guard case .failure(let e) = await a else { Issue.record("a was answered"); return }
        #expect(e.code == "timeout" && e.op == "pin.delete")
        #expect(e.idem?.count == 22, "the key, for a resend")
        clock.advance(by: delay)
        let back = try await server.nextConnection()
        let mb = try await back.expect("pin.delete")
        #expect(mb["id"] == "b", "the timed-out write is not sent")
        let mr = try await back.expect("unsubscribe")
        back.ok(mb, ["id": "b"])
        back.ok(mr)
        _ = try await b
        _ = try await r
        await c.close()
    }

    @Test func closeEndsEveryWriteInTheOutboxWithClosed() async throws {
        let (c, conn, _) = try await FakeServer().client()
        _ = await goOffline(c, conn)
        async let a = outcome { () async throws(VigilError) -> JSONObject in try await c.request("panic.end", ["stream": "s", "reason": "safe"]) }
        await waitQueued(c, 1)
        await c.close()
        guard case .failure(let e) = await a else { Issue.record("answered"); return }
        #expect(e.code == "closed" && e.op == "panic.end")
    }

    @Test func withoutKeysAWriteInFlightFailsWithDisconnectedAndAnOfflineOneIsStillSent() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client { $0.sendsIdempotencyKeys = false }
        async let flying = outcome { () async throws(VigilError) -> JSONObject in try await c.request("pin.vote", ["id": "a", "value": 1]) }
        let m = try await conn.expect("pin.vote")
        #expect(m["idem"] == nil)
        let delay = await goOffline(c, conn)
        guard case .failure(let e) = await flying else { Issue.record("answered"); return }
        #expect(e.code == "disconnected", "it may or may not have been applied: not sent again without a key")
        async let offline = c.request("pin.vote", ["id": "b", "value": 1])
        await waitQueued(c, 1)
        clock.advance(by: delay)
        let back = try await server.nextConnection()
        let again = try await back.expect("pin.vote")
        #expect(again["id"] == "b" && again["idem"] == nil)
        back.ok(again, ["pin": pin("b")])
        _ = try await offline
        await c.close()
    }

    @Test func aSubscribeOrWatchMadeWhileOfflineIsSentOnceNotAlsoByTheRestore() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        // Something to restore: the connection was open once.
        let delay = await goOffline(c, conn)
        async let subscribing = c.subscribe(area: .bbox(south: 1, west: 1, north: 2, east: 2))
        await waitQueued(c, 1)
        async let watching = c.watch(stream: "S", watchToken: "W")
        await waitQueued(c, 2)
        clock.advance(by: delay)
        let back = try await server.nextConnection()
        let sub = try await back.expect("subscribe")
        let watch = try await back.expect("panic.watch")
        back.ok(sub, ["pins": []])
        back.ok(watch, ["state": panicState("S", seq: 3)])
        _ = try await subscribing
        #expect(try await watching.lastSeq() == 3)
        async let barrier = c.request("unsubscribe")
        let u = try await back.next()
        #expect(u["op"] == "unsubscribe", "nothing was sent twice")
        back.ok(u)
        _ = try await barrier
        await c.close()
    }

    @Test func theOutboxGoesBeforeTheRestoreAndOwnerWritesCarryTheToken() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        async let starting = c.startPanic(status: .red, position: Position(lat: 1, lon: 2))
        let start = try await conn.expect("panic.start")
        let startKey = try #require(start["idem"]?.stringValue)
        conn.ok(start, ["stream": "S", "seq": 1, "owner_token": "O", "watch_tokens": ["w"]])
        let owner = try await starting
        let delay = await goOffline(c, conn)
        async let update = owner.update(Position(lat: 1.1, lon: 2))
        await waitQueued(c, 1)
        clock.advance(by: delay)
        let back = try await server.nextConnection()
        let up = try await back.expect("panic.update")
        let resume = try await back.expect("panic.resume")
        #expect(up["owner_token"] == "O" && up["idem"]?.stringValue != startKey)
        back.ok(resume, ["state": panicState("S", seq: 1)])
        back.ok(up, ["seq": 2])
        #expect(try await update == 2)
        #expect(await owner.snapshot()?.seq == 2)
        await c.close()
    }
}

/// A stream started on `conn` (stream S, owner token O).
func started(_ c: VigilClient, _ conn: FakeConnection) async throws -> PanicOwner {
    async let starting = c.startPanic(status: .red, position: Position(lat: 5, lon: 5))
    let start = try await conn.expect("panic.start")
    conn.ok(start, ["stream": "S", "seq": 1, "owner_token": "O", "watch_tokens": ["w"]])
    return try await starting
}

/// Waits until the follower took `n` positions from its feed.
func waitOffered(_ f: PositionFollower, _ n: Int) async {
    while await f.offered < n { await Task.yield() }
}

@Suite(.timeLimit(.minutes(1)))
struct FollowerTests {
    @Test func aFastFeedBecomesUpdatesAtMostOnePerIntervalTheNewestWinning() async throws {
        let (c, conn, clock) = try await FakeServer().client()
        let owner = try await started(c, conn)
        // The server answers every update at once.
        let answering = Task {
            var seq = 1
            while let m = try? await conn.expect("panic.update") {
                seq += 1
                conn.ok(m, ["seq": .number(Double(seq))])
            }
        }
        let (feed, positions) = AsyncStream<Position>.makeStream()
        let follower = owner.follow(feed, minInterval: .milliseconds(200))
        let results = Reader(follower.events)
        // 40 positions 20 ms apart (800 ms), the browser-like ones with accuracy and speed too.
        for i in 1...40 {
            positions.yield(i % 2 == 1 ? Position(lat: 5 + Double(i) / 1000, lon: 5)
                                       : Position(lat: 5 + Double(i) / 1000, lon: 5, accuracyM: 7, heading: nil, speedMps: 1.5))
            await waitOffered(follower, i)
            clock.advance(by: .milliseconds(20))
        }
        clock.advance(by: .milliseconds(200))
        var sent: [(Int, Position, Duration)] = []
        while let e = await results.next() {
            guard case .sent(let seq, let p, let at) = e else { Issue.record("\(e)"); break }
            sent.append((seq, p, at))
            if p.lat == 5.040 { break }
        }
        #expect(sent.first?.1.lat == 5.001, "the first goes at once")
        #expect(sent.first?.2 == .zero)
        #expect(sent.last?.1 == Position(lat: 5.040, lon: 5, accuracyM: 7, heading: nil, speedMps: 1.5), "the newest position is never lost")
        #expect(sent.map(\.0) == Array(2..<(2 + sent.count)))
        #expect(sent.count >= 3 && sent.count <= 1 + 1000 / 200, "\(sent.count) updates in 1 s")
        for i in 1..<sent.count { #expect(sent[i].2 - sent[i - 1].2 >= .milliseconds(200), "at least the interval apart") }
        await follower.stop()
        #expect(await results.next() == nil)
        answering.cancel()
        await c.close()
    }

    @Test func nothingIsSentWhileThePreviousUpdateIsUnanswered() async throws {
        let (c, conn, clock) = try await FakeServer().client { $0.requestTimeout = nil }
        let owner = try await started(c, conn)
        let (feed, positions) = AsyncStream<Position>.makeStream()
        let follower = owner.follow(feed, minInterval: .milliseconds(100))
        let results = Reader(follower.events)
        positions.yield(Position(lat: 1, lon: 1))
        let first = try await conn.expect("panic.update")
        for i in 2...5 {
            positions.yield(Position(lat: Double(i), lon: 1))
            await waitOffered(follower, i)
        }
        clock.advance(by: .seconds(5))
        #expect(conn.sent.drain().isEmpty, "the first is still unanswered")
        conn.error(first, "stream_ended")
        guard case .failed(let e, let p, _)? = await results.next() else { Issue.record("no failure"); return }
        #expect(e.code == "stream_ended" && p.lat == 1)
        let next = try await conn.expect("panic.update")
        #expect(next["lat"] == 5, "then the newest, at once: the interval has passed")
        conn.ok(next, ["seq": 2])
        guard case .sent(2, _, _)? = await results.next() else { Issue.record("not sent"); return }
        await follower.stop()
        positions.yield(Position(lat: 9, lon: 9))
        clock.advance(by: .seconds(1))
        #expect(conn.sent.drain().isEmpty, "nothing after stop")
        await c.close()
    }
}

import Foundation
import Testing
@testable import VigilClient

// Swift twins of clients/js/test/request.test.js, against the fake transport, plus the typed
// errors and the wire format of the client's own.

@Suite(.timeLimit(.minutes(1)))
struct RequestTests {
    @Test func welcomeGivesSessionAndLimits() async throws {
        let (c, conn, _) = try await FakeServer().client()
        #expect(await c.session == conn.session)
        #expect(await c.limits?.writeBurst == 30)
        #expect(await c.limits?.categories.contains("general") == true)
        #expect(await c.limits?.ttlS?.max == 86400)
        await c.close()
    }

    @Test func concurrentRequestsEachGetTheirOwnReplyByRef() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let a = c.request("subscribe", ["area": Area.bbox(south: 1, west: 1, north: 2, east: 2).json])
        async let b = outcome { () async throws(VigilError) -> JSONObject in try await c.request("pin.vote", ["id": "x", "value": 1]) }
        var got: [JSONObject] = []
        for _ in 0..<2 { got.append(try await conn.next()) }
        // Answered in the other order: each reply must reach its own caller.
        let sub = got.first { $0["op"] == "subscribe" }!, vote = got.first { $0["op"] == "pin.vote" }!
        #expect(sub["ref"] != vote["ref"])
        conn.error(vote, "not_found")
        conn.ok(sub, ["pins": []])
        #expect(try await a["pins"] == .array([]))
        guard case .failure(let e) = await b else { Issue.record("the vote succeeded"); return }
        #expect(e.code == "not_found")
        #expect(e.op == "pin.vote")
        await c.close()
    }

    @Test func errorReplyIsATypedVigilError() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let r = outcome { () async throws(VigilError) -> JSONObject in
            try await c.request("pin.create", ["pin": ["lat": 52.5, "lon": 200, "title": "x"]])
        }
        let m = try await conn.expect("pin.create")
        conn.push(["type": "error", "ref": m["ref"]!, "code": "invalid_lon", "field": "pin.lon", "message": "pin.lon must be a finite number"])
        guard case .failure(let e) = await r else { Issue.record("no error"); return }
        #expect(e.code == "invalid_lon")
        #expect(e.field == "pin.lon")
        #expect(e.op == "pin.create")
        #expect(e.message.contains("lon"))
        #expect(e.reply?["code"] == "invalid_lon")
        await c.close()
    }

    @Test func aRequestNotAnsweredInTimeFailsWithTimeoutAndTheLateReplyIsIgnored() async throws {
        let (c, conn, clock) = try await FakeServer().client()
        async let r = outcome { () async throws(VigilError) -> JSONObject in try await c.request("unsubscribe", timeout: .milliseconds(300)) }
        let late = try await conn.expect("unsubscribe")
        clock.advance(by: .milliseconds(299))
        clock.advance(by: .milliseconds(1))
        guard case .failure(let e) = await r else { Issue.record("no timeout"); return }
        #expect(e.code == VigilError.Code.timeout)
        #expect(e.op == "unsubscribe")
        // The late reply to the timed-out request must not be taken for the next one's.
        async let next = c.request("subscribe", ["area": Area.bbox(south: 0, west: 0, north: 1, east: 1).json])
        let m = try await conn.expect("subscribe")
        conn.ok(late, ["pins": ["late"]])
        conn.ok(m, ["pins": []])
        #expect(try await next["pins"] == .array([]))
        await c.close()
    }

    @Test func rateLimitedIsWaitedOutAndRetriedWithTheSameKey() async throws {
        let (c, conn, clock) = try await FakeServer().client()
        let events = Reader(await c.events())
        async let r = c.request("pin.create", ["pin": ["lat": 48.1, "lon": 11.5, "title": "rate"]])
        let first = try await conn.expect("pin.create")
        conn.error(first, "rate_limited", ["retry_after_ms": 850])
        guard case .rateLimited(let op, let wait)? = await events.next(where: { if case .rateLimited = $0 { true } else { false } }) else {
            Issue.record("no rate_limited event"); return
        }
        #expect(op == "pin.create")
        #expect(wait == .milliseconds(850))
        clock.advance(by: .milliseconds(849))
        #expect(conn.sent.drain().isEmpty, "not retried before retry_after_ms")
        clock.advance(by: .milliseconds(1))
        let second = try await conn.expect("pin.create")
        #expect(second["idem"] == first["idem"], "one logical write, one key")
        #expect(second["ref"] != first["ref"])
        conn.ok(second, ["pin": ["id": "p"], "edit_token": "t"])
        #expect(try await r["edit_token"] == "t")
        await c.close()
    }

    @Test func rateLimitedReachesTheCallerAfterTheRetriesOrWithoutRetrying() async throws {
        let (c, conn, clock) = try await FakeServer().client { $0.requestTimeout = nil }
        let events = Reader(await c.events())
        async let r = outcome { () async throws(VigilError) -> JSONObject in try await c.request("pin.vote", ["id": "a", "value": 1]) }
        for attempt in 0...3 {
            let m = try await conn.expect("pin.vote")
            conn.error(m, "rate_limited", ["retry_after_ms": 100])
            if attempt < 3 {
                guard case .rateLimited(_, let wait)? = await events.next(where: { if case .rateLimited = $0 { true } else { false } }) else { return }
                clock.advance(by: wait)
            }
        }
        guard case .failure(let e) = await r else { Issue.record("no error"); return }
        #expect(e.code == "rate_limited")
        #expect(e.retryAfter == .milliseconds(100))
        async let once = outcome { () async throws(VigilError) -> JSONObject in try await c.request("pin.vote", ["id": "a", "value": 1], retryRateLimited: false) }
        let m = try await conn.expect("pin.vote")
        conn.error(m, "rate_limited", ["retry_after_ms": 1200])
        guard case .failure(let e2) = await once else { Issue.record("no error"); return }
        #expect(e2.retryAfter == .milliseconds(1200))
        await c.close()
    }

    @Test func beforeConnectNotConnectedAfterCloseClosed() async throws {
        let c = VigilClient(url: URL(string: "ws://fake/v1")!, transport: FakeServer())
        await #expect(throws: VigilError(code: "not_connected", message: "unsubscribe: call connect() first", op: "unsubscribe")) {
            try await c.request("unsubscribe")
        }
        await c.close()
        do {
            _ = try await c.connect()
            Issue.record("connected after close")
        } catch {
            #expect(error.code == "closed")
        }
    }

    @Test func requestsWaitingFailWithClosedAtClose() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let r = outcome { () async throws(VigilError) -> JSONObject in try await c.request("unsubscribe") }
        _ = try await conn.expect("unsubscribe")
        await c.close()
        guard case .failure(let e) = await r else { Issue.record("answered"); return }
        #expect(e.code == "closed")
        #expect(conn.closeCode == 1000)
    }

    @Test func inFlightRequestsFailWithDisconnectedAndWithReconnectOffTheClientCloses() async throws {
        let (c, conn, _) = try await FakeServer().client { $0.reconnect = nil }
        let events = Reader(await c.events())
        async let r = outcome { () async throws(VigilError) -> JSONObject in try await c.request("unsubscribe") }
        _ = try await conn.expect("unsubscribe")
        conn.cut()
        guard case .failure(let e) = await r else { Issue.record("answered"); return }
        #expect(e.code == "disconnected")
        #expect(await events.next(where: \.isClosed) != nil)
        do {
            _ = try await c.request("unsubscribe")
            Issue.record("sent after the close")
        } catch {
            #expect(error.code == "closed")
        }
    }

    @Test func aRequestMadeBeforeTheConnectionIsOpenWaitsForIt() async throws {
        let server = FakeServer(autoWelcome: false)
        let c = VigilClient(url: URL(string: "ws://fake/v1")!, options: { var o = VigilClientOptions(); o.clock = TestClock(); return o }(), transport: server)
        async let connecting = c.connect()
        let conn = try await server.nextConnection()
        while await c.state != .connecting { await Task.yield() }
        async let reply = c.request("subscribe", ["area": Area.bbox(south: 0, west: 0, north: 1, east: 1).json])
        while await c.queuedCount == 0 { await Task.yield() }
        #expect(conn.sent.drain().isEmpty)
        conn.welcome()
        let m = try await conn.expect("subscribe")
        conn.ok(m, ["pins": []])
        #expect(try await reply["pins"] == .array([]))
        _ = try await connecting
        await c.close()
    }

    @Test func malformedMessagesFromTheServerAreErrorEventsNotCrashes() async throws {
        let (c, conn, _) = try await FakeServer().client()
        let events = Reader(await c.events())
        conn.pushRaw("{not json")
        guard case .error(let e1)? = await events.next() else { Issue.record("no error"); return }
        #expect(e1.code == "bad_json")
        conn.pushRaw("[1,2]")
        guard case .error(let e2)? = await events.next() else { Issue.record("no error"); return }
        #expect(e2.code == "bad_message")
        conn.push(["type": "error", "code": "bad_json", "message": "no ref"])
        guard case .error(let e3)? = await events.next() else { Issue.record("no error"); return }
        #expect(e3.code == "bad_json" && e3.op == nil)
        // A reply that cannot be read as its model fails that request only.
        async let pin = outcome { () async throws(VigilError) -> CreatedPin in try await c.createPin(NewPin(lat: 1, lon: 2, title: "t")) }
        let m = try await conn.expect("pin.create")
        conn.ok(m, ["pin": ["id": 5], "edit_token": "t"])
        guard case .failure(let e4) = await pin else { Issue.record("read"); return }
        #expect(e4.code == "bad_message")
        // Numbers no double-to-integer conversion may trap on.
        async let huge = outcome { () async throws(VigilError) -> JSONObject in
            try await c.request("pin.vote", ["id": "a", "value": 1], retryRateLimited: false)
        }
        let v = try await conn.expect("pin.vote")
        conn.push(["type": "error", "ref": v["ref"]!, "code": "rate_limited", "retry_after_ms": 1e300, "message": "m"])
        guard case .failure(let e5) = await huge else { Issue.record("answered"); return }
        #expect(e5.retryAfter == .seconds(86_400))
        conn.push(["type": "panic.watchers", "stream": "S", "count": 1e300])
        conn.pushRaw(#"{"type":"panic.timer","stream":"S","seq":2,"due_at":1e300,"at":-1e300}"#)
        #expect(await c.state == .open)
        await c.close()
    }

    @Test func writesCarryAnIdempotencyKeyOf22Base64urlCharacters() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let a = c.request("pin.delete", ["id": "x", "edit_token": "y"])
        let m = try await conn.expect("pin.delete")
        let key = try #require(m["idem"]?.stringValue)
        #expect(key.count == 22)
        #expect(key.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        conn.ok(m, ["id": "x"])
        _ = try await a
        async let b = c.request("unsubscribe")
        let u = try await conn.expect("unsubscribe")
        #expect(u["idem"] == nil, "not a write")
        conn.ok(u)
        _ = try await b
        #expect(Set((0..<200).map { _ in makeIdempotencyKey() }).count == 200)
        await c.close()
    }
}

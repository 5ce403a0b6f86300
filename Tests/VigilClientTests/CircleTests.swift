import Foundation
import Testing
@testable import VigilClient

// Swift twins of clients/js/test/circle.test.js with scripted replies: the state kept by the
// news, the owner's and members' operations, re-joining after a reconnect with what was
// missed, a withdrawal while away, a circle's panic, relay registration, ack.

func circleState(_ id: String, role: String, requests: [JSONValue] = [], answer: JSONValue? = nil,
                 panics: [JSONValue] = [], acks: [JSONValue]? = nil, members: Bool = true) -> JSONValue {
    var o: JSONObject = ["circle": .string(id), "created_at": 1, "active_at": 2, "expires_at": 3, "role": .string(role),
                         "requests": .array(requests), "panics": .array(panics)]
    if role == "owner", members { o["members"] = [["member": 1, "label": "Mum", "added_at": 1], ["member": 2, "added_at": 1]] }
    if role == "member" { o["you"] = ["member": 1, "label": "Mum"] }
    if let answer { o["answer"] = answer }
    if let acks { o["acks"] = .array(acks) }
    return .object(o)
}

/// Joins circle C with member token M1, answered with `state`: the circle and its events after the state.
func joined(_ c: VigilClient, _ conn: FakeConnection, _ state: JSONValue) async throws -> (VigilCircle, Reader<CircleEvent>) {
    async let joining = c.joinCircle("C", memberToken: "M1")
    let join = try await conn.expect("checkin.join")
    #expect(join["member_token"] == "M1" && join["circle"] == "C")
    conn.ok(join, ["state": state])
    let circle = try await joining
    let events = Reader(circle.events)
    _ = await events.next()
    return (circle, events)
}

@Suite(.timeLimit(.minutes(1)))
struct CircleTests {
    @Test func aCircleStateAskAnswerHomeInviteAndRevoke() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let creating = c.createCircle(members: ["Mum", nil])
        let create = try await conn.expect("checkin.create")
        #expect(create["members"] == ["Mum", nil])
        conn.ok(create, ["circle": "C", "owner_token": "O", "expires_at": 9,
                         "members": [["member": 1, "label": "Mum", "member_token": "M1"], ["member": 2, "member_token": "M2"]]])
        let open = try await conn.expect("checkin.open")
        #expect(open["owner_token"] == "O" && open["circle"] == "C")
        conn.ok(open, ["state": circleState("C", role: "owner")])
        let created = try await creating
        #expect(created.ownerToken == "O")
        #expect(created.memberTokens.map(\.member) == [1, 2])
        #expect(created.memberTokens.map(\.label) == ["Mum", nil])
        let circle = created.circle
        #expect(circle.isOwner)
        let events = Reader(circle.events)
        guard case .state(let s, nil)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.members?.map(\.member) == [1, 2] && s.panics.isEmpty)

        conn.push(["type": "checkin.requested", "circle": "C", "member": 1, "label": "Mum", "at": 10])
        #expect(await events.next() == .requested(CheckinRequest(member: 1, label: "Mum", at: 10)))
        #expect(await circle.state()?.requests == [CheckinRequest(member: 1, label: "Mum", at: 10)])

        async let answering = circle.answer(note: "on the bus")
        let answer = try await conn.expect("checkin.answer")
        #expect(answer["status"] == "safe" && answer["note"] == "on the bus" && answer["owner_token"] == "O")
        let a: JSONValue = ["status": "safe", "at": 11, "note": "on the bus", "answered": [["member": 1, "label": "Mum", "at": 10]]]
        conn.ok(answer, ["answer": a])
        conn.push(["type": "checkin.answered", "circle": "C", "answer": a])
        #expect(try await answering.note == "on the bus")
        guard case .answered(let heard)? = await events.next() else { Issue.record("no answer"); return }
        #expect(heard.answered?.first?.member == 1)
        #expect(await circle.state()?.requests == [])

        async let homing = circle.home(for: .seconds(600))
        let home = try await conn.expect("checkin.home")
        #expect(home["for_s"] == 600)
        conn.ok(home, ["home": ["at": 12, "until": 612]])
        conn.push(["type": "checkin.home", "circle": "C", "state": "set", "until": 612, "at": 12])
        #expect(try await homing == HomeSafe(at: 12, until: 612))
        _ = await events.next()
        #expect(await circle.state()?.home?.until == 612)
        async let clearing: Void = circle.clearHome()
        let clear = try await conn.expect("checkin.home")
        #expect(clear["clear"] == true)
        conn.ok(clear, ["home": nil])
        conn.push(["type": "checkin.home", "circle": "C", "state": "cleared", "at": 13])
        try await clearing
        _ = await events.next()
        #expect(await circle.state()?.home == nil)

        async let inviting = circle.invite(label: "Alex")
        let invite = try await conn.expect("checkin.invite")
        conn.ok(invite, ["member": 3, "label": "Alex", "member_token": "M3"])
        #expect(try await inviting == MemberInvite(member: 3, label: "Alex", token: "M3"))
        #expect(await circle.state()?.members?.map(\.member) == [1, 2, 3])
        async let revoking: Void = circle.revoke(member: 1)
        let revoke = try await conn.expect("checkin.revoke")
        #expect(revoke["member"] == 1)
        conn.ok(revoke)
        try await revoking
        #expect(await circle.state()?.members?.map(\.member) == [2, 3])
        await c.close()
    }

    @Test func aMemberIsRevokedAndTheCircleEnds() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let joining = c.joinCircle("C", memberToken: "M1")
        let join = try await conn.expect("checkin.join")
        #expect(join["member_token"] == "M1")
        conn.ok(join, ["state": circleState("C", role: "member")])
        let circle = try await joining
        let events = Reader(circle.events)
        guard case .state(let s, nil)? = await events.next() else { Issue.record("no state"); return }
        #expect(s.you == CircleMember(member: 1, label: "Mum", addedAt: nil))
        async let asking = circle.request()
        let ask = try await conn.expect("checkin.request")
        conn.ok(ask, ["at": 77])
        #expect(try await asking == 77)
        conn.push(["type": "checkin.revoked", "circle": "C", "member": 1])
        #expect(await events.next() == .revoked(member: 1))
        #expect(await events.next() == nil)
        #expect(await circle.isActive() == false)
        await c.close()
    }

    @Test func aCircleIsJoinedAgainAfterAReconnectAndSaysWhatWasMissed() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        let (circle, events) = try await joined(c, conn, circleState("C", role: "member", panics: [["stream": "P0", "status": "amber", "started_at": 1]]))
        let back = try await cutAndReconnect(c, conn, server, clock)
        let again = try await back.expect("checkin.join")
        #expect(again["member_token"] == "M1")
        let answer: JSONValue = ["status": "safe", "at": 50, "note": "after the restart"]
        back.ok(again, ["state": circleState("C", role: "member", requests: [["member": 2, "at": 40]], answer: answer,
                                             panics: [["stream": "P1", "status": "red", "started_at": 45]],
                                             acks: [["notice": "N", "kind": "panic_started", "by": "owner", "at": 46]])])
        guard case .state(let s, let missed?)? = await events.next() else { Issue.record("no missed"); return }
        #expect(s.answer?.note == "after the restart")
        #expect(missed.newRequests.map(\.member) == [2])
        #expect(missed.newAnswer?.at == 50)
        #expect(missed.panicsStarted.map(\.stream) == ["P1"])
        #expect(missed.panicsEnded == ["P0"])
        #expect(missed.newAcks.map(\.notice) == ["N"])
        #expect(!missed.isEmpty)
        await c.close()
    }

    @Test func aMemberWithdrawnWhileAwayIsToldSoWhenItReconnectsAndNotJoinedAgain() async throws {
        let server = FakeServer()
        let (c, conn, clock) = try await server.client()
        let (circle, events) = try await joined(c, conn, circleState("C", role: "member"))
        let back = try await cutAndReconnect(c, conn, server, clock)
        let again = try await back.expect("checkin.join")
        back.error(again, "forbidden")
        guard case .error(let e)? = await events.next() else { Issue.record("no error"); return }
        #expect(e.code == "forbidden")
        #expect(await events.next() == nil)
        #expect(await circle.isActive() == false)
        // Not joined again at the next reconnect.
        await c.reconnectNow()
        let third = try await server.nextConnection()
        async let barrier = c.request("checkin.leave", ["circle": "AAAAAAAAAAAAAAAAAAAAAA"])
        let m = try await third.next()
        #expect(m["op"] == "checkin.leave")
        third.ok(m)
        _ = try await barrier
        await c.close()
    }

    @Test func aPanicForACircleNewsPanicsAndWatchingWithTheMemberToken() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let opening = c.openCircle("C", ownerToken: "O")
        let open = try await conn.expect("checkin.open")
        conn.ok(open, ["state": circleState("C", role: "owner")])
        let circle = try await opening
        let events = Reader(circle.events)
        _ = await events.next()
        async let starting = circle.startPanic(status: .amber, position: Position(lat: 48.2, lon: 16.37), dueIn: .seconds(1))
        let start = try await conn.expect("panic.start")
        #expect(start["circle"] == "C" && start["owner_token"] == "O")
        conn.ok(start, ["stream": "S", "seq": 1, "owner_token": "SO", "watch_tokens": ["w"], "circle": "C", "due_at": 1000])
        conn.push(["type": "checkin.panic", "circle": "C", "stream": "S", "event": "started", "status": "amber", "at": 1])
        let owner = try await starting
        #expect(await owner.snapshot()?.circle == "C")
        guard case .panic(let news)? = await events.next() else { Issue.record("no news"); return }
        #expect(news.event == "started")
        #expect(await circle.state()?.panics.map(\.stream) == ["S"])
        conn.push(["type": "checkin.panic", "circle": "C", "stream": "S", "event": "escalated", "status": "red", "at": 1000])
        _ = await events.next()
        let p = await circle.state()?.panics.first
        #expect(p?.status == .red && p?.escalatedAt == 1000)
        conn.push(["type": "checkin.acked", "circle": "C", "notice": "N", "kind": "panic_escalated", "by": "member", "member": 1, "label": "Mum", "at": 1001])
        guard case .acked(let ack)? = await events.next() else { Issue.record("no ack"); return }
        #expect(ack.label == "Mum")
        #expect(await circle.state()?.acks?.count == 1)
        conn.push(["type": "checkin.panic", "circle": "C", "stream": "S", "event": "ended", "status": "red", "reason": "safe", "at": 1002])
        guard case .panic(let ended)? = await events.next() else { Issue.record("no end"); return }
        #expect(ended.reason == "safe")
        #expect(await circle.state()?.panics == [])
        // A member's watch of the circle's stream carries the member token.
        async let joining = c.joinCircle("C2", memberToken: "M")
        let join = try await conn.expect("checkin.join")
        conn.ok(join, ["state": circleState("C2", role: "member")])
        let member = try await joining
        async let watching = member.watch(stream: "S2", since: 1)
        let w = try await conn.expect("panic.watch")
        #expect(w["member_token"] == "M" && w["since"] == 1 && w["watch_token"] == nil)
        conn.ok(w, ["state": panicState("S2", seq: 1)])
        #expect(try await watching.lastSeq() == 1)
        conn.push(["type": "checkin.closed", "circle": "C", "reason": "closed", "at": 5])
        #expect(await events.next() == .closed(CircleClosed(reason: "closed", at: 5)))
        await c.close()
    }

    @Test func relayRegistrationAckAndUnregisterOnTheWire() async throws {
        let (c, conn, _) = try await FakeServer().client()
        async let registering = c.registerRelay(circle: "C", credential: .member("M"), handle: "apns-token-1")
        let reg = try await conn.expect("checkin.register")
        #expect(reg["relay"] == ["handle": "apns-token-1"] && reg["member_token"] == "M" && reg["circle"] == "C")
        #expect(reg["idem"]?.stringValue?.count == 22)
        conn.ok(reg, ["subscription": "SUB"])
        #expect(try await registering == "SUB")
        async let acking: Void = c.ack(circle: "C", credential: .member("M"), notice: "N40")
        let ack = try await conn.expect("checkin.ack")
        #expect(ack["notice"] == "N40")
        conn.ok(ack)
        try await acking
        async let unregistering: Void = c.unregister(circle: "C", credential: .owner("O"), subscription: "SUB")
        let un = try await conn.expect("checkin.unregister")
        #expect(un["owner_token"] == "O" && un["subscription"] == "SUB" && un["member_token"] == nil)
        conn.ok(un)
        try await unregistering
        async let unsupported = outcome { () async throws(VigilError) -> String in
            try await c.registerRelay(circle: "C", credential: .owner("O"), handle: "h")
        }
        let r2 = try await conn.expect("checkin.register")
        conn.error(r2, "unsupported", ["field": "relay"])
        guard case .failure(let e) = await unsupported else { Issue.record("registered"); return }
        #expect(e.code == "unsupported" && e.field == "relay")
        await c.close()
    }

    @Test func aNoticeFromThePushPayloadOrTheRelayIsRead() throws {
        let push = try #require(Notice(json: #"{"v":1,"notice":"N40","kind":"panic_started","circle":"C","stream":"S","status":"red","at":5,"url":"/watch#stream=S&circle=C&notice=N40"}"#))
        #expect(push.kind == "panic_started" && push.status == .red && push.url?.hasPrefix("/watch") == true && push.handle == nil)
        let relay = try #require(Notice(json: #"{"type":"vigil.notice","handle":"H","v":1,"notice":"N2","kind":"checkin_requested","circle":"C","at":6,"urgent":true,"expires_at":99}"#))
        #expect(relay.handle == "H" && relay.urgent == true && relay.expiresAt == 99 && relay.stream == nil)
        #expect(Notice(json: "{}") == nil)
        #expect(Notice(json: "not json") == nil)
    }
}

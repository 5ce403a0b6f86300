import Testing
import VigilCore
import VigilState
@testable import VigilServer

/// A circle's panic streams over the harness's sockets (docs/PROTOCOL.md, "Circles as standing
/// contacts"): the application joins the two hubs, journals the start with its circle, and takes
/// a joined change back whole when the journal could not record it.
@Suite struct CirclePanicGlueTests {
    typealias U = UnrecordedChangesTests
    typealias C = CheckinGlueTests

    /// A circle, a stream started for it, and member 1 (Mum) listening and watching on one connection.
    static func watchingMember(_ s: U.Setup) throws -> (circle: C.Circle, stream: String, phone: TestClient, mum: TestClient) {
        let owner = try s.h.open()
        let c = try C.create(s, owner)
        let mum = try s.h.open()
        #expect(try U.ask(s.h, mum, #"{"op":"checkin.join","ref":1,"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#).type == "ok")
        let phone = try s.h.open()
        let started = try U.ask(s.h, phone, #"{"op":"panic.start","ref":1,"status":"red","lat":52.5,"lon":13.4,"circle":"\#(c.id)","owner_token":"\#(c.owner)"}"#)
        #expect(started["circle"]?.string == c.id)
        let stream = try #require(started["stream"]?.string)
        try s.h.run(until: { mum.poll(); return !mum.all("checkin.panic").isEmpty })
        #expect(try U.ask(s.h, mum, #"{"op":"panic.watch","ref":2,"stream":"\#(stream)","member_token":"\#(c.members[0])"}"#).type == "ok")
        return (c, stream, phone, mum)
    }

    @Test func theStartIsJournaledWithItsCircleAndTheListenersHearIt() throws {
        let s = try U.Setup()
        let (c, stream, _, mum) = try Self.watchingMember(s)
        guard case .panicStart(let start) = s.log.records.last else {
            Issue.record("records: \(s.log.records)")
            return
        }
        #expect(start.id == StreamID(stream) && start.circle == CircleID(c.id))
        let news = try #require(mum.all("checkin.panic").first)
        #expect(news["stream"]?.string == stream && news["event"]?.string == "started" && news["circle"]?.string == c.id)
        #expect(s.h.v1.panic.watcherCount(try #require(StreamID(stream))) == 1)
    }

    /// Revoking a member cuts its listening and its watching in one step; the journal refusing
    /// that step gives both back, and nobody hears of it.
    @Test func aRevocationTheJournalCouldNotRecordGivesBackTheListenerAndTheWatcher() throws {
        let s = try U.Setup()
        let (c, stream, _, mum) = try Self.watchingMember(s)
        let owner = try s.h.open()
        let id = try #require(StreamID(stream)), circle = try #require(CircleID(c.id))
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, owner, #"{"op":"checkin.revoke","ref":1,"circle":"\#(c.id)","owner_token":"\#(c.owner)","member":1}"#))
        #expect(s.h.v1.panic.watcherCount(id) == 1 && s.h.v1.checkin.listenerCount(circle) == 2)
        for _ in 0..<3 { try s.h.turn() }
        mum.poll()
        #expect(mum.all("panic.revoked").isEmpty && mum.all("checkin.revoked").isEmpty)

        // Recorded: both cut, both told.
        #expect(try U.ask(s.h, owner, #"{"op":"checkin.revoke","ref":2,"circle":"\#(c.id)","owner_token":"\#(c.owner)","member":1}"#).type == "ok")
        try s.h.run(until: { mum.poll(); return !mum.all("panic.revoked").isEmpty && !mum.all("checkin.revoked").isEmpty })
        #expect(s.h.v1.panic.watcherCount(id) == 0 && s.h.v1.checkin.listenerCount(circle) == 1)
        let refused = try U.ask(s.h, mum, #"{"op":"panic.watch","ref":3,"stream":"\#(stream)","member_token":"\#(c.members[0])"}"#)
        #expect(refused["code"]?.string == "forbidden")
    }

    @Test func aStartForACircleTheJournalCouldNotRecordIsNeverTold() throws {
        let s = try U.Setup()
        let owner = try s.h.open()
        let c = try C.create(s, owner)
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, owner, #"{"op":"panic.start","ref":2,"status":"red","lat":52.5,"lon":13.4,"circle":"\#(c.id)","owner_token":"\#(c.owner)"}"#))
        for _ in 0..<3 { try s.h.turn() }
        owner.poll()
        #expect(owner.all("checkin.panic").isEmpty)
        #expect(s.h.v1.panic.streams(of: try #require(CircleID(c.id))).isEmpty)
    }
}

import Testing
import VigilCore
import VigilState
@testable import VigilServer

/// `/v1`'s check-in circles over the harness's sockets: the journal records each change before
/// its reply and its news go out, and a change the journal could not record is taken back
/// unseen (docs/DURABILITY.md, "When the disk fails").
@Suite struct CheckinGlueTests {
    typealias U = UnrecordedChangesTests

    struct Circle {
        let id: String
        let owner: String
        let members: [String]
    }

    static func create(_ s: U.Setup, _ owner: TestClient) throws -> Circle {
        let created = try U.ask(s.h, owner, #"{"op":"checkin.create","ref":1,"members":["Mum","Sam"]}"#)
        #expect(created.type == "ok")
        let members = (created["members"]?.array ?? []).compactMap { $0.object?["member_token"]?.string }
        return Circle(id: try #require(created["circle"]?.string), owner: try #require(created["owner_token"]?.string), members: members)
    }

    @Test func everyChangeIsJournaledAsTheCirclesWholeState() throws {
        let s = try U.Setup()
        let owner = try s.h.open()
        let c = try Self.create(s, owner)
        #expect(try U.ask(s.h, owner, #"{"op":"checkin.request","ref":2,"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#).type == "ok")
        #expect(try U.ask(s.h, owner, #"{"op":"checkin.answer","ref":3,"circle":"\#(c.id)","owner_token":"\#(c.owner)"}"#).type == "ok")
        #expect(try U.ask(s.h, owner, #"{"op":"checkin.close","ref":4,"circle":"\#(c.id)","owner_token":"\#(c.owner)"}"#).type == "ok")
        let id = try #require(CircleID(c.id))
        guard s.log.records.count == 4, case .circlePut(let first) = s.log.records[0], case .circlePut(let asked) = s.log.records[1],
              case .circlePut(let answered) = s.log.records[2] else {
            Issue.record("records: \(s.log.records)")
            return
        }
        #expect(first.id == id && first.members.count == 2 && asked.requests.count == 1 && answered.answer?.answered.count == 1)
        #expect(s.log.records[3] == .circleRemove(id))
        #expect(s.h.v1.stats.refusals[Refusal.checkinRequests.rawValue] == 0)
    }

    @Test func theMetricsCountCirclesAndRefusedRequests() throws {
        let s = try U.Setup { $0.checkin.requestsPerMinute = 1 }
        let owner = try s.h.open()
        let c = try Self.create(s, owner)
        for ref in 2...3 {
            _ = try U.ask(s.h, owner, #"{"op":"checkin.request","ref":\#(ref),"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#)
        }
        let metrics = try s.h.get("/metrics", admin: true).body
        #expect(OperatorGlueTests.sample(metrics, "vigil_checkin_circles") == 1)
        #expect(OperatorGlueTests.sample(metrics, #"vigil_refusals_total{limit="checkin_member_requests"}"#) == 1)
    }

    @Test func aRequestTheJournalCouldNotRecordIsRefusedAndNobodyHearsOfIt() throws {
        let s = try U.Setup()
        let owner = try s.h.open()
        let c = try Self.create(s, owner)
        let mum = try s.h.open()
        #expect(try U.ask(s.h, mum, #"{"op":"checkin.join","ref":1,"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#).type == "ok")
        let id = try #require(CircleID(c.id))
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, mum, #"{"op":"checkin.request","ref":2,"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#))
        #expect(s.h.v1.checkin.circle(id)?.requests.isEmpty == true)
        // A revocation taken back leaves Sam a member, still listening.
        let sam = try s.h.open()
        #expect(try U.ask(s.h, sam, #"{"op":"checkin.join","ref":1,"circle":"\#(c.id)","member_token":"\#(c.members[1])"}"#).type == "ok")
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, owner, #"{"op":"checkin.revoke","ref":3,"circle":"\#(c.id)","owner_token":"\#(c.owner)","member":2}"#))
        #expect(s.h.v1.checkin.circle(id)?.members.count == 2 && s.h.v1.checkin.listenerCount(id) == 3)
        // The next request is recorded, and it is the first news anyone gets.
        #expect(try U.ask(s.h, mum, #"{"op":"checkin.request","ref":4,"circle":"\#(c.id)","member_token":"\#(c.members[0])"}"#).type == "ok")
        try s.h.run(until: { sam.poll(); owner.poll(); return !sam.all("checkin.requested").isEmpty && !owner.all("checkin.requested").isEmpty })
        for _ in 0..<3 { try s.h.turn() }
        for client in [owner, sam] {
            client.poll()
            #expect(client.messages.compactMap(\.type).filter { $0.hasPrefix("checkin.") } == ["checkin.requested"])
        }
        #expect(s.log.records.count == 2)
    }

    @Test func aCircleCreateTheJournalCouldNotRecordLeavesNothingBehind() throws {
        let s = try U.Setup()
        let owner = try s.h.open()
        s.log.failNextCommit = true
        U.expectUnavailable(try U.ask(s.h, owner, #"{"op":"checkin.create","ref":1,"members":["Mum"]}"#))
        #expect(s.h.v1.checkin.count == 0)
        s.log.outage = 900
        let refused = try U.ask(s.h, owner, #"{"op":"checkin.create","ref":2}"#)
        U.expectUnavailable(refused)
        #expect(refused["retry_after_ms"]?.int == 900 && s.h.v1.checkin.count == 0)
    }
}

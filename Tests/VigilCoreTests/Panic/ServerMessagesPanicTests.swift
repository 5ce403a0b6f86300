import Testing
@testable import VigilCore
import VigilTestSupport

/// The escalation of a missed safety timer on the wire (docs/PROTOCOL.md, "Safety timer"):
/// `at` stays the deadline, `sent_at` says when the alarm went out, in the event, in its replay
/// and in `state.escalated`.
@Suite struct ServerMessagesPanicTests {
    static let due: Int64 = 600_000
    /// The first tick after a restart that found the deadline passed: 25 minutes late.
    static let restartTick: Int64 = 2_100_000

    func parse(_ w: JSONWriter) throws -> JSONObject {
        try #require(w.withUnsafeBytes { try JSONParser.parse($0, maxDepth: 16) }.object)
    }

    /// A walk whose deadline passed while the hub was away, escalated at `restartTick`.
    func lateEscalation() throws -> (PanicHub, StreamID) {
        var rig = PanicRig()
        let r = try rig.hub.start(owner: 1, status: .amber, location: PanicRig.at(0), note: nil, watchers: 1, timer: .at(Self.due),
                                  secrets: rig.secrets, now: 0, out: &rig.out).get()
        var restarted = PanicHub(settings: rig.hub.settings)
        restarted.restoreStreams(rig.hub.exportStreams(), now: Self.restartTick)
        var out: [PanicDelivery] = []
        #expect(restarted.tick(now: Self.restartTick, out: &out).count == 1)
        return (restarted, r.stream.id)
    }

    @Test func theEventKeepsTheDeadlineAsAtAndSaysWhenItWasSent() throws {
        let (hub, id) = try lateEscalation()
        let stream = try #require(hub.stream(id))
        let event = try #require(stream.latestEvent)
        var w = JSONWriter(capacity: 512)
        ServerMessages.panicEvent(id, event, into: &w)
        let o = try parse(w)
        #expect(o["type"]?.string == "panic.status" && o["reason"]?.string == "missed_check_in" && o["status"]?.string == "red")
        #expect(o["at"]?.int64 == Self.due && o["due_at"]?.int64 == Self.due)
        #expect(o["sent_at"]?.int64 == Self.restartTick, "how late it went out: sent_at - at")
        // The replay of the same event (`since`) is the same bytes: it is the stored event.
        let replayed = try #require(hub.stream(id)?.events(after: event.seq - 1)?.first)
        var again = JSONWriter(capacity: 512)
        ServerMessages.panicEvent(id, replayed, into: &again)
        #expect(again.bytes == w.bytes)
    }

    @Test func theStateSaysWhenTheEscalationWasSent() throws {
        let (hub, id) = try lateEscalation()
        var w = JSONWriter(capacity: 1024)
        ServerMessages.panicState(try #require(hub.stream(id)), into: &w)
        let escalated = try #require(try parse(w)["escalated"]?.object)
        #expect(escalated["reason"]?.string == "missed_check_in")
        #expect(escalated["at"]?.int64 == Self.due && escalated["sent_at"]?.int64 == Self.restartTick)
    }

    /// Only an escalation carries `sent_at`: an owner's status change has its own time only.
    @Test func otherEventsHaveNoSentAt() throws {
        let (_, id) = try lateEscalation()
        var w = JSONWriter(capacity: 256)
        ServerMessages.panicEvent(id, PanicEvent(seq: 9, at: 5, kind: .status(.red)), into: &w)
        #expect(try parse(w)["sent_at"] == nil)
    }
}

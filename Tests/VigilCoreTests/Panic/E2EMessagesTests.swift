import Testing
@testable import VigilCore

/// The JSON of an e2e stream's sealed points (ServerMessages+E2E.swift): what a watcher needs to
/// open one, no coordinate member, and the escalation saying it cannot know the position.
@Suite struct E2EMessagesTests {
    let point = SealedPoint(kid: E2EKeyID(bytes: Array(0xA0...0xAF)), status: .amber,
                            sealed: SealedBytes(bytes: [UInt8](repeating: 0xC3, count: 92)))

    func json(_ body: (inout JSONWriter) -> Void) throws -> JSONObject {
        var w = JSONWriter()
        w.beginObject()
        body(&w)
        w.endObject()
        return try #require(try JSONParser.parse(w.bytes).object)
    }

    @Test func aSealedPointShowsItsBytesKidAndStatusAndNoCoordinate() throws {
        let o = try json { ServerMessages.sealedPoint(point, into: &$0) }
        #expect(o.members.map(\.key) == ["sealed", "kid", "status"])
        #expect(o["sealed"]?.string == Base64URL.encode([UInt8](repeating: 0xC3, count: 92)))
        #expect(o["kid"]?.string == "oKGio6SlpqeoqaqrrK2urw")
        #expect(o["status"]?.string == "amber")
    }

    @Test func theEscalationsLastSaysThePositionIsNotKnown() throws {
        let o = try json { ServerMessages.sealedLast(point, seq: 7, at: 1_700_000_000_123, into: &$0) }
        let last = try #require(o["last"]?.object)
        #expect(last.members.map(\.key) == ["sealed", "kid", "status", "seq", "at"])
        #expect(last["seq"]?.int64 == 7 && last["at"]?.int64 == 1_700_000_000_123)
        #expect(o["position_known"] == .bool(false))
        for clear in ["lat", "lon", "accuracy_m", "heading", "speed_mps", "note"] {
            #expect(last[clear] == nil && o[clear] == nil)
        }
    }
}

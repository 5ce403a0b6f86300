import Testing
@testable import VigilCore

/// `panic.start` for a circle and `panic.watch` as a member (docs/PROTOCOL.md, "Circles as
/// standing contacts"): the fields come in pairs or not at all, and each refusal names a field.
@Suite struct CirclePanicDecoderTests {
    static let circle = "AAAAAAAAAAAAAAAAAAAAAA"
    static let start = #"{"op":"panic.start","status":"red","lat":1,"lon":2"#
    /// The default settings' decoder and its helpers.
    let decoding = RequestDecoderTests()

    func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> { decoding.decode(text) }
    func error(_ text: String) -> RequestError? { decoding.error(text) }

    @Test func aStartForACircleCarriesItsIdAndOwnerToken() throws {
        let location = PanicLocation(lat: 1, lon: 2)
        let op = try decode(Self.start + #","circle":"\#(Self.circle)","owner_token":"o","watchers":2,"due_in_s":60}"#).get().operation
        #expect(op == .panicStart(status: .red, location: location, note: nil, watchers: 2, timer: .inSeconds(60),
                                  circle: CircleToken(circle: CircleID(Self.circle), token: "o")))
        // A circle that is not an id is kept as nil: answered like an unknown circle, never as a start for none.
        let malformed = try decode(Self.start + #","circle":"short","owner_token":"o"}"#).get().operation
        #expect(malformed == .panicStart(status: .red, location: location, note: nil, watchers: 1, timer: nil,
                                         circle: CircleToken(circle: nil, token: "o")))
        let plain = try decode(Self.start + "}").get().operation
        #expect(plain == .panicStart(status: .red, location: location, note: nil, watchers: 1, timer: nil))
    }

    @Test func aCircleAndItsOwnerTokenComeTogether() {
        let cases: [(String, String, String)] = [
            (Self.start + #","circle":"\#(Self.circle)"}"#, "missing_field", "owner_token"),
            (Self.start + #","owner_token":"o"}"#, "missing_field", "circle"),
            (Self.start + #","circle":7,"owner_token":"o"}"#, "invalid_circle", "circle"),
            (Self.start + #","circle":"\#(Self.circle)","owner_token":7}"#, "invalid_token", "owner_token"),
        ]
        for (text, code, field) in cases {
            let e = error(text)
            #expect(e?.code == code && e?.field == field, "\(text): \(String(describing: e))")
            if code == "missing_field" {
                #expect(e?.message.contains(field == "circle" ? "owner_token" : "circle") == true, "the message names the pair: \(String(describing: e))")
            }
        }
    }

    @Test func aMemberWatchesWithItsMemberTokenInsteadOfAWatchToken() throws {
        let id = StreamID(random: Array(repeating: 7, count: 16))
        let member = try decode(#"{"op":"panic.watch","stream":"\#(id)","member_token":"m","since":3}"#).get().operation
        #expect(member == .panicWatchAsMember(stream: id, memberToken: "m", since: 3))
        #expect(member.name == "panic.watch" && !member.changesState && !member.isWrite)
        let both = error(#"{"op":"panic.watch","stream":"\#(id)","watch_token":"w","member_token":"m"}"#)
        #expect(both?.code == "invalid_token" && both?.field == "member_token" && both?.message.contains("not both") == true)
        let neither = error(#"{"op":"panic.watch","stream":"\#(id)","since":3}"#)
        #expect(neither?.code == "missing_field" && neither?.field == "watch_token" && neither?.message.contains("member_token") == true)
        let notAString = error(#"{"op":"panic.watch","stream":"\#(id)","member_token":1}"#)
        #expect(notAString?.code == "invalid_token" && notAString?.field == "member_token")
        let badSince = error(#"{"op":"panic.watch","stream":"\#(id)","member_token":"m","since":-1}"#)
        #expect(badSince?.code == "invalid_since")
    }

    @Test func strayFieldsAreStillNamed() {
        let e = error(Self.start + #","circle":"\#(Self.circle)","owner_token":"o","member_token":"m"}"#)
        #expect(e?.code == "unknown_field" && e?.field == "member_token")
        let watch = error(#"{"op":"panic.watch","stream":"s","member_token":"m","circle":"\#(Self.circle)"}"#)
        #expect(watch?.code == "unknown_field" && watch?.field == "circle")
    }
}

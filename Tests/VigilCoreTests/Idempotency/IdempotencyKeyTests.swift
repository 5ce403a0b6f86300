import Testing
@testable import VigilCore

@Suite struct IdempotencyKeyTests {
    static let decoder = RequestDecoder(settings: PinSettings())

    static func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> {
        Array(text.utf8).withUnsafeBytes { decoder.decode($0) }
    }

    @Test func keysAre16To64OfTheURLSafeAlphabet() {
        #expect(IdempotencyKey.isValid(String(repeating: "a", count: 16)))
        #expect(IdempotencyKey.isValid(String(repeating: "Z", count: 64)))
        #expect(IdempotencyKey.isValid("AZaz09-_AZaz09-_"))
        #expect(!IdempotencyKey.isValid(String(repeating: "a", count: 15)))
        #expect(!IdempotencyKey.isValid(String(repeating: "a", count: 65)))
        #expect(!IdempotencyKey.isValid("aaaaaaaaaaaaaaa="))
        #expect(!IdempotencyKey.isValid("aaaaaaaaaaaaaa é"))
        #expect(!IdempotencyKey.isValid("aaaaaaaaaaaaaaa\u{0}"))
    }

    /// Exactly the operations that change state take `idem` (the list of docs/PROTOCOL.md, "Writes
    /// that are safe to retry", and `ClientOperation.changesState`); every other one refuses it as
    /// an unknown field, before any of its own fields is looked at.
    @Test func theOperationsThatTakeAKeyAreTheWrites() {
        let reads: Set<String> = ["subscribe", "unsubscribe", "panic.resume", "panic.watch", "panic.unwatch",
                                  "checkin.open", "checkin.join", "checkin.leave"]
        #expect(RequestDecoder.idempotentOperations == Set(ClientOperation.names).subtracting(reads))
        for op in ClientOperation.names {
            let refusal: RequestError? = switch Self.decode(#"{"op":"\#(op)","idem":"abcdefghijklmnop"}"#) {
            case .success: nil
            case .failure(let r): r.error
            }
            if reads.contains(op) {
                #expect(refusal?.code == "unknown_field" && refusal?.field == "idem", "\(op)")
            } else {
                #expect(refusal?.field != "idem", "\(op) refused its key: \(String(describing: refusal))")
            }
        }
        // The decoded writes say they change state (those that decode with no fields at all).
        for op in ["unsubscribe", "checkin.create"] {
            guard case .success(let r) = Self.decode(#"{"op":"\#(op)"}"#) else { Issue.record("\(op)"); continue }
            #expect(r.operation.changesState == RequestDecoder.idempotentOperations.contains(op))
        }
    }

    @Test func numbersAreComparedAsNumbers() throws {
        let a = try Self.decode(#"{"op":"pin.vote","idem":"abcdefghijklmnop","id":"x","value":1}"#).get()
        let b = try Self.decode(#"{"op":"pin.vote","idem":"abcdefghijklmnop","id":"x","value":1.0}"#).get()
        #expect(a.idem?.canonical == b.idem?.canonical)
    }

    @Test func aWriteCarriesItsKeyAndCanonicalForm() throws {
        let a = try Self.decode(#"{"op":"pin.create","ref":1,"idem":"abcdefghijklmnop","pin":{"lat":1,"lon":2,"title":"x"}}"#).get()
        let b = try Self.decode(#"{ "pin": {"title":"x","lon":2,"lat":1}, "ref":"other", "op":"pin.create", "idem":"abcdefghijklmnop" }"#).get()
        #expect(a.idem?.key == "abcdefghijklmnop")
        #expect(a.idem?.canonical == b.idem?.canonical, "member order, spacing and ref do not count")
        #expect(String(decoding: a.idem!.canonical, as: UTF8.self) == #"{"op":"pin.create","pin":{"lat":1,"lon":2,"title":"x"}}"#)
        let c = try Self.decode(#"{"op":"pin.create","idem":"abcdefghijklmnop","pin":{"lat":1,"lon":2,"title":"y"}}"#).get()
        #expect(c.idem?.canonical != a.idem?.canonical)
        let none = try Self.decode(#"{"op":"pin.create","pin":{"lat":1,"lon":2,"title":"x"}}"#).get()
        #expect(none.idem == nil)
    }

    @Test func aBadKeyIsInvalidIdemAndAReadRefusesOne() {
        for bad in [#""short""#, "12345678901234567", "null", #""aaaaaaaaaaaaaaa*""#, #"["aaaaaaaaaaaaaaaa"]"#] {
            guard case .failure(let r) = Self.decode(#"{"op":"pin.delete","ref":3,"id":"x","edit_token":"y","idem":"# + bad + "}") else {
                Issue.record("accepted \(bad)"); continue
            }
            #expect(r.error.code == "invalid_idem" && r.error.field == "idem" && r.ref == .number(3))
        }
        guard case .failure(let r) = Self.decode(#"{"op":"subscribe","idem":"abcdefghijklmnop","area":{"bbox":[0,0,1,1]}}"#) else {
            Issue.record("a read took a key"); return
        }
        #expect(r.error.code == "unknown_field" && r.error.field == "idem")
    }

    @Test func aRepeatReplyIsTheKeptMembersWithRepeatTrue() {
        var w = JSONWriter()
        let members = ServerMessages.keptMembers(of: .watchToken("tok"), into: &w)
        #expect(members.map { String(decoding: $0, as: UTF8.self) } == #","watch_token":"tok""#)
        #expect(ServerMessages.keptMembers(of: .error(RequestError("x", "y")), into: &w) == nil)
        #expect(ServerMessages.keptMembers(of: .ok, into: &w) == [])
        w.reset()
        ServerMessages.reply(.repeated(members: members!), ref: .number(5), into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"type":"ok","ref":5,"repeat":true,"watch_token":"tok"}"#)
        w.reset()
        ServerMessages.reply(.repeated(members: []), ref: nil, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"type":"ok","repeat":true}"#)
    }
}

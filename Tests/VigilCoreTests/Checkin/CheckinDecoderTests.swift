import Testing
@testable import VigilCore

@Suite struct CheckinDecoderTests {
    let decoder = RequestDecoder(settings: PinSettings(), checkin: CheckinSettings(maxMembers: 2, maxHomeMs: 3_600_000))
    static let circle = "AAAAAAAAAAAAAAAAAAAAAA"

    func operation(_ text: String) throws -> ClientOperation {
        try Array(text.utf8).withUnsafeBytes { decoder.decode($0) }.get().operation
    }

    func error(_ text: String) -> RequestError? {
        if case .failure(let rejected) = Array(text.utf8).withUnsafeBytes({ decoder.decode($0) }) { return rejected.error }
        return nil
    }

    @Test func decodesEveryOperation() throws {
        let id = CircleID(Self.circle)
        #expect(id != nil)
        let c = "\"circle\":\"\(Self.circle)\""
        #expect(try operation(#"{"op":"checkin.create"}"#) == .checkin(.create(labels: [])))
        #expect(try operation(#"{"op":"checkin.create","members":[" Mum ",null]}"#) == .checkin(.create(labels: ["Mum", nil])))
        #expect(try operation(#"{"op":"checkin.open",\#(c),"owner_token":"o"}"#) == .checkin(.open(circle: id, ownerToken: "o")))
        #expect(try operation(#"{"op":"checkin.invite",\#(c),"owner_token":"o","label":"Sam"}"#) == .checkin(.invite(circle: id, ownerToken: "o", label: "Sam")))
        #expect(try operation(#"{"op":"checkin.invite",\#(c),"owner_token":"o"}"#) == .checkin(.invite(circle: id, ownerToken: "o", label: nil)))
        #expect(try operation(#"{"op":"checkin.revoke",\#(c),"owner_token":"o","member":3}"#) == .checkin(.revoke(circle: id, ownerToken: "o", member: 3)))
        #expect(try operation(#"{"op":"checkin.answer",\#(c),"owner_token":"o","status":"safe","note":" x "}"#)
                == .checkin(.answer(circle: id, ownerToken: "o", note: "x")))
        #expect(try operation(#"{"op":"checkin.home",\#(c),"owner_token":"o","for_s":3600}"#) == .checkin(.home(circle: id, ownerToken: "o", change: .forSeconds(3600))))
        #expect(try operation(#"{"op":"checkin.home",\#(c),"owner_token":"o","until":5}"#) == .checkin(.home(circle: id, ownerToken: "o", change: .until(5))))
        #expect(try operation(#"{"op":"checkin.home",\#(c),"owner_token":"o","clear":true}"#) == .checkin(.home(circle: id, ownerToken: "o", change: .clear)))
        #expect(try operation(#"{"op":"checkin.close",\#(c),"owner_token":"o"}"#) == .checkin(.close(circle: id, ownerToken: "o")))
        #expect(try operation(#"{"op":"checkin.join",\#(c),"member_token":"m"}"#) == .checkin(.join(circle: id, memberToken: "m")))
        #expect(try operation(#"{"op":"checkin.request",\#(c),"member_token":"m"}"#) == .checkin(.request(circle: id, memberToken: "m")))
        #expect(try operation(#"{"op":"checkin.leave","circle":"short"}"#) == .checkin(.leave(circle: nil)))
    }

    @Test func namesAndClassesLineUp() {
        for (i, name) in CheckinOperation.names.enumerated() {
            #expect(ClientOperation.names[17 + i] == name)   // after the 17 pin and panic operations
        }
        let create = ClientOperation.checkin(.create(labels: []))
        #expect(create.name == "checkin.create" && create.isWrite && create.changesState)
        let answer = ClientOperation.checkin(.answer(circle: nil, ownerToken: "", note: nil))
        #expect(answer.name == "checkin.answer" && !answer.isWrite && answer.changesState)
        let join = ClientOperation.checkin(.join(circle: nil, memberToken: ""))
        #expect(!join.isWrite && !join.changesState && CheckinOperation.join(circle: nil, memberToken: "").readsState)
    }

    @Test func refusesWhatItCannotUseNamingTheField() {
        let c = "\"circle\":\"\(Self.circle)\""
        let cases: [(String, String, String?)] = [
            (#"{"op":"checkin.create","members":["a","b","c"]}"#, "invalid_members", "members"),
            (#"{"op":"checkin.create","members":{}}"#, "invalid_members", "members"),
            (#"{"op":"checkin.create","members":["  "]}"#, "invalid_label", "members"),
            (#"{"op":"checkin.create","members":[1]}"#, "invalid_label", "members"),
            (#"{"op":"checkin.open","owner_token":"o"}"#, "missing_field", "circle"),
            (#"{"op":"checkin.open","circle":1,"owner_token":"o"}"#, "invalid_circle", "circle"),
            (#"{"op":"checkin.open",\#(c)}"#, "missing_field", "owner_token"),
            (#"{"op":"checkin.join",\#(c),"member_token":[]}"#, "invalid_token", "member_token"),
            (#"{"op":"checkin.revoke",\#(c),"owner_token":"o","member":-1}"#, "invalid_member", "member"),
            (#"{"op":"checkin.revoke",\#(c),"owner_token":"o","member":4294967296}"#, "invalid_member", "member"),
            (#"{"op":"checkin.answer",\#(c),"owner_token":"o","status":"red"}"#, "invalid_status", "status"),
            (#"{"op":"checkin.answer",\#(c),"owner_token":"o","note":false}"#, "invalid_note", "note"),
            (#"{"op":"checkin.home",\#(c),"owner_token":"o"}"#, "invalid_home", nil),
            (#"{"op":"checkin.home",\#(c),"owner_token":"o","for_s":3601}"#, "invalid_home", "for_s"),
            (#"{"op":"checkin.home",\#(c),"owner_token":"o","until":-1}"#, "invalid_home", "until"),
            (#"{"op":"checkin.home",\#(c),"owner_token":"o","for_s":1,"until":5}"#, "invalid_home", nil),
            (#"{"op":"checkin.home",\#(c),"owner_token":"o","clear":1}"#, "invalid_home", "clear"),
            (#"{"op":"checkin.bogus"}"#, "unknown_op", "op"),
        ]
        for (text, code, field) in cases {
            let e = error(text)
            #expect(e?.code == code && e?.field == field, "\(text): \(String(describing: e))")
        }
    }
}

import Testing
@testable import VigilCore

/// The rule for top-level members (`RequestDecoder+Fields`): every operation refuses a member it
/// does not define, naming it, and takes `op`, `ref` and its own fields.
@Suite struct RequestDecoderFieldsTests {
    let decoder = RequestDecoder(settings: PinSettings())

    func decode(_ text: String) -> Result<ClientRequest, RejectedRequest> {
        Array(text.utf8).withUnsafeBytes { decoder.decode($0) }
    }

    /// A valid message of each operation, as its members after `op` and `ref`. Keyed by the
    /// operation's name: an operation added to `ClientOperation.names` without a sample here
    /// fails `everyOperationIsCovered`, so none escapes the tests below.
    static let samples: [String: [String]] = [
        "subscribe": [#""area":{"bbox":[1,2,3,4]}"#],
        "unsubscribe": [],
        "pin.create": [#""pin":{"lat":1,"lon":2,"title":"t"}"#],
        "pin.update": [#""id":"x""#, #""edit_token":"t""#, #""changes":{"title":"u"}"#],
        "pin.delete": [#""id":"x""#, #""edit_token":"t""#],
        "pin.vote": [#""id":"x""#, #""value":1"#],
        "panic.start": [#""status":"red""#, #""lat":1"#, #""lon":2"#],
        "panic.update": [#""stream":"s""#, #""lat":1"#, #""lon":2"#],
        "panic.status": [#""stream":"s""#, #""status":"amber""#],
        "panic.end": [#""stream":"s""#, #""reason":"safe""#],
        "panic.resume": [#""stream":"s""#, #""owner_token":"o""#],
        "panic.watch": [#""stream":"s""#, #""watch_token":"w""#],
        "panic.unwatch": [#""stream":"s""#],
        "panic.invite": [#""stream":"s""#],
        "panic.revoke": [#""stream":"s""#, #""watch_token":"w""#],
        "panic.timer": [#""stream":"s""#, #""cancel":true"#],
        "panic.rekey": [#""stream":"s""#, #""kid":"oKGio6SlpqeoqaqrrK2urw""#],
        "checkin.create": [#""members":["Mum"]"#],
        "checkin.open": [#""circle":"c""#, #""owner_token":"o""#],
        "checkin.invite": [#""circle":"c""#, #""owner_token":"o""#],
        "checkin.revoke": [#""circle":"c""#, #""owner_token":"o""#, #""member":1"#],
        "checkin.answer": [#""circle":"c""#, #""owner_token":"o""#],
        "checkin.home": [#""circle":"c""#, #""owner_token":"o""#, #""clear":true"#],
        "checkin.close": [#""circle":"c""#, #""owner_token":"o""#],
        "checkin.join": [#""circle":"c""#, #""member_token":"m""#],
        "checkin.request": [#""circle":"c""#, #""member_token":"m""#],
        "checkin.leave": [#""circle":"c""#],
        "checkin.register": [#""circle":"c""#, #""member_token":"m""#, #""relay":{"handle":"h"}"#],
        "checkin.unregister": [#""circle":"c""#, #""owner_token":"o""#, #""subscription":"s""#],
        "checkin.ack": [#""circle":"c""#, #""member_token":"m""#, #""notice":"n""#],
    ]

    static func message(_ op: String, _ members: [String]) -> String {
        "{" + ([#""op":"\#(op)""#, #""ref":7"#] + members).joined(separator: ",") + "}"
    }

    @Test func everyOperationIsCovered() {
        #expect(Set(Self.samples.keys) == Set(ClientOperation.names))
        #expect(Set(RequestDecoder.operationFields.keys) == Set(ClientOperation.names))
    }

    /// Each operation: its valid message is accepted; the same with one member more is refused
    /// with `unknown_field` naming that member, wherever it stands, and the `ref` is echoed.
    @Test(arguments: ClientOperation.names)
    func aStrayTopLevelFieldIsRefused(op: String) throws {
        let members = try #require(Self.samples[op], "no sample of \(op)")
        let accepted = try decode(Self.message(op, members)).get()
        #expect(accepted.operation.name == op && accepted.ref == .number(7))
        let fields = try #require(RequestDecoder.operationFields[op])
        for stray in [#""colour":"red""#, #""note":"hi""#, #""op_":1"#, #""REF":1"#] {
            let name = String(stray.dropFirst().prefix { $0 != "\"" })
            if fields.contains(name) { continue }   // `note` is a field of panic.start and checkin.answer
            for at in [0, members.count] {
                var withStray = members
                withStray.insert(stray, at: at)
                guard case .failure(let rejected) = decode(Self.message(op, withStray)) else {
                    Issue.record("\(op) with \(stray) was accepted")
                    continue
                }
                #expect(rejected.error.code == "unknown_field" && rejected.error.field == name, "\(op) with \(stray): \(rejected.error)")
                #expect(rejected.ref == .number(7))
            }
        }
    }

    /// The table admits no field its operation does not read: a value that no field takes (an
    /// object with a member no object defines) is refused for each field, never dropped.
    @Test(arguments: ClientOperation.names)
    func everyAdmittedFieldIsRead(op: String) throws {
        let fields = try #require(RequestDecoder.operationFields[op])
        let members = try #require(Self.samples[op])
        for field in fields {
            let others = members.filter { !$0.hasPrefix("\"\(field)\":") }
            let text = Self.message(op, others + [#""\#(field)":{"bogus":true}"#])
            guard case .failure(let rejected) = decode(text) else {
                Issue.record("\(op): \(field) is admitted but its value is not read")
                continue
            }
            #expect(rejected.error.field?.hasPrefix(field) == true, "\(op).\(field): \(rejected.error)")
        }
    }

    /// The issue's case: a note on a check-in request was answered `ok` and dropped.
    @Test func aNoteOnACheckInRequestIsNamed() throws {
        guard case .failure(let rejected) = decode(#"{"op":"checkin.request","ref":"r","circle":"c","member_token":"m","note":"hi"}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(rejected.error == RequestError("unknown_field", field: "note", "note is not a field of this operation"))
        #expect(rejected.ref == .string("r"))
    }

    /// Stray members are judged before values, as inside `pin`: a misspelt required field is
    /// named as what it is. An unknown op is still `unknown_op`, whatever else it carries.
    @Test func strayMembersComeBeforeValuesAndAfterTheOp() throws {
        let cases: [(String, String, String)] = [
            (#"{"op":"checkin.request","circle":"c","membertoken":"m"}"#, "unknown_field", "membertoken"),
            (#"{"op":"panic.timer","stream":"s","due_in":60}"#, "unknown_field", "due_in"),
            (#"{"op":"pin.vote","id":7,"value":9,"why":"x"}"#, "unknown_field", "why"),
            (#"{"op":"fly","colour":"red"}"#, "unknown_op", "op"),
        ]
        for (text, code, field) in cases {
            guard case .failure(let rejected) = decode(text) else {
                Issue.record("\(text) was accepted")
                continue
            }
            #expect(rejected.error.code == code && rejected.error.field == field, "\(text): \(rejected.error)")
        }
        let long = String(repeating: "k", count: 500)
        guard case .failure(let rejected) = decode(#"{"op":"unsubscribe","\#(long)":1}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(rejected.error.field == String(repeating: "k", count: 64))
        // A member named "": refused, and no empty `field` (the fuzzer holds every refusal to that).
        guard case .failure(let empty) = decode(#"{"op":"unsubscribe","":1}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(empty.error.code == "unknown_field" && empty.error.field == nil)
    }
}

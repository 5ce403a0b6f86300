import Testing
import VigilCore
@testable import VigilNATS

@Suite struct NATSEncoderTests {
    private func text(_ body: (inout [UInt8]) throws -> Void) rethrows -> String {
        var out: [UInt8] = []
        try body(&out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func encodesOperations() throws {
        #expect(try text { try NATSEncoder.publish(subject: "a.b", payload: Array("hi".utf8), maxPayload: 10, into: &$0) } == "PUB a.b 2\r\nhi\r\n")
        #expect(try text { try NATSEncoder.publish(subject: "a", replyTo: "_INBOX.x.1", payload: [], maxPayload: 10, into: &$0) }
                == "PUB a _INBOX.x.1 0\r\n\r\n")
        let headers = NATSHeaders(fields: [("Nats-Msg-Id", "n1-7")])
        #expect(try text { try NATSEncoder.publish(subject: "v.pins", replyTo: "_INBOX.x.2", headers: headers, payload: Array("{}".utf8), maxPayload: 100, into: &$0) }
                == "HPUB v.pins _INBOX.x.2 31 33\r\nNATS/1.0\r\nNats-Msg-Id: n1-7\r\n\r\n{}\r\n")
        #expect(try text { try NATSEncoder.subscribe(subject: "_INBOX.x.*", sid: 1, into: &$0) } == "SUB _INBOX.x.* 1\r\n")
        #expect(try text { try NATSEncoder.subscribe(subject: "v.>", queue: "q", sid: 22, into: &$0) } == "SUB v.> q 22\r\n")
        #expect(text { NATSEncoder.unsubscribe(sid: 5, into: &$0) } == "UNSUB 5\r\n")
        #expect(text { NATSEncoder.unsubscribe(sid: 5, afterMessages: 1, into: &$0) } == "UNSUB 5 1\r\n")
        #expect(text { NATSEncoder.ping(into: &$0) } == "PING\r\n")
        #expect(text { NATSEncoder.pong(into: &$0) } == "PONG\r\n")
    }

    /// What we encode, the parser (playing the server's MSG side) reads back unchanged.
    @Test func headersRoundTrip() throws {
        let headers = NATSHeaders(status: 100, statusDescription: "Idle Heartbeat", fields: [("Nats-Last-Consumer", "4"), ("X", "a b")])
        var block: [UInt8] = []
        try headers.encode(into: &block)
        #expect(try NATSHeaders.decode(block[...]) == headers)
    }

    @Test func refusesWhatTheServerWouldReject() {
        var out: [UInt8] = []
        #expect(throws: NATSEncodeError.invalidSubject("'a b' contains whitespace or a control character")) {
            try NATSEncoder.publish(subject: "a b", payload: [], maxPayload: 10, into: &out)
        }
        #expect(throws: NATSEncodeError.invalidSubject("'a.*' contains a wildcard")) {
            try NATSEncoder.publish(subject: "a.*", payload: [], maxPayload: 10, into: &out)
        }
        #expect(throws: NATSEncodeError.invalidSubject("'a.>.b' has '>' before the last token")) {
            try NATSEncoder.subscribe(subject: "a.>.b", sid: 1, into: &out)
        }
        #expect(throws: NATSEncodeError.invalidSubject("'a..b' has an empty token")) {
            try NATSEncoder.subscribe(subject: "a..b", sid: 1, into: &out)
        }
        #expect(throws: NATSEncodeError.payloadTooLarge(size: 11, limit: 10)) {
            try NATSEncoder.publish(subject: "a", payload: [UInt8](repeating: 0, count: 11), maxPayload: 10, into: &out)
        }
        #expect(throws: NATSEncodeError.invalidHeader("value of 'K' holds a control character")) {
            try NATSEncoder.publish(subject: "a", headers: NATSHeaders(fields: [("K", "x\r\nForged: 1")]), payload: [], maxPayload: 100, into: &out)
        }
        #expect(out.isEmpty)
    }

    @Test func connectCarriesTheOptionsAndCredentials() throws {
        var out: [UInt8] = []
        NATSConnectOptions(name: "vigil-n1", credentials: .userPassword(user: "u", password: "p\"w"), version: "1.0").encode(into: &out)
        let line = String(decoding: out, as: UTF8.self)
        #expect(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"))
        let json = try JSONParser.parse(Array(out.dropFirst(8).dropLast(2)))
        let object = try #require(json.object)
        #expect(object["verbose"] == .bool(false) && object["pedantic"] == .bool(false))
        #expect(object["headers"] == .bool(true) && object["no_responders"] == .bool(true))
        #expect(object["name"] == .string("vigil-n1") && object["lang"] == .string("swift") && object["version"] == .string("1.0"))
        #expect(object["user"] == .string("u") && object["pass"] == .string("p\"w") && object["auth_token"] == nil)
        out = []
        NATSConnectOptions(name: "n", credentials: .token("t0k")).encode(into: &out)
        let tokenObject = try #require(try JSONParser.parse(Array(out.dropFirst(8).dropLast(2))).object)
        #expect(tokenObject["auth_token"] == .string("t0k") && tokenObject["user"] == nil)
    }
}

import Testing
@testable import VigilWire

/// The request bytes, and what the encoder refuses.
@Suite struct HTTPRequestEncoderTests {
    static func encode(_ request: OutgoingRequest, authority: String = "push.example") throws(HTTPRequestEncoder.Problem) -> String {
        var out: [UInt8] = Array("kept".utf8)
        try HTTPRequestEncoder.encode(request, authority: authority, into: &out)
        return String(decoding: out.dropFirst(4), as: UTF8.self)
    }

    @Test func postWithBody() throws {
        let request = OutgoingRequest(target: "/wpush/v2/abc?x=1", headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm")],
                                      body: Array("hi".utf8))
        #expect(try Self.encode(request) == "POST /wpush/v2/abc?x=1 HTTP/1.1\r\nHost: push.example\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\nContent-Length: 2\r\n\r\nhi")
    }

    @Test func lengthOnlyWhereTheMethodHasABody() throws {
        #expect(try Self.encode(OutgoingRequest(target: "/")) == "POST / HTTP/1.1\r\nHost: push.example\r\nContent-Length: 0\r\n\r\n")
        #expect(try Self.encode(OutgoingRequest(method: "GET", target: "/a"), authority: "[::1]:8080") == "GET /a HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n")
        #expect(try Self.encode(OutgoingRequest(method: "DELETE", target: "/", body: [1])).hasSuffix("Content-Length: 1\r\n\r\n\u{01}"))
    }

    @Test func refusals() {
        let cases: [(OutgoingRequest, HTTPRequestEncoder.Problem)] = [
            (OutgoingRequest(method: "PO ST", target: "/"), .method),
            (OutgoingRequest(method: "", target: "/"), .method),
            (OutgoingRequest(target: "relative"), .target),
            (OutgoingRequest(target: "/a b"), .target),
            (OutgoingRequest(target: "/\u{e9}"), .target),
            (OutgoingRequest(target: "/", headers: [("Bad Name", "v")]), .fieldName),
            (OutgoingRequest(target: "/", headers: [("X", "a\r\nInjected: 1")]), .fieldValue),
            (OutgoingRequest(target: "/", headers: [("X", "a\u{0}")]), .fieldValue),
            (OutgoingRequest(target: "/", headers: [("content-LENGTH", "5")]), .reservedField("content-length")),
            (OutgoingRequest(target: "/", headers: [("Host", "evil")]), .reservedField("host")),
            (OutgoingRequest(target: "/", headers: [("Transfer-Encoding", "chunked")]), .reservedField("transfer-encoding")),
            (OutgoingRequest(target: "/", headers: [("Connection", "close")]), .reservedField("connection")),
            (OutgoingRequest(target: "/", headers: [("Expect", "100-continue")]), .reservedField("expect")),
        ]
        for (request, problem) in cases {
            var out: [UInt8] = [1, 2]
            #expect(throws: problem) { try HTTPRequestEncoder.encode(request, authority: "h", into: &out) }
            #expect(out == [1, 2], "a refused request leaves the buffer as it was")
        }
        // A tab inside a value and bytes past ASCII are allowed (RFC 9110 §5.5).
        #expect((try? Self.encode(OutgoingRequest(target: "/", headers: [("X", "a\tb \u{e9}")]))) != nil)
    }

    /// What the encoder writes, the server's own parser reads back as the same request.
    @Test func theRequestParserReadsItBack() throws {
        let request = OutgoingRequest(method: "PUT", target: "/x?y", headers: [("A", "1"), ("B", "two words")])
        let bytes = Array(try Self.encode(request, authority: "h:1").utf8)
        var parser = HTTPRequestParser()
        guard case .complete(let head, let leftover) = bytes.withUnsafeBytes({ parser.feed($0) }) else {
            Issue.record("not parsed")
            return
        }
        #expect(head.method == "PUT" && head.target == "/x?y" && head.value("host") == "h:1" && head.value("b") == "two words")
        #expect(leftover == 0)
    }
}

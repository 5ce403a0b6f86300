import Testing
@testable import VigilNATS

/// Feeds `bytes` split at `cuts` and collects every operation (or the error).
private func parseAll(_ bytes: [UInt8], cuts: [Int] = [], parser: NATSParser = NATSParser()) -> (ops: [NATSServerOp], error: NATSProtocolError?) {
    var parser = parser
    var ops: [NATSServerOp] = []
    var at = 0
    for cut in cuts + [bytes.count] {
        parser.append(Array(bytes[at..<cut]))
        at = cut
        while true {
            do {
                guard let op = try parser.next() else { break }
                ops.append(op)
            } catch {
                return (ops, error)
            }
        }
    }
    return (ops, nil)
}

private let info = #"INFO {"server_id":"NABC","server_name":"n1","version":"2.9.10","proto":1,"max_payload":1048576,"headers":true,"jetstream":true,"connect_urls":["127.0.0.1:4223"],"client_ip":"127.0.0.1"}"# + "\r\n"

private let stream: [UInt8] = Array((info
    + "PING\r\n"
    + "MSG a.b 7 5\r\nhello\r\n"
    + "msg a.b\t7  _INBOX.x.1 0\r\n\r\n"
    + "HMSG $JS.x 3 _INBOX.y.2 24 27\r\nNATS/1.0\r\nK: v\r\nB: 2\r\n\r\nabc\r\n"
    + "HMSG d 9 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
    + "+OK\r\nPONG\r\n-ERR 'Authorization Violation'\r\n").utf8)

@Suite struct NATSParserTests {
    @Test func parsesEveryServerOperation() throws {
        let (ops, error) = parseAll(stream)
        #expect(error == nil)
        try #require(ops.count == 9)
        guard case .info(let i) = ops[0] else { Issue.record("not info"); return }
        #expect(i.serverID == "NABC" && i.maxPayload == 1_048_576 && i.jetStream && i.headers)
        #expect(i.connectURLs == ["127.0.0.1:4223"])
        #expect(ops[1] == .ping)
        #expect(ops[2] == .message(NATSMessage(subject: "a.b", sid: 7, payload: Array("hello".utf8))))
        #expect(ops[3] == .message(NATSMessage(subject: "a.b", sid: 7, replyTo: "_INBOX.x.1", payload: [])))
        let headers = NATSHeaders(fields: [("K", "v"), ("B", "2")])
        #expect(ops[4] == .message(NATSMessage(subject: "$JS.x", sid: 3, replyTo: "_INBOX.y.2", headers: headers, payload: Array("abc".utf8))))
        guard case .message(let noResponders) = ops[5] else { Issue.record("not a message"); return }
        #expect(noResponders.status == 503 && noResponders.payload.isEmpty)
        #expect(ops[6] == .ok && ops[7] == .pong)
        #expect(ops[8] == .error("Authorization Violation"))
    }

    /// The property every incremental parser owes: the same operations whatever the split.
    @Test func everySplitGivesTheSameOperations() {
        let whole = parseAll(stream).ops
        for cut in 1..<stream.count {
            #expect(parseAll(stream, cuts: [cut]).ops == whole, "split at \(cut)")
        }
        #expect(parseAll(stream, cuts: Array(1..<stream.count)).ops == whole, "byte by byte")
    }

    @Test func infoSetsMaxPayloadCappedByTheClient() throws {
        var parser = NATSParser(payloadCap: 4096)
        parser.append(Array(info.utf8))
        guard case .info(let i) = try parser.next() else { Issue.record("no info"); return }
        #expect(i.maxPayload == 4096 && parser.maxPayload == 4096)
        parser.append(Array("MSG a 1 4097\r\n".utf8))
        #expect(throws: NATSProtocolError.payloadTooLarge(size: 4097, limit: 4096)) { try parser.next() }
        // Failed for good: more bytes change nothing.
        parser.append(Array("PING\r\n".utf8))
        #expect(throws: NATSProtocolError.payloadTooLarge(size: 4097, limit: 4096)) { try parser.next() }
    }

    @Test func controlLinesAreBounded() {
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: 5000)
        #expect(parseAll(Array("MSG ".utf8) + long).error == .controlLineTooLong(limit: 4096))
        // INFO may be longer (a cluster's URL list), up to its own bound.
        let longInfo = Array("INFO {\"max_payload\":1,\"x\":\"".utf8) + long + Array("\"}\r\n".utf8)
        #expect(parseAll(longInfo).error == nil)
        // Found by the fuzzer: a long line that arrives whole, CRLF included, is refused too.
        #expect(parseAll(Array("MSG ".utf8) + long + Array(" 1 0\r\n\r\n".utf8)).error == .controlLineTooLong(limit: 4096))
        let tooLongInfo = Array("INFO ".utf8) + [UInt8](repeating: 0x20, count: 70_000)
        #expect(parseAll(tooLongInfo).error == .controlLineTooLong(limit: 65_536))
    }

    @Test(arguments: [
        ("FOO bar\r\n", NATSProtocolError.unknownOperation("FOO bar")),
        ("MSG a 1\r\n", .malformed(operation: "MSG", reason: "2 arguments")),
        ("MSG a x 1\r\n", .malformed(operation: "MSG", reason: "sid is not a number")),
        ("MSG a 1 -1\r\n", .malformed(operation: "MSG", reason: "size is not a number")),
        ("MSG a 1 99999999999\r\n", .malformed(operation: "MSG", reason: "size is not a number")),
        ("MSG a 1 2\r\nabcd", .missingPayloadTerminator),
        ("PING\n", .malformed(operation: "line", reason: "LF without CR")),
        ("HMSG a 1 30 20\r\n", .malformed(operation: "HMSG", reason: "header size is not a number within the total size")),
        ("HMSG a 1 4 4\r\n", .malformed(operation: "HMSG", reason: "header size 4 too small for NATS/1.0 and CRLFs")),
        ("HMSG a 1 12 12\r\nHTTP/1.1\r\n\r\n\r\n", .badHeaders("does not start with NATS/1.0")),
        ("HMSG a 1 15 15\r\nNATS/1.0\r\nK\r\n\r\n\r\n", .badHeaders("line without ':'")),
        ("HMSG a 1 16 16\r\nNATS/1.0 5x3\r\n\r\n\r\n", .badHeaders("status is not three digits")),
        // Found by the fuzzer: a status with a leading zero decoded, then failed to re-encode.
        ("HMSG a 1 16 16\r\nNATS/1.0 006\r\n\r\n\r\n", .badHeaders("status is not three digits")),
        ("INFO {}\r\n", .badInfo("max_payload missing or not a positive integer")),
        ("INFO [1]\r\n", .badInfo("not a JSON object")),
        ("MSG a\u{1}b 1 0\r\n\r\n", .malformed(operation: "MSG", reason: "subject is not printable UTF-8 within 1024 bytes")),
    ])
    func refusesMalformedInput(_ input: String, _ expected: NATSProtocolError) {
        #expect(parseAll(Array(input.utf8)).error == expected)
    }

    @Test func errorTextIsSanitized() {
        let (ops, _) = parseAll(Array("-ERR 'bad\u{7}thing'\r\n".utf8))
        #expect(ops == [.error("bad?thing")])
    }

    @Test func bufferIsReleasedAsOperationsAreRead() throws {
        var parser = NATSParser()
        for _ in 0..<1000 {
            parser.append(Array("MSG a 1 3\r\nabc\r\nPI".utf8))
            _ = try parser.next()
            parser.append(Array("NG\r\n".utf8))
            #expect(try parser.next() == .ping)
        }
        #expect(parser.bufferedBytes == 0)
    }
}

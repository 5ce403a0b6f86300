import Testing
@testable import VigilWire

/// Whole responses read by `HTTPResponseReader`, every input split at every byte boundary and
/// fed a byte at a time: the same message (or the same failure) whatever the split.
@Suite struct HTTPResponseReaderTests {
    /// Feeds `chunks` in order; the first result that is not `needMore` with the leftover bytes
    /// (those after the response in the last chunk fed, and every chunk after it), or the end of
    /// input's result when `close` is set.
    static func read(_ chunks: [[UInt8]], close: Bool = false, limits: HTTPResponseReader.Limits = .init(),
                     head: Bool = false) -> (HTTPResponseReadResult, [UInt8]) {
        var reader = HTTPResponseReader(limits: limits, requestWasHead: head)
        for (i, chunk) in chunks.enumerated() {
            let result = chunk.withUnsafeBytes { reader.feed($0) }
            switch result {
            case .needMore:
                continue
            case .complete(_, let leftover):
                return (result, Array(chunk.suffix(leftover)) + chunks[(i + 1)...].flatMap { $0 })
            case .failure:
                return (result, [])
            }
        }
        return (close ? reader.endOfInput() : .needMore, [])
    }

    /// Every split of `text` into two chunks, and into single bytes, gives `expected`.
    static func everySplit(_ text: String, close: Bool = false, limits: HTTPResponseReader.Limits = .init(), head: Bool = false,
                           _ expected: (HTTPResponseReadResult, [UInt8]) -> Void) {
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            let (result, leftover) = read([Array(bytes[..<cut]), Array(bytes[cut...])], close: close, limits: limits, head: head)
            expected(result, leftover)
        }
        let (result, leftover) = read(bytes.map { [$0] }, close: close, limits: limits, head: head)
        expected(result, leftover)
    }

    static func message(_ result: HTTPResponseReadResult) -> HTTPResponseMessage? {
        if case .complete(let message, _) = result { return message }
        return nil
    }

    static func failure(_ result: HTTPResponseReadResult) -> HTTPResponseError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    @Test func contentLengthBodyWithPipelinedBytesAfterIt() {
        let text = "HTTP/1.1 201 Created\r\nLocation: /m/1\r\nContent-Length: 5\r\n\r\nhelloXY"
        Self.everySplit(text) { result, leftover in
            let m = Self.message(result)
            #expect(m?.statusCode == 201 && m?.body == Array("hello".utf8) && m?.keepAlive == true)
            #expect(m?.value("location") == "/m/1")
            #expect(leftover == Array("XY".utf8))
        }
    }

    @Test func chunkedBodyWithExtensionsAndTrailers() {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "4;name=value\r\nWiki\r\n5 \r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nDigest: abc\r\nX-Tail: 1\r\n\r\n"
        Self.everySplit(text) { result, leftover in
            let m = Self.message(result)
            #expect(m.map { String(decoding: $0.body, as: UTF8.self) } == "Wikipedia in\r\n\r\nchunks.")
            #expect(m?.trailers.map(\.name) == ["Digest", "X-Tail"] && m?.keepAlive == true)
            #expect(leftover.isEmpty)
        }
    }

    @Test func responsesWithoutABody() {
        for text in ["HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"] {
            Self.everySplit(text) { result, _ in
                #expect(Self.message(result)?.body == [] && Self.message(result)?.keepAlive == true)
            }
        }
        // HEAD: the length names what a GET would carry.
        Self.everySplit("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", head: true) { result, _ in
            #expect(Self.message(result)?.body == [])
        }
    }

    @Test func interimResponsesAreSkipped() {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        Self.everySplit(text) { result, _ in
            #expect(Self.message(result)?.statusCode == 200 && Self.message(result)?.body == Array("ok".utf8))
        }
        Self.everySplit("HTTP/1.1 101 Switching Protocols\r\n\r\n") { result, _ in
            #expect(Self.failure(result) == .malformed("101 Switching Protocols to a request without Upgrade"))
        }
        let many = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 9) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        #expect(Self.failure(Self.read([Array(many.utf8)]).0) == .malformed("more than 8 interim responses"))
    }

    @Test func bodyUntilCloseEndsWithTheConnection() {
        Self.everySplit("HTTP/1.1 200 OK\r\n\r\nall of it", close: true) { result, _ in
            let m = Self.message(result)
            #expect(m?.body == Array("all of it".utf8) && m?.keepAlive == false)
        }
        // Transfer-Encoding that does not end in chunked: until close too.
        Self.everySplit("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", close: true) { result, _ in
            #expect(Self.message(result)?.body == Array("zz".utf8) && Self.message(result)?.keepAlive == false)
        }
    }

    @Test func connectionCloseAndHTTP10AreNotKeptAlive() {
        Self.everySplit("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n") { result, _ in
            #expect(Self.message(result)?.keepAlive == false)
        }
        Self.everySplit("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx") { result, _ in
            #expect(Self.message(result)?.keepAlive == false)
        }
        // Transfer-Encoding beside Content-Length: chunked wins, and the connection is not reused.
        Self.everySplit("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n") { result, _ in
            #expect(Self.message(result)?.body == [UInt8(ascii: "x")] && Self.message(result)?.keepAlive == false)
        }
    }

    @Test func closedBeforeTheEnd() {
        for text in ["", "HTTP/1.1 200", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"] {
            Self.everySplit(text, close: true) { result, _ in
                #expect(Self.failure(result) == .closedEarly, "\(text.debugDescription)")
            }
        }
    }

    @Test func bodyPastTheKeptBytesIsCountedNotKept() {
        let limits = HTTPResponseReader.Limits(maxKeptBodyBytes: 4, maxBodyBytes: 64)
        Self.everySplit("HTTP/1.1 500 Oops\r\nContent-Length: 20\r\n\r\n0123456789abcdefghij", limits: limits) { result, _ in
            let m = Self.message(result)
            #expect(m?.body == Array("0123".utf8) && m?.discardedBodyBytes == 16 && m?.keepAlive == true)
        }
        Self.everySplit("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", limits: limits) { result, _ in
            #expect(Self.message(result)?.body == Array("abcd".utf8) && Self.message(result)?.discardedBodyBytes == 2)
        }
    }

    @Test func limitsFailAsTooLarge() {
        let limits = HTTPResponseReader.Limits(maxHeadBytes: 64, maxHeaderCount: 2, maxBodyBytes: 8, maxTrailerBytes: 16)
        let cases = [
            "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n5\r\nabcde\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\n\r\n123456789",
            "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 60) + "\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Long-Trailer: 0123456789\r\n\r\n",
        ]
        for text in cases {
            Self.everySplit(text, limits: limits) { result, _ in
                guard case .tooLarge = Self.failure(result) else {
                    Issue.record("\(text.debugDescription): \(result)")
                    return
                }
            }
        }
    }

    @Test func malformedResponses() {
        let cases = [
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n bad: fold\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\rx",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ]
        for text in cases {
            Self.everySplit(text) { result, _ in
                guard case .malformed = Self.failure(result) else {
                    Issue.record("\(text.debugDescription): \(result)")
                    return
                }
            }
        }
    }

    @Test func aFinishedReaderRepeatsItself() {
        var reader = HTTPResponseReader()
        let first = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8).withUnsafeBytes { reader.feed($0) }
        #expect(Self.message(first) != nil)
        let again = Array("more".utf8).withUnsafeBytes { reader.feed($0) }
        guard case .complete(_, let leftover) = again else { return #expect(Bool(false)) }
        #expect(leftover == 4)
        #expect(!HTTPResponseReader().started && reader.started)
    }
}

import Testing
@testable import VigilWire
import VigilTestSupport

/// RFC 9112 request head parsing, incremental and bounded.
@Suite struct HTTPRequestParserTests {
    @Test func parsesTheRFC6455Sample() {
        guard let h = head(parseRequest(sampleRequest)) else {
            Issue.record("no head")
            return
        }
        #expect(h.method == "GET" && h.target == "/chat?room=1" && h.path == "/chat")
        #expect(h.versionMajor == 1 && h.versionMinor == 1)
        #expect(h.headers.count == 7)
        #expect(h.value("HOST") == "server.example.com")
        #expect(h.tokens("sec-websocket-protocol") == ["chat", "superchat"])
    }

    @Test func splitAtEveryByte() {
        let bytes = Array(sampleRequest.utf8)
        guard let whole = head(parseRequest([bytes])) else {
            Issue.record("no head")
            return
        }
        for cut in 0...bytes.count {
            let result = parseRequest([Array(bytes[..<cut]), Array(bytes[cut...])])
            guard case .complete(let h, let leftover) = result else {
                Issue.record("split \(cut): \(result)")
                continue
            }
            #expect(leftover == 0)
            #expect(h.target == whole.target && h.headers.elementsEqual(whole.headers, by: { $0 == $1 }))
        }
        let oneByOne = parseRequest(bytes.map { [$0] })
        #expect(head(oneByOne)?.headers.count == 7)
    }

    @Test func leftoverBytes() {
        let frame: [UInt8] = [0x81, 0x80, 1, 2, 3, 4]
        let bytes = Array(sampleRequest.utf8) + frame
        guard case .complete(_, let leftover) = parseRequest([Array(bytes[..<10]), Array(bytes[10...])]) else {
            Issue.record("incomplete")
            return
        }
        #expect(leftover == frame.count)
        // Head ends exactly at a chunk boundary, frame in the next feed: leftover 0 then all.
        var parser = HTTPRequestParser()
        let head = Array(sampleRequest.utf8)
        guard case .complete(_, let first) = head.withUnsafeBytes({ parser.feed($0) }) else {
            Issue.record("incomplete")
            return
        }
        #expect(first == 0)
        guard case .complete(_, let again) = frame.withUnsafeBytes({ parser.feed($0) }) else {
            Issue.record("finished parser must repeat its head")
            return
        }
        #expect(again == frame.count)
    }

    /// Bytes that cannot be in a request line fail at once, not at a line end that may never
    /// come: a TLS ClientHello sent to the plain port is answered with 400 right away.
    @Test func bytesThatCannotStartARequestLineFailBeforeTheLineEnds() {
        let clientHello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]
        for prefix in [clientHello, Array("GE\u{7F}".utf8), Array("GET /a\u{1}".utf8), Array("G(T".utf8), [0xC3, 0xA9]] {
            var parser = HTTPRequestParser()
            guard case .failure(.badRequest, _) = prefix.withUnsafeBytes({ parser.feed($0) }) else {
                Issue.record("\(prefix) was not refused before its line end")
                continue
            }
        }
        // What can still become a request line waits for more.
        for prefix in ["G", "GET", "GET ", "GET /chat?x=1 HTT", "\r\n", "M-SEARCH * "] {
            var parser = HTTPRequestParser()
            guard case .needMore = Array(prefix.utf8).withUnsafeBytes({ parser.feed($0) }) else {
                Issue.record("\(prefix.debugDescription) was refused")
                continue
            }
        }
    }

    @Test func bareLFAndLeadingEmptyLines() {
        let result = parseRequest("\r\n\nGET / HTTP/1.1\nHost: a\n\n")
        #expect(head(result)?.value("host") == "a")
    }

    @Test func headTooLargeFailsBeforeItEnds() {
        var parser = HTTPRequestParser(maxHeadBytes: 100)
        let start = Array("GET / HTTP/1.1\r\nX-Long: ".utf8)
        #expect({ if case .needMore = start.withUnsafeBytes({ parser.feed($0) }) { return true }; return false }())
        let filler = [UInt8](repeating: 0x61, count: 200) // never reaches the blank line
        let result = filler.withUnsafeBytes { parser.feed($0) }
        #expect(failure(result)?.0 == 431)
        // Exactly at the limit is fine, one byte over is not.
        let exact = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        let n = exact.utf8.count
        #expect(head(parseRequest([Array(exact.utf8)], maxHeadBytes: n)) != nil)
        #expect(failure(parseRequest([Array(exact.utf8)], maxHeadBytes: n - 1))?.0 == 431)
        // Fed byte by byte, the failure comes at the byte that passes the limit.
        var small = HTTPRequestParser(maxHeadBytes: n - 1)
        var failedAt = -1
        for (i, byte) in exact.utf8.enumerated() {
            if failure([byte].withUnsafeBytes({ small.feed($0) })) != nil { failedAt = i; break }
        }
        #expect(failedAt == n - 2)
    }

    @Test func tooManyHeaders() {
        var text = "GET / HTTP/1.1\r\n"
        for i in 0..<5 { text += "X-\(i): v\r\n" }
        text += "\r\n"
        #expect(head(parseRequest([Array(text.utf8)], maxHeaderCount: 5)) != nil)
        #expect(failure(parseRequest([Array(text.utf8)], maxHeaderCount: 4))?.0 == 431)
    }

    @Test(arguments: [
        "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", // double space
        "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", // trailing space
        "GET /\r\nHost: a\r\n\r\n", // HTTP/0.9 style
        "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", // method not a token
        "GET / HTTP/1\r\nHost: a\r\n\r\n", // bad version
        "GET / http/1.1\r\nHost: a\r\n\r\n", // version is case-sensitive
        "GET / HTTP/1.10\r\nHost: a\r\n\r\n",
        "GET /a\u{7F}b HTTP/1.1\r\nHost: a\r\n\r\n", // control char in target
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n", // space before colon
        "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", // obs-fold
        "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", // bare CR
        "GET / HTTP/1.1\rHost: a\r\n\r\n", // bare CR as line end
        "GET / HTTP/1.1\r\nHost: a\u{01}\r\n\r\n", // control char in value
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty-name\r\n\r\n",
        "GET / HTTP/1.1\r\nBad[Name]: x\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n", // body
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
    ])
    func badRequests(_ text: String) {
        let result = parseRequest(text)
        #expect(failure(result)?.0 == 400, "\(text.debugDescription): \(result)")
    }

    @Test func specificMessages() {
        #expect(failure(parseRequest("GET / HTTP/1.1\r\nHost : a\r\n\r\n"))?.1 == "whitespace between header name and colon")
        #expect(failure(parseRequest("GET / HTTP/1.1\r\nHost: a\r\n x\r\n\r\n"))?.1 == "obsolete line folding in header")
        #expect(failure(parseRequest("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"))?.1 == "bare CR in request head")
        #expect(failure(parseRequest("GET / HTTP/1.1\r\nContent-Length: 1\r\n\r\n"))?.1.hasPrefix("request body not supported") == true)
    }

    @Test func bareCRSplitAcrossChunks() {
        let a = Array("GET / HTTP/1.1\r".utf8)
        #expect(failure(parseRequest([a, Array("X".utf8)]))?.0 == 400)
        #expect(head(parseRequest([a, Array("\nHost: a\r".utf8), Array("\n\r".utf8), Array("\n".utf8)])) != nil)
    }

    @Test func acceptedEdgeCases() {
        #expect(head(parseRequest("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n")) != nil)
        let h = head(parseRequest("GET / HTTP/1.1\r\nX:  \t padded value \t \r\nY:\r\nZ: caf\u{E9}\r\n\r\n"))
        #expect(h?.value("x") == "padded value")
        #expect(h?.value("y") == "")
        #expect(h?.value("z") == "café")
    }

    @Test func failureIsSticky() {
        var parser = HTTPRequestParser()
        let bad = Array("BAD LINE\r\n".utf8)
        #expect(failure(bad.withUnsafeBytes { parser.feed($0) })?.0 == 400)
        let good = Array(sampleRequest.utf8)
        #expect(failure(good.withUnsafeBytes { parser.feed($0) })?.0 == 400)
    }

    @Test func garbageNeverCrashes() {
        var rng = SplitMix64(state: 77)
        let alphabet = Array("GET /HTP1.\r\n: \tabcXYZ-\u{7F}".utf8) + [0, 0x80, 0xFF]
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...120, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
            let cut = Int.random(in: 0...bytes.count, using: &rng)
            _ = parseRequest([Array(bytes[..<cut]), Array(bytes[cut...])], maxHeadBytes: 64, maxHeaderCount: 3)
        }
    }
}

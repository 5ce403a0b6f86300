import Testing
@testable import VigilWire

/// Client-side response head parsing.
@Suite struct HTTPResponseParserTests {
    let text = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"

    @Test func splitAtEveryByteWithLeftover() {
        let bytes = Array(text.utf8) + [0x81, 0x00]
        for cut in 0...bytes.count {
            var parser = HTTPResponseParser()
            var result = Array(bytes[..<cut]).withUnsafeBytes { parser.feed($0) }
            if case .needMore = result {
                result = Array(bytes[cut...]).withUnsafeBytes { parser.feed($0) }
            }
            guard case .complete(let head, let leftover) = result else {
                Issue.record("cut \(cut): \(result)")
                continue
            }
            #expect(head.statusCode == 101 && head.reason == "Switching Protocols")
            let headCount = bytes.count - 2
            // Leftover counts bytes of the chunk that completed the head.
            #expect(leftover == (cut < headCount ? 2 : cut - headCount))
            #expect(Handshake.checkResponse(head, key: "dGhlIHNhbXBsZSBub25jZQ=="))
        }
    }

    @Test func statusLines() {
        func status(_ line: String) -> Int? {
            var parser = HTTPResponseParser()
            let bytes = Array((line + "\r\n\r\n").utf8)
            if case .complete(let head, _) = bytes.withUnsafeBytes({ parser.feed($0) }) { return head.statusCode }
            return nil
        }
        #expect(status("HTTP/1.1 404 Not Found") == 404)
        #expect(status("HTTP/1.1 200 ") == 200)
        #expect(status("HTTP/1.1 200") == 200)
        #expect(status("HTTP/1.1 20 OK") == nil)
        #expect(status("HTTP/1.1 2000 OK") == nil)
        #expect(status("HTTP/1.1 abc OK") == nil)
        #expect(status("HTTP/x 200 OK") == nil)
        #expect(status("HTTP/1.1 200 O\u{01}K") == nil)
    }

    @Test func limits() {
        var parser = HTTPResponseParser(maxHeadBytes: 50)
        let bytes = Array(text.utf8)
        guard case .failure = bytes.withUnsafeBytes({ parser.feed($0) }) else {
            Issue.record("should exceed the limit")
            return
        }
    }
}

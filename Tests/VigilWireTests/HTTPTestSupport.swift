@testable import VigilWire

/// Feeds chunks to a request parser and returns the first non-needMore result.
func parseRequest(_ chunks: [[UInt8]], maxHeadBytes: Int = 8192, maxHeaderCount: Int = 100) -> HTTPParseResult {
    var parser = HTTPRequestParser(maxHeadBytes: maxHeadBytes, maxHeaderCount: maxHeaderCount)
    for chunk in chunks {
        let result = chunk.withUnsafeBytes { parser.feed($0) }
        if case .needMore = result { continue }
        return result
    }
    return .needMore
}

func parseRequest(_ text: String) -> HTTPParseResult {
    parseRequest([Array(text.utf8)])
}

/// The failure status and message, or nil.
func failure(_ result: HTTPParseResult) -> (Int, String)? {
    if case .failure(let status, let message) = result { return (status.code, message) }
    return nil
}

func head(_ result: HTTPParseResult) -> HTTPRequestHead? {
    if case .complete(let head, _) = result { return head }
    return nil
}

let sampleRequest = """
    GET /chat?room=1 HTTP/1.1\r
    Host: server.example.com\r
    Upgrade: websocket\r
    Connection: Upgrade\r
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r
    Origin: http://example.com\r
    Sec-WebSocket-Protocol: chat, superchat\r
    Sec-WebSocket-Version: 13\r
    \r

    """

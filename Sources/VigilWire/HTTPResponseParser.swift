/// An incremental HTTP/1.1 response head parser (RFC 9112 §4) for the client
/// side of the WebSocket handshake, and for the head of every response the HTTP
/// client reads (`HTTPResponseReader` goes on with the body). Same line discipline
/// and limits as `HTTPRequestParser`; it reads only the head (a 101 has no body).
public struct HTTPResponseParser {
    /// Where in the head the parser is.
    private enum State {
        case statusLine
        case fields(HTTPResponseHead)
        case done(HTTPResponseHead)
        case failed(String)
    }

    private var lines: HTTPLineReader
    private let maxHeaderCount: Int
    private var state = State.statusLine
    /// The failure was a limit passed (the head's size or field count), not a syntax error.
    public private(set) var exceededLimit = false

    public init(maxHeadBytes: Int = 8192, maxHeaderCount: Int = 100) {
        lines = HTTPLineReader(maxBytes: maxHeadBytes)
        self.maxHeaderCount = max(0, maxHeaderCount)
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> HTTPResponseParseResult {
        var index = 0
        while true {
            switch state {
            case .failed(let message):
                return .failure(message)
            case .done(let head):
                return .complete(head, leftover: bytes.count - index)
            case .statusLine, .fields:
                break
            }
            switch lines.nextLine(bytes, index: &index) {
            case .needMore:
                return .needMore
            case .tooLong:
                exceededLimit = true
                return fail("response head larger than \(lines.maxBytes) bytes")
            case .bareCR:
                return fail("bare CR in response head")
            case .line:
                consumeLine()
            }
        }
    }

    private mutating func consumeLine() {
        let line = lines.line
        switch state {
        case .statusLine:
            if let head = HTTPResponseParser.parseStatusLine(line) {
                state = .fields(head)
            } else {
                state = .failed("malformed status line")
            }
        case .fields(var head):
            if line.isEmpty {
                state = .done(head)
            } else if line[0] == 0x20 || line[0] == 0x09 {
                state = .failed("obsolete line folding in header")
            } else if head.headers.count >= maxHeaderCount {
                exceededLimit = true
                state = .failed("more than \(maxHeaderCount) header fields")
            } else {
                switch HTTPSyntax.parseField(line) {
                case .success(let field):
                    state = .statusLine // drop the state's copy before appending
                    head.headers.append(field)
                    state = .fields(head)
                case .failure(let error):
                    state = .failed(error.message)
                }
            }
        case .done, .failed:
            break
        }
    }

    private mutating func fail(_ message: String) -> HTTPResponseParseResult {
        state = .failed(message)
        return .failure(message)
    }

    /// `HTTP-version SP 3DIGIT SP reason-phrase` (§4). The SP before an empty
    /// reason is tolerated missing.
    private static func parseStatusLine(_ line: [UInt8]) -> HTTPResponseHead? {
        let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let version = HTTPSyntax.parseVersion(parts[0]) else { return nil }
        let codeBytes = parts[1]
        guard codeBytes.count == 3 else { return nil }
        var code = 0
        for c in codeBytes {
            guard let d = HTTPSyntax.digit(c) else { return nil }
            code = code * 10 + d
        }
        var reason = ""
        if parts.count == 3 {
            guard parts[2].allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else { return nil }
            reason = String(decoding: parts[2], as: UTF8.self)
        }
        return HTTPResponseHead(
            versionMajor: version.major, versionMinor: version.minor,
            statusCode: code, reason: reason, headers: [])
    }
}

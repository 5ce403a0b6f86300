/// An incremental HTTP/1.1 request head parser (RFC 9112 §2-§6) for the
/// WebSocket upgrade request.
///
/// Feed chunks as they arrive. Each byte is looked at once; only the current
/// incomplete line is buffered, and the whole head is bounded by `maxHeadBytes`,
/// enforced as bytes arrive (431 as soon as the limit is passed, without waiting
/// for the end of the head). Vigil accepts no request bodies, so a non-zero
/// Content-Length or any Transfer-Encoding is refused.
///
/// Once `complete` or `failure` has been returned the parser is finished: later
/// feeds repeat the failure, or report the head again with the whole chunk as
/// leftover.
public struct HTTPRequestParser {
    /// Where in the head the parser is.
    private enum State {
        case requestLine
        case fields(HTTPRequestHead)
        case done(HTTPRequestHead)
        case failed(HTTPStatus, String)
    }

    private var lines: HTTPLineReader
    private let maxHeaderCount: Int
    private var state = State.requestLine

    public init(maxHeadBytes: Int = 8192, maxHeaderCount: Int = 100) {
        lines = HTTPLineReader(maxBytes: maxHeadBytes)
        self.maxHeaderCount = max(0, maxHeaderCount)
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> HTTPParseResult {
        var index = 0
        while true {
            switch state {
            case .failed(let status, let message):
                return .failure(status, message)
            case .done(let head):
                return .complete(head, leftover: bytes.count - index)
            case .requestLine, .fields:
                break
            }
            switch lines.nextLine(bytes, index: &index) {
            case .needMore:
                // A request line is visible ASCII and spaces: a byte outside that fails now,
                // not when a line end that may never come arrives (a TLS ClientHello on the
                // plain port would otherwise wait for the handshake timeout).
                if case .requestLine = state, !HTTPRequestParser.couldStartRequestLine(lines.line) {
                    return fail(.badRequest, "not an HTTP request (a TLS client on the plain port? use ws:// here)")
                }
                return .needMore
            case .tooLong:
                return fail(.headerFieldsTooLarge, "request head larger than \(lines.maxBytes) bytes")
            case .bareCR:
                return fail(.badRequest, "bare CR in request head")
            case .line:
                if let failure = consumeLine() { return failure }
            }
        }
    }

    /// Applies one complete line to the state; returns a failure result if any.
    private mutating func consumeLine() -> HTTPParseResult? {
        let line = lines.line
        switch state {
        case .requestLine:
            // §2.2: empty lines before the request line are ignored.
            if line.isEmpty { return nil }
            switch HTTPRequestParser.parseRequestLine(line) {
            case .success(let head):
                state = .fields(head)
                return nil
            case .failure(let message):
                return fail(.badRequest, message.text)
            }
        case .fields(var head):
            if line.isEmpty {
                if let message = HTTPRequestParser.bodyProblem(head) {
                    return fail(.badRequest, message)
                }
                state = .done(head)
                return nil
            }
            if line[0] == 0x20 || line[0] == 0x09 {
                // §5.2: obs-fold is obsolete; a server may reject it with 400.
                return fail(.badRequest, "obsolete line folding in header")
            }
            if head.headers.count >= maxHeaderCount {
                return fail(.headerFieldsTooLarge, "more than \(maxHeaderCount) header fields")
            }
            switch HTTPSyntax.parseField(line) {
            case .success(let field):
                // Release the state's copy first so the append does not copy the array.
                state = .requestLine
                head.headers.append(field)
                state = .fields(head)
                return nil
            case .failure(let error):
                return fail(.badRequest, error.message)
            }
        case .done, .failed:
            return nil
        }
    }

    private mutating func fail(_ status: HTTPStatus, _ message: String) -> HTTPParseResult {
        state = .failed(status, message)
        return .failure(status, message)
    }

    /// A request-line error message (wrapped so it can travel in a `Result`).
    private struct LineError: Error {
        var text: String
    }

    /// Whether `partial` (the start of a request line, before its line end) can still become one:
    /// only SP and visible ASCII, and the method part (up to the first SP) only token characters.
    static func couldStartRequestLine(_ partial: [UInt8]) -> Bool {
        var inMethod = true
        for b in partial {
            if b == 0x0D { continue }  // the line reader judges CRs (a CR may be the end's first half)
            if b == 0x20 { inMethod = false; continue }
            guard b > 0x20 && b < 0x7F else { return false }
            if inMethod && !HTTPSyntax.isTokenChar(b) { return false }
        }
        return true
    }

    /// `method SP request-target SP HTTP-version` (§3), single spaces only.
    private static func parseRequestLine(_ line: [UInt8]) -> Result<HTTPRequestHead, LineError> {
        let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(LineError(text: "malformed request line")) }
        guard HTTPSyntax.isToken(parts[0]) else { return .failure(LineError(text: "invalid method")) }
        let target = parts[1]
        // Visible ASCII only: no controls, spaces, DEL or non-ASCII (RFC 3986 targets are ASCII).
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(LineError(text: "invalid request target"))
        }
        guard let version = HTTPSyntax.parseVersion(parts[2]) else {
            return .failure(LineError(text: "invalid HTTP version"))
        }
        return .success(HTTPRequestHead(
            method: String(decoding: parts[0], as: UTF8.self),
            target: String(decoding: target, as: UTF8.self),
            versionMajor: version.major, versionMinor: version.minor, headers: []))
    }

    /// Vigil reads no request bodies (RFC 9112 §6.3): refuse any framing that
    /// announces one rather than leave its bytes to be misread as frames.
    private static func bodyProblem(_ head: HTTPRequestHead) -> String? {
        if !head.values("transfer-encoding").isEmpty {
            return "request body not supported (Transfer-Encoding)"
        }
        for value in head.values("content-length") where value != "0" {
            return "request body not supported (Content-Length)"
        }
        return nil
    }
}

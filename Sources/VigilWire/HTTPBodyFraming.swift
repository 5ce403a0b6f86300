/// How a response's body is delimited (RFC 9112 §6.3), and whether its connection may carry the
/// next request; decided once the head is read, from the head and the request's method.
public enum HTTPBodyFraming: Equatable, Sendable {
    /// No body: a response to HEAD, a 204, a 304 (1xx are interim and never get here).
    case none
    /// `Content-Length` bytes.
    case length(Int)
    /// The chunked transfer coding (`HTTPChunkedDecoder`).
    case chunked
    /// Everything until the server closes: a `Transfer-Encoding` that does not end in chunked,
    /// or neither field. The connection cannot be reused.
    case untilClose

    /// The framing of a final response (status 200-599) to a request with method HEAD or not.
    ///
    /// Refused as malformed, since each can make a reader and the server disagree on where the
    /// body ends (response splitting): `Content-Length` values that differ or are not digits,
    /// `Transfer-Encoding` in an HTTP/1.0 response (§6.1), a version other than 1.x.
    public static func of(_ head: HTTPResponseHead, requestWasHead: Bool) -> Result<HTTPBodyFraming, HTTPResponseError> {
        guard head.versionMajor == 1 else { return .failure(.malformed("HTTP/\(head.versionMajor).\(head.versionMinor) on an HTTP/1.1 connection")) }
        if requestWasHead || head.statusCode == 204 || head.statusCode == 304 { return .success(.none) }
        let codings = head.tokens("transfer-encoding")
        if !head.values("transfer-encoding").isEmpty {
            guard head.versionMinor >= 1 else { return .failure(.malformed("Transfer-Encoding in an HTTP/1.0 response")) }
            // §6.3 (3): Transfer-Encoding overrides Content-Length; such a connection is closed after.
            return .success(codings.last == "chunked" ? .chunked : .untilClose)
        }
        let lengths = head.values("content-length")
        if lengths.isEmpty { return .success(.untilClose) }
        // §6.3 (5): a list of identical values (a proxy's repeat) counts as one.
        var length: Int?
        for value in lengths {
            for part in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let digits = HTTPHeaderSearch.trimOWS(part)
                guard (1...18).contains(digits.count), digits.allSatisfy({ HTTPSyntax.digit($0) != nil }) else {
                    return .failure(.malformed("Content-Length is not a number"))
                }
                let n = digits.reduce(0) { $0 * 10 + HTTPSyntax.digit($1)! }
                if let length, length != n { return .failure(.malformed("Content-Length values differ")) }
                length = n
            }
        }
        return .success(.length(length!))
    }

    /// Whether the connection may carry another request after this response: HTTP/1.1, no
    /// `Connection: close`, a body with an end of its own, and no `Transfer-Encoding` beside a
    /// `Content-Length` (§6.3 (3) asks to close after such a message).
    public static func keepsAlive(_ head: HTTPResponseHead, framing: HTTPBodyFraming) -> Bool {
        guard head.versionMajor == 1, head.versionMinor >= 1, framing != .untilClose else { return false }
        if head.tokens("connection").contains("close") { return false }
        if framing == .chunked && !head.values("content-length").isEmpty { return false }
        return true
    }
}

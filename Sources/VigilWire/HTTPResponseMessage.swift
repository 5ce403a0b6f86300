/// A whole response as the HTTP client keeps it: the head, at most `maxKeptBodyBytes` of the
/// body (what a push service or a webhook receiver says back is a line of JSON or text; the rest
/// is counted, not kept), the trailers, and whether the connection may carry another request.
public struct HTTPResponseMessage: HTTPHeaderFields, Sendable {
    public var head: HTTPResponseHead
    /// The body's first bytes, up to the reader's `maxKeptBodyBytes`.
    public var body: [UInt8]
    /// Body bytes read past what was kept.
    public var discardedBodyBytes: Int
    /// Trailer fields of a chunked body (empty otherwise).
    public var trailers: [(name: String, value: String)]
    /// The connection may carry the next request (`HTTPBodyFraming.keepsAlive`).
    public var keepAlive: Bool

    public var statusCode: Int { head.statusCode }
    public var headers: [(name: String, value: String)] { head.headers }
}

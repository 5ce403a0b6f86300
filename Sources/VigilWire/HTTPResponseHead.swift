/// A parsed HTTP/1.1 response head (status line and fields, RFC 9112 §4), as the
/// load-test client sees the server's answer to its upgrade request.
public struct HTTPResponseHead: HTTPHeaderFields, Sendable {
    public var versionMajor: Int
    public var versionMinor: Int
    public var statusCode: Int
    public var reason: String
    /// Fields in arrival order, names as sent, values trimmed of OWS.
    public var headers: [(name: String, value: String)]

    public init(versionMajor: Int, versionMinor: Int, statusCode: Int, reason: String, headers: [(name: String, value: String)]) {
        self.versionMajor = versionMajor
        self.versionMinor = versionMinor
        self.statusCode = statusCode
        self.reason = reason
        self.headers = headers
    }
}

/// A parsed HTTP/1.1 request head (request line and header fields, RFC 9112 §3, §5).
public struct HTTPRequestHead: HTTPHeaderFields {
    public var method: String
    public var target: String
    public var versionMajor: Int
    public var versionMinor: Int
    /// Fields in arrival order, names as sent, values trimmed of OWS.
    public var headers: [(name: String, value: String)]

    public init(method: String, target: String, versionMajor: Int, versionMinor: Int, headers: [(name: String, value: String)]) {
        self.method = method
        self.target = target
        self.versionMajor = versionMajor
        self.versionMinor = versionMinor
        self.headers = headers
    }

    /// The request target without its query string.
    public var path: String {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            return String(target[..<q])
        }
        return target
    }
}

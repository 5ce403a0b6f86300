/// A parsed HTTP/1.1 request head (request line and header fields, RFC 9112 §3, §5).
public struct HTTPRequestHead {
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

    /// The first value of the named field (case-insensitive name).
    public func value(_ name: String) -> String? {
        HTTPHeaderSearch.value(headers, name)
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        HTTPHeaderSearch.values(headers, name)
    }

    /// Comma-separated list elements over all occurrences, trimmed and lowercased:
    /// for case-insensitive tokens such as `Connection` and `Upgrade`.
    public func tokens(_ name: String) -> [String] {
        HTTPHeaderSearch.elements(headers, name).map { $0.lowercased() }
    }

    /// Comma-separated list elements over all occurrences, trimmed, case kept:
    /// for case-sensitive lists such as `Sec-WebSocket-Protocol`.
    public func elements(_ name: String) -> [String] {
        HTTPHeaderSearch.elements(headers, name)
    }

    /// The request target without its query string.
    public var path: String {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            return String(target[..<q])
        }
        return target
    }
}

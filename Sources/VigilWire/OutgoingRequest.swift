/// A request vigild sends (a Web Push POST, a webhook): method, target, fields, body. The
/// origin it goes to is passed beside it, and the framing fields (`Host`, `Content-Length`,
/// `Connection`…) are the encoder's to write (`HTTPRequestEncoder`), not the caller's.
///
/// The target and some fields (a push endpoint's path, `Authorization`) are secrets of the
/// subscriber or the service: nothing in the client logs them.
public struct OutgoingRequest: Sendable {
    public var method: String
    /// Path and query in origin-form (`OutgoingURL.target`).
    public var target: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String = "POST", target: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }

    /// A response to HEAD has no body whatever its fields say (RFC 9110 §9.3.2).
    public var isHead: Bool { method == "HEAD" }
}

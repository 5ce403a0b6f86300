/// Writes an `OutgoingRequest` as HTTP/1.1 bytes (RFC 9112 §3, §5, §6) into the caller's buffer.
///
/// The encoder owns the framing: it writes `Host` (the origin's authority) right after the
/// request line, the caller's fields in order, then `Content-Length` whenever there is a body or
/// the method defines one (POST, PUT, PATCH: `Content-Length: 0` for an empty body, §6.2 and RFC
/// 9110 §8.6), then the body. No `Connection` field: HTTP/1.1 connections persist by default,
/// which is what the client's pool wants.
///
/// It refuses instead of repairing, since a request that would be read differently than meant is
/// worse than none: a method that is not a token, a target that is not origin-form visible ASCII,
/// a field name that is not a token, a value with a control character (CR, LF, NUL: a header
/// injection), and the fields that belong to the framing or the connection (`Host`,
/// `Content-Length`, `Transfer-Encoding`, `Connection`, `Keep-Alive`, `TE`, `Trailer`,
/// `Upgrade`, `Expect`: the client sends no 100-continue and waits for none). A refused request
/// leaves `out` as it was.
public enum HTTPRequestEncoder {
    /// Why a request was refused; the descriptions name the part, never its value.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case method, target, fieldName, fieldValue
        /// A field the encoder writes itself, or that would change the connection's behaviour.
        case reservedField(String)

        public var description: String {
            switch self {
            case .method: return "request method is not a token"
            case .target: return "request target is not a path starting with / in visible ASCII"
            case .fieldName: return "request field name is not a token"
            case .fieldValue: return "request field value holds a control character"
            case .reservedField(let name): return "request field \(name) is the client's to write"
            }
        }
    }

    /// Lowercased names of the fields the caller may not set.
    static let reserved: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade", "expect",
    ]

    /// Appends the request's bytes to `out`.
    public static func encode(_ request: OutgoingRequest, authority: String, into out: inout [UInt8]) throws(Problem) {
        try validate(request)
        out.reserveCapacity(out.count + 128 + request.target.utf8.count + request.body.count)
        out.append(contentsOf: request.method.utf8)
        out.append(0x20)
        out.append(contentsOf: request.target.utf8)
        out.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        out.append(contentsOf: authority.utf8)
        out.append(contentsOf: [13, 10])
        for (name, value) in request.headers {
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: value.utf8)
            out.append(contentsOf: [13, 10])
        }
        if !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(request.method) {
            out.append(contentsOf: "Content-Length: ".utf8)
            out.append(contentsOf: String(request.body.count).utf8)
            out.append(contentsOf: [13, 10])
        }
        out.append(contentsOf: [13, 10])
        out.append(contentsOf: request.body)
    }

    /// The checks `encode` makes, on their own (the client runs them when a request is handed in,
    /// so a bad one is refused before it waits in a queue).
    public static func validate(_ request: OutgoingRequest) throws(Problem) {
        guard HTTPSyntax.isToken(request.method.utf8) else { throw .method }
        let target = request.target.utf8
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .target }
        for (name, value) in request.headers {
            guard HTTPSyntax.isToken(name.utf8) else { throw .fieldName }
            guard !reserved.contains(name.lowercased()) else { throw .reservedField(name.lowercased()) }
            for c in value.utf8 where (c < 0x20 && c != 0x09) || c == 0x7F { throw .fieldValue }
        }
    }
}

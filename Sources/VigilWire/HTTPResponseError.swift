/// Why a response could not be read (`HTTPResponseReader`). The connection it came on is not
/// reused after any of them: where the next response would start is unknown.
public enum HTTPResponseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes break RFC 9112 (the reason says where, never quoting them).
    case malformed(String)
    /// Over a limit: the head's size or field count, the body's or the trailers' size.
    case tooLarge(String)
    /// The connection ended before the response did (before its first byte, too).
    case closedEarly

    public var description: String {
        switch self {
        case .malformed(let why): return "malformed response: \(why)"
        case .tooLarge(let why): return "response too large: \(why)"
        case .closedEarly: return "the connection closed before the response was complete"
        }
    }
}

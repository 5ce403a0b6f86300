/// Why bytes from a NATS server were refused. Once a parser reports one it keeps reporting it:
/// the connection is closed and a new one starts clean.
///
/// Every case says what was wrong in words an operator can act on; none carries the offending
/// bytes beyond a short, printable-ASCII excerpt (a hostile peer must not write into our logs).
public enum NATSProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No CRLF within `limit` bytes of a control line's start.
    case controlLineTooLong(limit: Int)
    /// The line did not start with an operation a server sends (the excerpt is sanitized).
    case unknownOperation(String)
    /// A known operation with wrong arguments.
    case malformed(operation: String, reason: String)
    /// A MSG or HMSG announced more bytes than the negotiated `max_payload`.
    case payloadTooLarge(size: Int, limit: Int)
    /// The bytes after a payload were not CRLF (the announced size was wrong).
    case missingPayloadTerminator
    /// The header block of an HMSG does not follow the `NATS/1.0` format.
    case badHeaders(String)
    /// The INFO document is not the JSON object expected.
    case badInfo(String)

    public var description: String {
        switch self {
        case .controlLineTooLong(let limit): return "NATS protocol: control line longer than \(limit) bytes"
        case .unknownOperation(let excerpt): return "NATS protocol: unknown operation '\(excerpt)'"
        case .malformed(let op, let reason): return "NATS protocol: malformed \(op): \(reason)"
        case .payloadTooLarge(let size, let limit): return "NATS protocol: payload of \(size) bytes over the limit of \(limit)"
        case .missingPayloadTerminator: return "NATS protocol: payload not followed by CRLF"
        case .badHeaders(let reason): return "NATS protocol: bad headers: \(reason)"
        case .badInfo(let reason): return "NATS protocol: bad INFO: \(reason)"
        }
    }

    /// At most 16 bytes of `bytes`, non-printable ones as '?': safe to put in a log line.
    static func excerpt(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix(16).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}

/// Why an outgoing operation could not be encoded: a caller's mistake caught before a byte is
/// queued (the server would answer `-ERR` and close the connection).
public enum NATSEncodeError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidSubject(String)
    case invalidHeader(String)
    case payloadTooLarge(size: Int, limit: Int)

    public var description: String {
        switch self {
        case .invalidSubject(let why): return "invalid NATS subject: \(why)"
        case .invalidHeader(let why): return "invalid NATS header: \(why)"
        case .payloadTooLarge(let size, let limit): return "NATS message of \(size) bytes over max_payload \(limit)"
        }
    }
}

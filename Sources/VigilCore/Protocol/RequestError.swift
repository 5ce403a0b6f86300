/// A request the server answers with `{"type":"error",...}`: a stable code, the offending field's
/// path when there is one, and a sentence for people. The connection stays open.
public struct RequestError: Error, Equatable, Sendable {
    public var code: String
    public var field: String?
    public var message: String
    /// For `rate_limited` and `unavailable`: when a retry can succeed.
    public var retryAfterMs: Int64?
    /// For `seq_mismatch`: the stream's seq and status, which a sealed update must be sealed for
    /// (the next seq, this status).
    public var currentSeq: UInt64?
    public var currentStatus: PanicStatus?

    public init(_ code: String, field: String? = nil, _ message: String, retryAfterMs: Int64? = nil) {
        self.code = code
        self.field = field
        self.message = message
        self.retryAfterMs = retryAfterMs
    }

    /// A change the server could not record (its disk is full or failing): it was not made.
    /// Reads and live events go on; a retry after `retryAfterMs` may succeed.
    public static func unavailable(retryAfterMs: Int64) -> RequestError {
        RequestError("unavailable", "the server cannot record changes at the moment; nothing was changed. Retry after \(retryAfterMs) ms",
                     retryAfterMs: retryAfterMs)
    }

    static func missing(_ field: String) -> RequestError {
        RequestError("missing_field", field: field, "\(field) is required")
    }

    /// The op is echoed cut to 64 characters: it is the client's text.
    static func unknownOp(_ op: String) -> RequestError {
        RequestError("unknown_op", field: "op", "unknown op \"\(op.prefix(64))\"")
    }

    static func unknownField(_ field: String) -> RequestError {
        RequestError("unknown_field", field: field, "\(field) is not a field of this operation")
    }

    public static func from(_ failure: PinFailure) -> RequestError {
        switch failure {
        case .forbidden: return RequestError("forbidden", "no pin with that id and edit token")
        case .notFound: return RequestError("not_found", field: "id", "no live pin with that id")
        case .capacityExceeded: return RequestError("capacity_exceeded", "the server holds its maximum number of pins; try again later")
        case .tooManyVoters: return RequestError("too_many_votes", field: "id", "the pin holds its maximum number of votes; only its voters can change theirs")
        }
    }
}

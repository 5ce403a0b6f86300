/// The answer of a per-address budget (`AddressBudgets`) to one request, and the error the
/// client gets when it is a refusal.
public enum AddressAdmission: Equatable, Sendable {
    case admitted
    /// The address's rate for this kind of request is spent; a retry after this many ms succeeds
    /// (exactly: see `TokenLevel`), unless others at the address spend it first.
    case rateLimited(retryAfterMs: Int64)
    /// The address holds as much as it may (open streams, live pins), or cannot be tracked.
    case overLimit(AddressLimit)

    public var isAdmitted: Bool { self == .admitted }

    /// The error reply for a refusal (nil when admitted): `rate_limited` with `retry_after_ms`,
    /// or `capacity_exceeded`, the codes clients already handle for the per-session and
    /// server-wide limits.
    public var error: RequestError? {
        switch self {
        case .admitted:
            return nil
        case .rateLimited(let retry):
            return RequestError("rate_limited", "too many requests from your network; retry after \(retry) ms", retryAfterMs: retry)
        case .overLimit(.openStreams):
            return RequestError("capacity_exceeded", "your network has its maximum number of open panic streams; end one first")
        case .overLimit(.livePins):
            return RequestError("capacity_exceeded", "your network has its maximum number of live pins; delete one or wait for one to expire")
        case .overLimit(.trackedAddresses):
            return RequestError("capacity_exceeded", "the server is tracking too many networks to accept this now; try again later")
        }
    }
}

/// Which per-address capacity refused a request.
public enum AddressLimit: String, Sendable {
    case openStreams, livePins, trackedAddresses
}

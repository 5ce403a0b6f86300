import VigilWire

/// What became of a request: a response (any status: a 4xx or 5xx is the service's answer, for
/// the caller to judge), or the reason there is none.
public enum HTTPOutcome: Sendable {
    case response(HTTPClientResponse)
    case failure(HTTPClientFailure)
}

/// A response as the caller gets it: status, fields, the body's first bytes (a push service's
/// error text, a webhook receiver's answer), and `Retry-After` already read.
public struct HTTPClientResponse: HTTPHeaderFields, Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    /// The body's first `HTTPClientSettings.response.maxKeptBodyBytes` bytes.
    public let body: [UInt8]
    /// Body bytes read and dropped past those kept.
    public let discardedBodyBytes: Int
    /// `Retry-After` as seconds from the response's arrival (delta-seconds, or an HTTP-date
    /// against the wall clock then); nil when absent or unreadable.
    public let retryAfterSeconds: Int64?

    /// From a message read by `HTTPResponseReader`, at wall-clock time `nowUnixSeconds`.
    public init(_ message: HTTPResponseMessage, nowUnixSeconds: Int64) {
        status = message.statusCode
        headers = message.headers
        body = message.body
        discardedBodyBytes = message.discardedBodyBytes
        retryAfterSeconds = message.value("retry-after").flatMap { RetryAfter.delaySeconds($0, nowUnixSeconds: nowUnixSeconds) }
    }

    /// `Location` (a push service names the message it created there).
    public var location: String? { value("location") }
}

/// Why a webhook secret is refused, or a received webhook does not verify (Standard Webhooks).
/// The verifying side is the tests' receiver; the daemon signs, and meets only `badSecret`.
public enum WebhookError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not `whsec_` + canonical base64 of 24 to 64 bytes. The secret's text is never repeated.
    case badSecret(String)
    /// A `webhook-id` that is empty, too long, or has characters a header value must not.
    case badID
    /// A `webhook-timestamp` that is not whole seconds in decimal.
    case badTimestamp
    /// A timestamp further from now than the tolerance (a replay, or a clock far off).
    case timestampOutOfTolerance(timestamp: Int64, now: Int64)
    /// No `v1,` signature in the header matches.
    case noMatchingSignature

    public var description: String {
        switch self {
        case .badSecret(let why): return "webhook secret: \(why)"
        case .badID: return "webhook-id is not a usable id"
        case .badTimestamp: return "webhook-timestamp is not whole seconds"
        case .timestampOutOfTolerance(let timestamp, let now): return "webhook-timestamp \(timestamp) is \(abs(now - timestamp)) s from now"
        case .noMatchingSignature: return "no webhook-signature matches"
        }
    }
}

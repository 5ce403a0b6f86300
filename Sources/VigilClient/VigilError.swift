import Foundation

/// An error reply from the server, or a failure of a request itself.
///
/// `code` is the server's stable snake_case code (`invalid_lat`, `forbidden`, `rate_limited`, …,
/// docs/PROTOCOL.md "Error codes") or one of the client's own: ``Code/timeout``,
/// ``Code/disconnected``, ``Code/closed``, ``Code/notConnected``, ``Code/outboxFull``,
/// ``Code/badJSON`` and ``Code/badMessage`` (a message from the server the client could not read).
public struct VigilError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The client's own codes, besides the server's.
    public enum Code {
        /// No reply within the request's timeout (a write may still have been applied).
        public static let timeout = "timeout"
        /// The connection went before the reply (for a request that is not re-sent by itself).
        public static let disconnected = "disconnected"
        /// ``VigilClient/close()`` was called.
        public static let closed = "closed"
        /// ``VigilClient/connect()`` was never called.
        public static let notConnected = "not_connected"
        /// The outbox holds ``VigilClientOptions/outboxLimit`` writes already.
        public static let outboxFull = "outbox_full"
        /// The server sent a message that is not JSON.
        public static let badJSON = "bad_json"
        /// The server sent JSON the client could not read as the message it claims to be.
        public static let badMessage = "bad_message"
        /// Over a rate (the server's code): carries ``VigilError/retryAfter``.
        public static let rateLimited = "rate_limited"
    }

    /// The server's `code`, or one of ``Code``.
    public var code: String
    /// What went wrong, for people.
    public var message: String
    /// The offending field's path (`pin.lat`), when the server named one.
    public var field: String?
    /// How long to wait before retrying (`retry_after_ms`), for `rate_limited` and `unavailable`.
    public var retryAfter: Duration?
    /// The operation the failed request was (`pin.create`), when the error answers a request.
    public var op: String?
    /// The server's whole error reply, when there was one.
    public var reply: JSONObject?
    /// A failed write's idempotency key: sending the same write again with it (after a
    /// `timeout`, it may or may not have been applied) is answered without applying it twice.
    public var idem: String?

    /// Makes an error.
    public init(code: String, message: String? = nil, field: String? = nil, retryAfter: Duration? = nil,
                op: String? = nil, reply: JSONObject? = nil) {
        self.code = code
        self.message = message ?? code
        self.field = field
        self.retryAfter = retryAfter
        self.op = op
        self.reply = reply
    }

    /// Reads a server's `{"type":"error",...}` reply.
    init(reply: JSONObject, op: String?) {
        // Bounded to a day: a hostile or broken value must not trap nor stall the client for ever.
        let retry = reply["retry_after_ms"]?.doubleValue.flatMap { ms -> Duration? in
            guard ms.isFinite else { return nil }
            return .milliseconds(Int64(Swift.min(Swift.max(ms, 0), 86_400_000).rounded()))
        }
        self.init(code: reply["code"]?.stringValue ?? "error", message: reply["message"]?.stringValue,
                  field: reply["field"]?.stringValue, retryAfter: retry, op: op, reply: reply)
    }

    /// `"op: code: message"`.
    public var description: String {
        var s = op.map { "\($0): " } ?? ""
        s += code
        if message != code { s += ": \(message)" }
        if let field { s += " (\(field))" }
        return s
    }
}

/// What a NATS server sends a client, decoded (docs.nats.io, "Client protocol").
public enum NATSServerOp: Equatable, Sendable {
    /// The server's description of itself: first on every connection, and again when the
    /// cluster's topology changes.
    case info(NATSServerInfo)
    /// A message for one of our subscriptions (MSG, or HMSG with headers).
    case message(NATSMessage)
    case ping
    case pong
    /// `+OK` (only in verbose mode, which Vigil never asks for; accepted and ignored).
    case ok
    /// `-ERR 'text'`: the text without its quotes. Most errors are followed by the server closing.
    case error(String)
}

/// One delivered message.
public struct NATSMessage: Equatable, Sendable {
    public var subject: String
    /// The subscription it was delivered to (the id we gave in SUB).
    public var sid: UInt64
    public var replyTo: String?
    /// The header block of an HMSG; nil for a plain MSG.
    public var headers: NATSHeaders?
    public var payload: [UInt8]

    public init(subject: String, sid: UInt64, replyTo: String? = nil, headers: NATSHeaders? = nil, payload: [UInt8]) {
        self.subject = subject
        self.sid = sid
        self.replyTo = replyTo
        self.headers = headers
        self.payload = payload
    }

    /// The status code of a status message (`NATS/1.0 503`: no responders; `100`: a JetStream
    /// idle heartbeat or flow-control request), nil for an ordinary message.
    public var status: Int? { headers?.status }
}

import VigilNATS

/// The timing and bounds of a `NATSClient`.
public struct NATSClientSettings: Sendable {
    /// How often the client's clock runs (reconnects, pings, request timeouts are checked).
    public var tickMs: Int64 = 50
    /// A connection not through CONNECT and its PONG by then is given up.
    public var connectTimeoutMs: Int64 = 2_000
    /// A PING every so often; `maxPingsOutstanding` unanswered ones mean the server is gone
    /// (a half-open TCP connection would otherwise look alive for minutes).
    public var pingIntervalMs: Int64 = 5_000
    public var maxPingsOutstanding = 2
    /// Reconnect backoff after a full pass over the URL list failed.
    public var reconnectBaseMs: Int64 = 100
    public var reconnectMaxMs: Int64 = 5_000
    /// Bytes that may wait unsent to the server; a publish beyond it is refused, never buffered.
    public var maxPendingBytes = 8 * 1_048_576
    /// The most the client buffers for one incoming message, whatever INFO's `max_payload` says.
    public var payloadCap = 8 * 1_048_576

    public init() {}
}

/// Why the client could not do what was asked.
public enum NATSClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No connection to any server right now (the client keeps trying in the background).
    case notConnected
    /// More than `maxPendingBytes` already wait for the server.
    case outboundFull(limit: Int)
    /// The operation itself is invalid (a bad subject, a payload over `max_payload`).
    case invalid(NATSEncodeError)
    /// No reply within the request's timeout.
    case timedOut
    /// Nobody subscribes to the request's subject (the server's 503 status).
    case noResponders
    /// The connection broke while the request waited; whether it took effect is unknown.
    case connectionLost
    /// The client was closed.
    case closed

    public var description: String {
        switch self {
        case .notConnected: return "not connected to NATS"
        case .outboundFull(let limit): return "more than \(limit) bytes wait to be sent to NATS"
        case .invalid(let error): return error.description
        case .timedOut: return "NATS request timed out"
        case .noResponders: return "no responders for the NATS request"
        case .connectionLost: return "NATS connection lost before the reply"
        case .closed: return "NATS client closed"
        }
    }
}

/// Where the client is.
public enum NATSClientState: Equatable, Sendable {
    /// Waiting to retry (or not yet started).
    case disconnected
    /// A TCP connect, INFO, CONNECT and the first PONG are under way.
    case connecting
    /// CONNECT was accepted (its PING answered) and every subscription is in place.
    case connected
    case closed
}

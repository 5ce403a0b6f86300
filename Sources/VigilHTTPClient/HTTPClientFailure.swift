/// Why a request got no response. Every description is safe to log: it names the step and the
/// system's or OpenSSL's reason, never a URL, a path, a header or a body.
public enum HTTPClientFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The request was refused before it was queued (`HTTPRequestEncoder.Problem`'s words).
    case invalidRequest(String)
    /// A queue bound (`HTTPClientSettings`) was reached; nothing was sent.
    case queueFull(QueueBound)
    /// The host name did not resolve (`getaddrinfo`'s reason).
    case dns(String)
    /// No TCP connection (the system's reason, for the last address tried).
    case connect(String)
    /// Every address of the host is one `HTTPClientSettings.destinations` refuses (the scope of
    /// the last one tried).
    case destinationRefused(AddressScope)
    /// The TLS handshake failed: OpenSSL's reasons and the certificate check's verdict
    /// (`certificate verify failed`, `hostname mismatch`…).
    case tls(String)
    case timeout(TimeoutStage)
    /// The connection ended (closed or reset) before the whole response arrived; the request
    /// may or may not have reached the server.
    case closedEarly
    /// The response passed a bound of `HTTPClientSettings.response`.
    case tooLarge(String)
    /// The response broke HTTP/1.1.
    case malformed(String)
    /// The client was closed with the request pending.
    case shutDown

    /// Which queue was full.
    public enum QueueBound: String, Sendable {
        case origin, total
    }

    /// Where the request was when its deadline (or the connect timeout) passed.
    public enum TimeoutStage: String, Sendable {
        /// Its origin's new connection did not come up within `connectTimeoutMs`.
        case connecting
        /// It waited in its origin's queue for a free connection.
        case waitingForConnection
        /// It was sent (or being sent) and the whole response did not arrive.
        case awaitingResponse
    }

    /// The failure's kind without its detail: the label of a metric.
    public enum Kind: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request", queueFull = "queue_full", dns, connect
        case destinationRefused = "destination_refused", tls, timeout
        case closedEarly = "closed_early", tooLarge = "too_large", malformed, shutDown = "shut_down"
    }

    public var kind: Kind {
        switch self {
        case .invalidRequest: return .invalidRequest
        case .queueFull: return .queueFull
        case .dns: return .dns
        case .connect: return .connect
        case .destinationRefused: return .destinationRefused
        case .tls: return .tls
        case .timeout: return .timeout
        case .closedEarly: return .closedEarly
        case .tooLarge: return .tooLarge
        case .malformed: return .malformed
        case .shutDown: return .shutDown
        }
    }

    public var description: String {
        switch self {
        case .invalidRequest(let why): return "invalid request: \(why)"
        case .queueFull(let bound): return bound == .origin ? "the origin's queue is full" : "the client's queue is full"
        case .dns(let why): return "resolving the host name: \(why)"
        case .connect(let why): return "connecting: \(why)"
        case .destinationRefused(let scope): return "refused to connect to a \(scope.rawValue) address"
        case .tls(let why): return "TLS: \(why)"
        case .timeout(.connecting): return "timed out connecting"
        case .timeout(.waitingForConnection): return "timed out waiting for a connection"
        case .timeout(.awaitingResponse): return "timed out awaiting the response"
        case .closedEarly: return "the connection closed before the response was complete"
        case .tooLarge(let why): return "response too large: \(why)"
        case .malformed(let why): return "malformed response: \(why)"
        case .shutDown: return "the client was closed"
        }
    }
}

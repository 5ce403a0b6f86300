import Foundation

/// What the client needs from a WebSocket: open a connection, then text messages in and out.
///
/// Every piece of the client's logic (requests, reconnects, resume, the outbox) sits above this
/// protocol, so it runs the same over ``SocketTransport`` (Linux: the project's own client-mode
/// wire code, plain or TLS), `URLSessionTransport` (Apple platforms) and the tests' fake.
public protocol VigilTransport: Sendable {
    /// Opens a WebSocket to `url` (`ws://` or `wss://`): the TCP (and TLS) connection and the
    /// opening handshake, within `timeout`.
    func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection
}

/// One open WebSocket connection.
///
/// `receive()` is called by one reader at a time; `send` and `close` may be called from any task.
public protocol VigilConnection: Sendable {
    /// Sends one text message. Throws once the connection is closing, closed or lost: the error
    /// that ended it (``TransportError/closed(code:reason:)``, or
    /// ``TransportError/protocolViolation(_:)`` when this side failed it).
    func send(_ text: String) async throws(TransportError)
    /// The next text message. When the connection ends, after the messages that came before its
    /// end: ``TransportError/closed(code:reason:)`` with the peer's close code and reason (1005
    /// for a close frame without a code, RFC 6455 §7.1.5), or `nil` for a connection lost without
    /// a close; ``TransportError/protocolViolation(_:)`` when the peer broke RFC 6455.
    func receive() async throws(TransportError) -> String
    /// Starts the closing handshake (RFC 6455 §7) with `code` and `reason`, and releases the
    /// connection. Idempotent.
    func close(code: UInt16, reason: String) async
}

/// Why a connection could not be made, or ended.
public enum TransportError: Error, Equatable, Sendable {
    /// The URL is not a `ws://` or `wss://` URL with a host.
    case invalidURL(String)
    /// The host did not resolve, or no address accepted the connection.
    case connectFailed(String)
    /// The connection or the handshake took longer than its timeout.
    case timedOut
    /// The TLS handshake failed (certificate not trusted, wrong name, protocol).
    case tls(String)
    /// The server did not accept the WebSocket upgrade (its status, or what was wrong).
    case handshake(String)
    /// The peer broke RFC 6455 (the connection was failed with a close code). The text starts
    /// with the code this side sent, e.g. "1009 message too big" (SocketTransport).
    case protocolViolation(String)
    /// The connection ended: the close code and reason the peer sent, or `nil` when it was lost
    /// without a closing handshake (1006 in RFC 6455's terms).
    case closed(code: UInt16?, reason: String)
}

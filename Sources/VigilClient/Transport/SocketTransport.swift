#if os(Linux)
import Foundation
import Synchronization

/// The Linux transport: a WebSocket client (RFC 6455) on a POSIX socket, plain or TLS through
/// OpenSSL, with VigilWire's client-mode handshake and frame code.
///
/// Each connection has one thread of its own that owns the socket (connect, TLS, the opening
/// handshake, then every read and write) and waits in `poll(2)` on it and on a wake pipe. No
/// event loop: a client holds one socket. The async API (`SocketConnection`) hands work to that
/// thread and awaits its results, so no call blocks the cooperative thread pool on the network.
///
/// What comes from the network is held to bounds: the response head (8 KiB, 100 fields), each
/// message (``Options/maxMessageBytes``: a larger one fails the connection with 1009 before its
/// payload is read), the bytes waiting for the reader (``Options/receiveBufferBytes``), and time
/// (the connect timeout over resolution, TCP, TLS and the handshake; the close timeout).
public struct SocketTransport: VigilTransport {
    /// How connections are made and held to bounds.
    public struct Options: Sendable {
        /// The largest message accepted, after reassembling fragments. A larger one fails the
        /// connection with 1009 (RFC 6455 §7.4.1) and `receive()` reports it.
        public var maxMessageBytes: Int = 16 << 20
        /// Bytes of received messages waiting for `receive()` before the socket is no longer read.
        public var receiveBufferBytes: Int = 4 << 20
        /// How long `close` waits for the server's close frame and the end of the connection.
        public var closeTimeout: Duration = .seconds(2)
        /// Subprotocols offered (`Sec-WebSocket-Protocol`); vigild selects `vigil.v1` on /v1.
        public var subprotocols: [String] = ["vigil.v1"]
        /// PEM files of certificates to trust besides the system's (a test or private CA).
        public var trustedCertificateFiles: [String] = []
        /// PEM texts of certificates to trust besides the system's.
        public var trustedCertificatesPEM: [String] = []
        /// Tests: called on the socket thread with a ping's payload once its pong is queued.
        var pingObserver: (@Sendable ([UInt8]) -> Void)?

        public init() {}
    }

    public var options: Options

    public init(options: Options = Options()) {
        self.options = options
    }

    public func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection {
        try await open(url, timeout: timeout)
    }

    /// `connect` with the concrete type (for `abort()` and `subprotocol`).
    public func open(_ url: URL, timeout: Duration) async throws(TransportError) -> SocketConnection {
        let endpoint = try Endpoint(url)
        let attempt = ConnectAttempt()
        let engine = try SocketEngine(endpoint: endpoint, options: options, timeout: timeout, attempt: attempt)
        // The engine's own polls keep the deadline; this timer also covers name resolution,
        // which `getaddrinfo` does not let us bound, and makes a cancelled task return at once.
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<SocketConnection, TransportError>, Never>) in
                attempt.install(continuation)
                engine.start()
                let watchdog = Task {
                    try? await Task.sleep(for: timeout)
                    if !Task.isCancelled, attempt.resolve(.failure(.timedOut)) { engine.core.abort() }
                }
                attempt.onResolve { watchdog.cancel() }
            }
        } onCancel: {
            if attempt.resolve(.failure(.connectFailed("cancelled"))) { engine.core.abort() }
        }
        return try result.get()
    }
}

/// One connect's outcome, decided once: by the socket thread (open or failed), by the timeout or
/// by cancellation, whichever comes first. A connection opened after the others decided is
/// aborted by the thread.
final class ConnectAttempt: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<SocketConnection, TransportError>, Never>?
        var early: Result<SocketConnection, TransportError>?
        var resolved = false
        var onResolve: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    func install(_ continuation: CheckedContinuation<Result<SocketConnection, TransportError>, Never>) {
        let early = state.withLock { s -> Result<SocketConnection, TransportError>? in
            if let early = s.early { return early }
            s.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func onResolve(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.resolved { return true }
            s.onResolve = action
            return false
        }
        if now { action() }
    }

    /// Decides the outcome if nobody has; false when it was already decided.
    @discardableResult
    func resolve(_ result: Result<SocketConnection, TransportError>) -> Bool {
        let (won, continuation, action) = state.withLock { s in
            guard !s.resolved else { return (false, nil as CheckedContinuation<Result<SocketConnection, TransportError>, Never>?, nil as (@Sendable () -> Void)?) }
            s.resolved = true
            if s.continuation == nil { s.early = result }
            defer {
                s.continuation = nil
                s.onResolve = nil
            }
            return (true, s.continuation, s.onResolve)
        }
        continuation?.resume(returning: result)
        action?()
        return won
    }
}

/// A `ws://` or `wss://` URL taken apart for the socket and the request line.
struct Endpoint: Equatable {
    var secure: Bool
    /// The host as resolved and verified: an IPv6 address without its brackets.
    var host: String
    var port: Int
    /// The `Host` header: the host (bracketed if IPv6) and the port unless it is the default.
    var hostHeader: String
    /// The request target: the path (at least "/") and the query.
    var target: String

    init(_ url: URL) throws(TransportError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "ws" || scheme == "wss" else {
            throw .invalidURL("\(url.absoluteString): the scheme must be ws or wss")
        }
        guard var host = url.host(percentEncoded: false), !host.isEmpty else {
            throw .invalidURL("\(url.absoluteString): no host")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard url.user == nil, url.password == nil else {
            throw .invalidURL("\(url.absoluteString): credentials in the URL are not supported")
        }
        secure = scheme == "wss"
        let defaultPort = secure ? 443 : 80
        port = url.port ?? defaultPort
        guard (1...65535).contains(port) else { throw .invalidURL("\(url.absoluteString): port out of range") }
        // Request-line and header text from the URL: refuse anything that could split them.
        guard host.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .invalidURL("\(url.absoluteString): the host has characters a Host header cannot carry")
        }
        self.host = host
        let bracketed = host.contains(":") ? "[\(host)]" : host
        hostHeader = port == defaultPort ? bracketed : "\(bracketed):\(port)"
        var target = url.path(percentEncoded: true)
        if target.isEmpty { target = "/" }
        if let query = url.query(percentEncoded: true) { target += "?" + query }
        guard target.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .invalidURL("\(url.absoluteString): the path has characters a request line cannot carry")
        }
        self.target = target
    }
}
#endif

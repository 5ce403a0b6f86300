import Foundation

/// The transport a client uses when the app names none.
public enum Transports {
    /// ``SocketTransport`` on Linux (URLSession has no WebSocket there), `URLSessionTransport`
    /// on Apple platforms.
    public static var platformDefault: any VigilTransport {
        #if os(Linux)
        SocketTransport()
        #elseif canImport(Darwin)
        URLSessionTransport()
        #else
        UnavailableTransport()
        #endif
    }
}

#if !os(Linux) && !canImport(Darwin)
/// Platforms with neither transport (Windows, Android, WASI for now): every connect fails.
struct UnavailableTransport: VigilTransport {
    func connect(to url: URL, timeout: Duration) async throws(TransportError) -> any VigilConnection {
        throw .connectFailed("no WebSocket transport on this platform")
    }
}
#endif

import VigilLoop
import VigilNATS

/// How a `NATSClient` speaks TLS: the client context (CA, optional client certificate), which
/// servers it applies to and how the handshake starts.
///
/// NATS's usual order is a plaintext INFO, then the client's TLS handshake on the same socket
/// (`ByteStream.startTLS`); with `handshakeFirst` (nats-server's `handshake_first`, 2.10 and
/// later) TLS starts at the first byte and INFO comes encrypted. The server's certificate is
/// checked against the CA and against `serverName` when set, otherwise the URL's host (a DNS
/// name, or an IP address against the certificate's IP entries). Never a downgrade: a server
/// that does not offer TLS to a client that wants it is left with the reason.
public final class NATSTLS {
    public let context: TLSContext
    /// The name the certificate must carry, for every server (nil: each URL's host).
    public let serverName: String?
    /// TLS with every server of the list (a `cluster.tls` section), not only the `tls://` ones.
    public let everyServer: Bool
    public let handshakeFirst: Bool

    public init(context: TLSContext, serverName: String? = nil, everyServer: Bool = true, handshakeFirst: Bool = false) {
        self.context = context
        self.serverName = serverName
        self.everyServer = everyServer
        self.handshakeFirst = handshakeFirst
    }

    /// Whether the connection to `url` is TLS.
    func applies(to url: NATSServerURL) -> Bool { url.tls || everyServer }
}

import Glibc
import VigilLoop
import VigilNATS

/// The socket of one connection to a NATS server: bytes in go through its parser, operations out
/// to the client. A new stream (and parser) per connection attempt, so nothing of a broken
/// connection's half-read state survives it.
final class NATSStream: ByteStream {
    /// The client owns the stream and closes it before letting it go.
    unowned let client: NATSClient
    var parser: NATSParser

    init(fd: Int32, loop: EventLoop, client: NATSClient, payloadCap: Int) {
        self.client = client
        self.parser = NATSParser(payloadCap: payloadCap)
        super.init(fd: fd, loop: loop)
    }

    override func connected() { client.streamConnected(self) }

    override func upgradedToTLS() { client.streamUpgradedToTLS(self) }

    override func received(_ bytes: UnsafeMutableRawBufferPointer) {
        parser.append(UnsafeRawBufferPointer(bytes))
        while !isClosed {
            do {
                guard let op = try parser.next() else { return }
                client.handle(op, from: self)
            } catch {
                client.streamLost(self, reason: error.description)
                return
            }
        }
    }

    override func peerClosed() { client.streamLost(self, reason: "the server closed the connection") }

    /// The error names the call and errno (and for TLS, OpenSSL's reasons and the certificate
    /// check's verdict); the server's address is left out of the report.
    override func failed(_ error: SystemError) {
        if let detail = error.detail, error.call.hasPrefix("TLS") || error.call.hasPrefix("SSL") {
            return client.streamLost(self, reason: detail.hasPrefix(error.call) ? detail : "\(error.call): \(detail)")
        }
        client.streamLost(self, reason: "\(error.call.prefix { $0 != "(" }): \(String(cString: strerror(error.errno)))")
    }
}

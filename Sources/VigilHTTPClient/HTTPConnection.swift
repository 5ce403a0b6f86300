import VigilLoop
import VigilWire

/// The socket of one outgoing connection attempt: a client `ByteStream` (TCP, then TLS for an
/// https origin) whose events go to the `HTTPClient`, and the reader of the response in flight.
/// A new stream per address tried, so nothing of a failed attempt survives into the next.
final class HTTPConnection: ByteStream {
    /// The client owns the stream and closes it before letting it go.
    unowned let client: HTTPClient
    /// The connection (the pool's id) this socket serves.
    let slot: Int32
    /// The response being read; nil while no request is in flight.
    var reader: HTTPResponseReader?
    /// The response read last, until the client hands it to its request.
    var message: HTTPResponseMessage?

    init(fd: Int32, loop: EventLoop, client: HTTPClient, slot: Int32) {
        self.client = client
        self.slot = slot
        super.init(fd: fd, loop: loop)
    }

    override func connected() { client.streamConnected(self) }

    override func received(_ bytes: UnsafeMutableRawBufferPointer) { client.streamReceived(self, UnsafeRawBufferPointer(bytes)) }

    override func peerClosed() { client.streamEnded(self) }

    override func failed(_ error: SystemError) { client.streamFailed(self, error) }
}

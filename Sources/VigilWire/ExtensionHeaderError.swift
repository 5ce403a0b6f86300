/// A `Sec-WebSocket-Extensions` value that breaks the RFC 6455 §9.1 grammar.
///
/// It is a handshake failure, not a declined extension: RFC 6455 §4.2.1 says a server that
/// finds "any violations of the ABNF grammar specified for the components of the handshake"
/// MUST stop processing it and answer with an error such as 400. Offers that parse but that
/// permessage-deflate cannot accept (unknown, repeated or out-of-range parameters) are not
/// errors: RFC 7692 §7 has the server decline them, and the connection goes on uncompressed.
public struct ExtensionHeaderError: Error, Equatable, Sendable {
    /// What was wrong, for the 400 response body.
    public var message: String
    /// Byte offset into the header value where parsing stopped.
    public var offset: Int

    public init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    /// The 400 Bad Request to answer the upgrade with (RFC 6455 §4.2.1).
    public var handshakeError: HandshakeError {
        HandshakeError(status: .badRequest, message: "malformed Sec-WebSocket-Extensions: \(message) at byte \(offset)")
    }
}

/// A request that passed `Handshake.validate`: what the server needs to answer it.
public struct UpgradeRequest: Equatable, Sendable {
    /// The client's Sec-WebSocket-Key, as sent (24 base64 characters).
    public var key: String
    /// The subprotocol the server selected, nil if none.
    public var subprotocol: String?
    /// Raw Sec-WebSocket-Extensions values, one per header line, for the
    /// permessage-deflate negotiation.
    public var extensions: [String]

    public init(key: String, subprotocol: String?, extensions: [String]) {
        self.key = key
        self.subprotocol = subprotocol
        self.extensions = extensions
    }
}

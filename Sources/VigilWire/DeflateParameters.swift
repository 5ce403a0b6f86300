/// What one connection's permessage-deflate negotiation agreed (RFC 7692 §7.1): the inputs of
/// its inflater and of the deflater whose frames it is sent.
///
/// A value of four small fields, kept by the connection (or dropped once the inflater and the
/// deflater are chosen).
public struct DeflateParameters: Hashable, Sendable {
    /// We reset our compression context after every message (§7.1.1.1). True for every
    /// connection the daemon shares compressed frames with.
    public var serverNoContextTakeover: Bool
    /// The client resets its context after every message (§7.1.1.2), so our inflater state
    /// can be dropped between messages.
    public var clientNoContextTakeover: Bool
    /// The window our deflater uses (9...15): at most what the client asked for in
    /// `server_max_window_bits`, and at most the server's setting.
    public var serverMaxWindowBits: Int
    /// The largest window the client may compress with (8...15; 15 when it did not say).
    public var clientMaxWindowBits: Int

    public init(serverNoContextTakeover: Bool, clientNoContextTakeover: Bool,
                serverMaxWindowBits: Int, clientMaxWindowBits: Int) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// The window our inflater is built with. Inflating with a larger window than the sender's
    /// is always correct, and a client on zlib older than 1.2.9 that agreed to 8 really
    /// compresses with 9 (see `DeflateSettings`), so 8 becomes 9: 256 bytes more, and such a
    /// client's messages still inflate.
    public var inflateWindowBits: Int { max(9, clientMaxWindowBits) }
}

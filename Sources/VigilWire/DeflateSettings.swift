/// The server's own choices for permessage-deflate (RFC 7692), from its configuration: what it
/// is willing to agree to and how hard it compresses. Negotiation (`PerMessageDeflate`) meets
/// them with each client's offer.
///
/// Values are clamped into range on construction rather than rejected, so a configuration
/// layer can report what it got; the clamps follow zlib, not only the RFC:
/// - window bits are 9...15. The RFC allows 8, but zlib (since 1.2.9) refuses an 8-bit window
///   for raw DEFLATE (`deflateInit2` fails) and older zlib silently used 9, which a peer with
///   a real 256-byte window cannot inflate. Like other zlib-based servers, Vigil uses 9 where 8
///   is configured and never asks a client for 8.
/// - memory level is zlib's 1...9, compression level 1...9.
///
/// Memory these imply, per zlib's own formulas (measured figures in `DeflaterTests` and
/// `InflaterTests`): a deflater holds about 2^(windowBits+2) + 2^(memoryLevel+9) bytes plus
/// ~6 KiB (15 and 8: ~262 KiB), which is why the daemon keeps one deflater per setting, not per
/// connection; a connection's inflater holds ~7 KiB + 2^windowBits while it has state.
public struct DeflateSettings: Equatable, Sendable {
    /// Whether to accept permessage-deflate offers at all.
    public let enabled: Bool
    /// Upper bound on the window our deflater uses (9...15). Lower costs deflater memory and
    /// ratio; it also caps what we answer to a client's `server_max_window_bits`.
    public let serverMaxWindowBits: Int
    /// Upper bound we ask a client to compress with, when its offer lets us (9...15): it
    /// bounds each connection's inflater window to 2^bits bytes.
    public let clientMaxWindowBits: Int
    /// zlib memLevel of the deflater (1...9): the hash table and pending buffer sizes.
    public let memoryLevel: Int
    /// zlib compression level (1 fastest ... 9 smallest).
    public let compressionLevel: Int
    /// Messages shorter than this are sent uncompressed: below ~64 bytes deflate's block
    /// overhead eats the gain and the CPU is wasted. 0 compresses everything.
    public let minimumMessageBytes: Int
    /// Always answer with `server_no_context_takeover` (RFC 7692 §7.1.1.1 lets the server add
    /// it unasked). Without context takeover every message is compressed from an empty window,
    /// so one compressed frame can be queued on every subscriber with the same window setting:
    /// compress once per event and setting, not once per connection.
    public let serverNoContextTakeover: Bool
    /// Always answer with `client_no_context_takeover` (RFC 7692 §7.1.1.2: "A server MAY
    /// include" it, with no condition on the offer). The client then starts every message from
    /// an empty window, so a connection's inflater state can be freed between messages: an
    /// idle connection holds no zlib memory.
    public let clientNoContextTakeover: Bool

    public init(
        enabled: Bool = true,
        serverMaxWindowBits: Int = 15,
        clientMaxWindowBits: Int = 15,
        memoryLevel: Int = 8,
        compressionLevel: Int = 6,
        minimumMessageBytes: Int = 64,
        serverNoContextTakeover: Bool = true,
        clientNoContextTakeover: Bool = true
    ) {
        self.enabled = enabled
        self.serverMaxWindowBits = DeflateSettings.clamp(serverMaxWindowBits, 9, 15)
        self.clientMaxWindowBits = DeflateSettings.clamp(clientMaxWindowBits, 9, 15)
        self.memoryLevel = DeflateSettings.clamp(memoryLevel, 1, 9)
        self.compressionLevel = DeflateSettings.clamp(compressionLevel, 1, 9)
        self.minimumMessageBytes = max(0, minimumMessageBytes)
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
    }

    /// Settings that accept nothing: no `Sec-WebSocket-Extensions` in any response.
    public static let disabled = DeflateSettings(enabled: false)

    static func clamp(_ value: Int, _ low: Int, _ high: Int) -> Int {
        min(high, max(low, value))
    }
}

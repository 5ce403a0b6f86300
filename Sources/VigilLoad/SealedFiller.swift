import VigilClient

/// Stand-ins for end-to-end encrypted values, for measuring what a sealed panic stream costs the
/// daemon (`vigil-load panic --e2e`).
///
/// The daemon never opens a sealed value: it checks the base64url text's length and alphabet,
/// decodes it, and stores and forwards the bytes. Random bytes of a real value's size therefore
/// cost it exactly what a real one does, and the load client needs no AES-GCM: its CPU goes to
/// the load, as in a clear run. Values are canonical unpadded base64url (RFC 4648 §5), as the
/// daemon requires. Not for secrets: the bytes come from a seeded SplitMix64.
public struct SealedFiller: Sendable {
    /// Rotated through, so consecutive updates differ without generating text per update.
    static let poolSize = 64
    private var rng: SplitMix64
    private var pool: [String] = []
    private var cursor = 0

    /// The decoded size of a sealed update of vigil-load's clear update: the plaintext
    /// `{"lat":…,"lon":…,"accuracy_m":6}` is 58–80 bytes with full doubles (padded to 128) and
    /// about 50 rounded to 7 decimals (padded to 64); plus the 12-byte nonce and 16-byte tag.
    public static func sealedBytes(roundCoordinates: Bool) -> Int { (roundCoordinates ? 64 : 128) + 28 }

    public init(seed: UInt64, sealedBytes: Int) {
        rng = SplitMix64(state: seed ^ 0x5EA1_ED00)
        if sealedBytes > 0 {
            pool = (0..<Self.poolSize).map { _ in E2E.base64urlEncode(randomBytes(sealedBytes)) }
        }
    }

    /// The next sealed value of the pool.
    public mutating func next() -> String {
        defer { cursor = (cursor + 1) % pool.count }
        return pool[cursor]
    }

    /// A key id: 16 random bytes, 22 characters.
    public mutating func kid() -> String { E2E.base64urlEncode(randomBytes(16)) }

    private mutating func randomBytes(_ n: Int) -> [UInt8] {
        (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next() >> 56) }
    }
}

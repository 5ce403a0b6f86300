/// One answer the server keeps for an idempotency key (docs/PROTOCOL.md, "Writes that are safe
/// to retry"): what a repeat of the same request gets again.
///
/// Nothing here reads without the client's key: `lookup` and `requestDigest` are SHA-256 digests
/// that include the key, and `sealed` is the answer's JSON members encrypted under a key derived
/// from it (AES-256-GCM: nonce 12 ‖ ciphertext ‖ tag 16, see `IdempotencySeal`). Memory, the
/// journal and snapshots therefore hold no token an answer carried (a `panic.start`'s owner token).
public struct KeptAnswer: Equatable, Sendable {
    /// SHA-256("vigil idem id" ‖ key): the table's key.
    public var lookup: [UInt8]
    /// SHA-256("vigil idem request" ‖ key ‖ canonical request): a repeat must match it.
    public var requestDigest: [UInt8]
    /// Wall-clock unix ms when the answer was first given; the key lives `window` from it.
    public var createdAt: Int64
    public var sealed: [UInt8]

    public static let digestBytes = 32
    /// The largest sealed answer a reader accepts (a kept answer is one write's reply: a few
    /// hundred bytes; a circle with many members a few KiB).
    public static let maxSealedBytes = 1 << 20

    public init(lookup: [UInt8], requestDigest: [UInt8], createdAt: Int64, sealed: [UInt8]) {
        self.lookup = lookup
        self.requestDigest = requestDigest
        self.createdAt = createdAt
        self.sealed = sealed
    }

    /// Bytes held for it (inspect and the keys' memory figure).
    public var byteCount: Int { lookup.count + requestDigest.count + 8 + sealed.count }
}

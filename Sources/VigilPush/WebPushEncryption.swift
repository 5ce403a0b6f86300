import VigilWire

/// Encrypts a notice for one subscription into the body of a push message (RFC 8291): the
/// `aes128gcm` content coding (RFC 8188) with a single record, keyed by ECDH between a fresh
/// ephemeral key and the subscription's `p256dh`, and the subscription's `auth` secret.
///
/// The body is `ContentCodingHeader` (salt, rs 4096, the ephemeral public key) followed by the one
/// record: AES-128-GCM over notice ‖ 0x02 ‖ padding zeros, with its tag. The request carries
/// `Content-Encoding: aes128gcm` and nothing else about the encryption (no `Crypto-Key`).
public enum WebPushEncryption {
    /// The record size written in the header (RFC 8291 §4 asks for 4096): above any single record
    /// that fits the body limit.
    public static let recordSize: UInt32 = 4096
    /// The largest body a push service must accept (RFC 8291 §4, RFC 8030 §7.2).
    public static let maxBodyByteCount = 4096
    /// Salt, rs, idlen and the 65-byte key id.
    public static let headerByteCount = ContentCodingHeader.fixedByteCount + P256PublicKey.byteCount
    /// The largest notice that fits: 4096 − 86 (header) − 1 (delimiter) − 16 (tag) = 3993.
    public static let maxPlaintextByteCount = maxBodyByteCount - headerByteCount - 1 - AES128GCM.tagByteCount

    /// `plaintext` encrypted for `subscription` with a fresh ephemeral key and salt (RAND_bytes):
    /// what the daemon sends. `padding` zero bytes after the delimiter hide the notice's length
    /// from the push service, within the same limit.
    public static func encrypt(_ plaintext: [UInt8], for subscription: PushSubscriptionKeys, padding: Int = 0) throws(WebPushError) -> [UInt8] {
        // The limits are checked before a key is made: a refused notice costs no EC operation.
        try checkSize(plaintext: plaintext.count, padding: padding)
        let ephemeral: P256PrivateKey
        do { ephemeral = try P256PrivateKey.generate() } catch { throw .key(error) }
        return try encrypt(plaintext, for: subscription, ephemeralKey: ephemeral,
                           salt: SecureRandom.bytes(count: ContentCodingHeader.saltByteCount), padding: padding)
    }

    /// The deterministic form: the caller gives the ephemeral key and the salt. For published test
    /// vectors (RFC 8291 Appendix A) only; reusing either for two messages breaks the encryption.
    public static func encrypt(_ plaintext: [UInt8], for subscription: PushSubscriptionKeys, ephemeralKey: P256PrivateKey,
                               salt: [UInt8], padding: Int = 0) throws(WebPushError) -> [UInt8] {
        try checkSize(plaintext: plaintext.count, padding: padding)
        guard salt.count == ContentCodingHeader.saltByteCount else {
            throw .wrongLength(what: "salt", expected: ContentCodingHeader.saltByteCount, actual: salt.count)
        }
        let secret: [UInt8]
        do { secret = try ephemeralKey.sharedSecret(with: subscription.p256dh) } catch { throw .key(error) }
        let keys = try WebPushKeySchedule(sharedSecret: secret, authSecret: subscription.authSecret,
                                          userAgentKey: subscription.p256dh, applicationServerKey: ephemeralKey.publicKey, salt: salt)
        var record = plaintext
        record.reserveCapacity(plaintext.count + 1 + padding)
        record.append(0x02)  // the last (and only) record's delimiter (RFC 8188 §2)
        record.append(contentsOf: repeatElement(0, count: padding))
        var body: [UInt8] = []
        body.reserveCapacity(headerByteCount + record.count + AES128GCM.tagByteCount)
        ContentCodingHeader(salt: salt, recordSize: recordSize, keyID: ephemeralKey.publicKey.bytes).encode(into: &body)
        body.append(contentsOf: try AES128GCM.seal(key: keys.contentEncryptionKey, nonce: keys.nonce, plaintext: record))
        return body
    }

    private static func checkSize(plaintext: Int, padding: Int) throws(WebPushError) {
        guard plaintext <= maxPlaintextByteCount else { throw .plaintextTooLarge(count: plaintext, limit: maxPlaintextByteCount) }
        guard padding >= 0, padding <= maxPlaintextByteCount - plaintext else {
            throw .paddingTooLarge(count: padding, limit: maxPlaintextByteCount - plaintext)
        }
    }
}

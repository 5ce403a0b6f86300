/// The user agent's side of RFC 8291: reads a push message body with the subscription's private
/// key and auth secret. The daemon never decrypts; this is the tests' independent reader of what
/// `WebPushEncryption` writes, and the fuzzer's door into the header parser.
///
/// Every check a receiver must make, in order: the header parses, the key id is a P-256 public key,
/// the record is one and fits `rs`, AES-GCM accepts the tag, and the plaintext ends in the
/// delimiter 0x02 followed only by zeros.
public enum WebPushDecryption {
    public static func decrypt(_ body: [UInt8], privateKey: P256PrivateKey, authSecret: [UInt8]) throws(WebPushError) -> [UInt8] {
        guard authSecret.count == PushSubscriptionKeys.authSecretByteCount else {
            throw .wrongLength(what: "auth", expected: PushSubscriptionKeys.authSecretByteCount, actual: authSecret.count)
        }
        let (header, consumed) = try ContentCodingHeader.parse(body)
        guard header.keyID.count == P256PublicKey.byteCount else { throw .badKeyID(length: header.keyID.count) }
        let record = body[consumed...]
        // One record (RFC 8291 §4): it must fit rs, and hold at least the tag and the delimiter.
        guard record.count <= header.recordSize, record.count >= AES128GCM.tagByteCount + 1 else {
            throw .notOneRecord(count: record.count, recordSize: header.recordSize)
        }
        let sender: P256PublicKey
        let secret: [UInt8]
        do {
            sender = try P256PublicKey(bytes: header.keyID)
            secret = try privateKey.sharedSecret(with: sender)
        } catch { throw .key(error) }
        let keys = try WebPushKeySchedule(sharedSecret: secret, authSecret: authSecret, userAgentKey: privateKey.publicKey,
                                          applicationServerKey: sender, salt: header.salt)
        return try removePadding(try AES128GCM.open(key: keys.contentEncryptionKey, nonce: keys.nonce, sealed: record))
    }

    /// The notice of a decrypted last record: everything before the delimiter 0x02, which must be
    /// followed by zeros only (RFC 8188 §2).
    static func removePadding(_ record: [UInt8]) throws(WebPushError) -> [UInt8] {
        guard let end = record.lastIndex(where: { $0 != 0 }), record[end] == 0x02 else { throw .badPadding }
        return Array(record[..<end])
    }
}

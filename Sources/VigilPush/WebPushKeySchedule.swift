/// The keys of one push message (RFC 8291 §3.3–3.4, then RFC 8188 §2.2–2.3): from the ECDH secret,
/// the subscription's auth secret, both public keys and the salt, the content-encryption key and
/// the nonce of its single record.
///
/// Each intermediate value is kept, because RFC 8291 Appendix A publishes each one and the tests
/// compare them step by step: a mistake is then found where it is made, not only as a wrong body.
struct WebPushKeySchedule {
    /// HKDF-Extract(auth_secret, ecdh_secret) (RFC 8291 §3.4's `PRK_key`).
    let authenticatedKey: [UInt8]
    /// The input keying material of the content coding (RFC 8291 §3.4's `IKM`).
    let inputKeyMaterial: [UInt8]
    /// HKDF-Extract(salt, IKM) (RFC 8188 §2.2's `PRK`).
    let pseudorandomKey: [UInt8]
    /// The AES-128-GCM key (`CEK`, RFC 8188 §2.2).
    let contentEncryptionKey: [UInt8]
    /// The nonce of record 0 (RFC 8188 §2.3: the derived nonce XOR the sequence number 0).
    let nonce: [UInt8]

    static let webPushInfo = Array("WebPush: info".utf8) + [0]
    static let contentEncodingInfo = Array("Content-Encoding: aes128gcm".utf8) + [0]
    static let nonceInfo = Array("Content-Encoding: nonce".utf8) + [0]

    init(sharedSecret: [UInt8], authSecret: [UInt8], userAgentKey: P256PublicKey,
         applicationServerKey: P256PublicKey, salt: [UInt8]) throws(WebPushError) {
        // key_info binds both public keys into the secret (§3.4): "WebPush: info" 0x00 ‖ ua ‖ as.
        let keyInfo = Self.webPushInfo + userAgentKey.bytes + applicationServerKey.bytes
        authenticatedKey = try HKDF.extract(salt: authSecret, inputKeyMaterial: sharedSecret)
        inputKeyMaterial = try HKDF.expand(pseudorandomKey: authenticatedKey, info: keyInfo, length: 32)
        pseudorandomKey = try HKDF.extract(salt: salt, inputKeyMaterial: inputKeyMaterial)
        contentEncryptionKey = try HKDF.expand(pseudorandomKey: pseudorandomKey, info: Self.contentEncodingInfo, length: AES128GCM.keyByteCount)
        nonce = try HKDF.expand(pseudorandomKey: pseudorandomKey, info: Self.nonceInfo, length: AES128GCM.nonceByteCount)
    }
}

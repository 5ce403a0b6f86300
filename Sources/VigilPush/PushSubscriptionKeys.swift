/// What a browser's push subscription gives the application server to encrypt for it (Push API
/// `PushSubscription.getKey`, RFC 8291 §2): the user agent's ECDH public key (`p256dh`) and the
/// 16-byte authentication secret (`auth`). The endpoint URL is `PushEndpoint`'s.
///
/// Only made by validation: a point off the curve or an `auth` of another length is refused when
/// the subscription arrives, not when the first notice is due.
public struct PushSubscriptionKeys: Hashable, Sendable {
    /// RFC 8291 §3.2: 16 bytes.
    public static let authSecretByteCount = 16

    public let p256dh: P256PublicKey
    public let authSecret: [UInt8]

    public init(p256dh: P256PublicKey, authSecret: [UInt8]) throws(WebPushError) {
        guard authSecret.count == Self.authSecretByteCount else {
            throw .wrongLength(what: "auth", expected: Self.authSecretByteCount, actual: authSecret.count)
        }
        self.p256dh = p256dh
        self.authSecret = authSecret
    }

    /// From the base64url texts of a subscription's JSON (`keys.p256dh`, `keys.auth`).
    public init(p256dh: String, auth: String) throws(WebPushError) {
        let key: P256PublicKey
        do { key = try P256PublicKey(base64URL: p256dh) } catch { throw .key(error) }
        guard let secret = Base64URLCoding.decode(auth) else { throw .notBase64URL(what: "auth") }
        try self.init(p256dh: key, authSecret: secret)
    }
}

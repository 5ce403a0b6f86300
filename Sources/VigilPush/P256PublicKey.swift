import COpenSSL

/// A public key of P-256 in the uncompressed form, known to be a point of the curve: a
/// subscription's `p256dh` (the user agent's ECDH key, RFC 8291 §2), an application server's VAPID
/// key, an ephemeral key in an `aes128gcm` header.
///
/// A value of 65 bytes that can only be made by validation, so code that holds one never checks
/// again; OpenSSL's key object is made when a computation needs it and freed after.
public struct P256PublicKey: Hashable, Sendable {
    /// 0x04 ‖ X (32) ‖ Y (32).
    public static let byteCount = 65

    /// The uncompressed point (SEC 1 §2.3.3), 65 bytes.
    public let bytes: [UInt8]

    /// Validates `bytes`: 65 bytes, the uncompressed form, a point of the curve.
    public init(bytes: [UInt8]) throws(PushKeyError) {
        guard bytes.count == Self.byteCount else {
            throw .wrongLength(what: "P-256 public key", expected: Self.byteCount, actual: bytes.count)
        }
        guard bytes[0] == 0x04 else { throw .notUncompressedPoint }
        EVP_PKEY_free(try P256KeyData.makeKey(publicKey: bytes, scalar: nil))
        self.bytes = bytes
    }

    /// From its base64url text (a subscription's `keys.p256dh`).
    public init(base64URL text: String) throws(PushKeyError) {
        guard let bytes = Base64URLCoding.decode(text) else { throw .notBase64URL(what: "P-256 public key") }
        try self.init(bytes: bytes)
    }

    /// An already validated point (a key pair's own public half).
    init(validated bytes: [UInt8]) { self.bytes = bytes }

    /// Unpadded base64url: the text form browsers give and take (`applicationServerKey`, `k=`).
    public var base64URL: String { Base64URLCoding.encode(bytes) }

    /// Runs `body` with an OpenSSL key object for this point, freed afterwards. The point was
    /// checked in full when this value was made: it is decoded, not checked again.
    func withKey<T>(_ body: (OpaquePointer) throws(PushKeyError) -> T) throws(PushKeyError) -> T {
        let key = try P256KeyData.makeKey(publicKey: bytes, scalar: nil, fullCheck: false)
        defer { EVP_PKEY_free(key) }
        return try body(key)
    }
}

import COpenSSL

/// A P-256 key pair held by OpenSSL: the application server's VAPID key (loaded from its PEM file
/// or generated) or the ephemeral ECDH key of one push message (RFC 8291 §3.1).
///
/// A class because it owns an `EVP_PKEY`, freed once in `deinit`. `@unchecked Sendable`: the key is
/// never changed after `init` (the one parameter set, the point format, is set there), and
/// OpenSSL 3 allows concurrent use of an unchanging `EVP_PKEY`, each operation with a context of
/// its own, so the daemon's push threads may share one VAPID key.
public final class P256PrivateKey: @unchecked Sendable {
    /// The private scalar's size, big-endian.
    public static let scalarByteCount = 32

    let key: OpaquePointer
    /// The public half, uncompressed.
    public let publicKey: P256PublicKey

    /// Takes ownership of `key` (an EC key on P-256 with its private half).
    private init(owning key: OpaquePointer) throws(PushKeyError) {
        do {
            publicKey = P256PublicKey(validated: try P256KeyData.uncompressedPublicKey(of: key))
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// A fresh key pair from OpenSSL's CSPRNG.
    public static func generate() throws(PushKeyError) -> P256PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_CTX_new_from_name(EC)"))
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, P256KeyData.groupName) == 1,
              EVP_PKEY_generate(context, &key) == 1, let made = key
        else { throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_generate(P-256)")) }
        return try P256PrivateKey(owning: made)
    }

    /// The key pair of private `scalar` (32 bytes, big-endian): published test vectors, and the
    /// user agent's side in tests. Refuses a scalar of 0 or not below the group order.
    public convenience init(scalar: [UInt8]) throws(PushKeyError) {
        guard scalar.count == Self.scalarByteCount else {
            throw .wrongLength(what: "P-256 private scalar", expected: Self.scalarByteCount, actual: scalar.count)
        }
        let point = try P256KeyData.publicKey(ofScalar: scalar)
        try self.init(owning: try P256KeyData.makeKey(publicKey: point, scalar: scalar))
    }

    /// The key of a PEM text: PKCS#8 (`BEGIN PRIVATE KEY`, what `openssl genpkey` and
    /// `pemPKCS8()` write) or SEC1 (`BEGIN EC PRIVATE KEY`, what `openssl ecparam -genkey` writes).
    /// An encrypted key is refused, never prompted for: the daemon has no terminal.
    public convenience init(pem: String) throws(PushKeyError) {
        let bytes = Array(pem.utf8)
        guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
            throw .openSSL(call: OpenSSLFailure.describe("BIO_new_mem_buf"))
        }
        defer { BIO_free(bio) }
        // The password callback answers "no password" (-1), so an encrypted key fails to read
        // instead of OpenSSL's default, which would read a password from the terminal.
        guard let key = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in -1 }, nil) else {
            OpenSSLFailure.discard()
            throw .unreadablePEM
        }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else {
            let found = EVP_PKEY_get0_type_name(key).map { String(cString: $0) } ?? "an unknown key type"
            EVP_PKEY_free(key)
            throw .notP256(found: found)
        }
        let curve = Self.groupName(of: key)
        guard curve == P256KeyData.groupName else {
            EVP_PKEY_free(key)
            throw .notP256(found: "EC on " + (curve ?? "an unnamed curve"))
        }
        try self.init(owning: key)
    }

    /// The curve's name of EC `key` ("prime256v1" for P-256), nil when it has none (explicit
    /// parameters).
    private static func groupName(of key: OpaquePointer) -> String? {
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
            OpenSSLFailure.discard()
            return nil
        }
        return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

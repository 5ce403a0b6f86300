import COpenSSL
import VigilCore
import VigilNATS

/// The Ed25519 half of nkey authentication, over OpenSSL's EVP interface: the public key of a
/// seed and the signature of a server's nonce. A key object lives only for one call (a CONNECT
/// per connection is rare), so no OpenSSL key outlives its use.
public enum NATSNKeySigner {
    /// The public key's text (`U...` for a user seed).
    public static func publicKey(of seed: NKey.Seed) throws(NATSAuthError) -> String {
        try withKey(seed) { key throws(NATSAuthError) in
            var raw = [UInt8](repeating: 0, count: 32)
            var length = 32
            guard EVP_PKEY_get_raw_public_key(key, &raw, &length) == 1, length == 32 else {
                throw NATSAuthError("cannot derive the nkey's public key")
            }
            return NKey.encodePublicKey(role: seed.role, raw: raw)
        }
    }

    /// The Ed25519 signature of `message` (the nonce's bytes) with `seed`, raw (64 bytes).
    public static func sign(_ message: [UInt8], with seed: NKey.Seed) throws(NATSAuthError) -> [UInt8] {
        try withKey(seed) { key throws(NATSAuthError) in
            guard let context = EVP_MD_CTX_new() else { throw NATSAuthError("EVP_MD_CTX_new") }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else { throw NATSAuthError("cannot start an Ed25519 signature") }
            var signature = [UInt8](repeating: 0, count: 64)
            var length = 64
            guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64 else {
                throw NATSAuthError("cannot sign the server's nonce")
            }
            return signature
        }
    }

    /// CONNECT's `sig`: the nonce's signature in base64url without padding (VigilCore's).
    public static func signNonce(_ nonce: String, with seed: NKey.Seed) throws(NATSAuthError) -> String {
        Base64URL.encode(try sign(Array(nonce.utf8), with: seed))
    }

    private static func withKey<T>(_ seed: NKey.Seed, _ body: (OpaquePointer) throws(NATSAuthError) -> T) throws(NATSAuthError) -> T {
        guard let key = seed.raw.withUnsafeBufferPointer({ EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }) else {
            throw NATSAuthError("OpenSSL refused the Ed25519 seed")
        }
        defer { EVP_PKEY_free(key) }
        return try body(key)
    }
}

/// Why the client's identity (an nkey seed, a `.creds` file) could not be used.
public struct NATSAuthError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

import COpenSSL

/// HMAC-SHA256 (RFC 2104) over libcrypto's one-shot `HMAC`, and a comparison of two MACs whose
/// time does not depend on where they differ (`CRYPTO_memcmp`).
enum HMACSHA256 {
    static let byteCount = 32

    static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        // HMAC with SHA-256 fails only when OpenSSL cannot allocate; there is no safe way on then.
        guard HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length) != nil, length == 32 else {
            fatalError("HMAC-SHA256: \(OpenSSLFailure.describe("HMAC"))")
        }
        return out
    }

    /// Constant-time equality of two MACs of the same length.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && CRYPTO_memcmp(a, b, a.count) == 0
    }
}

import COpenSSL

/// SHA-256 fed piece by piece (libcrypto's EVP digest), so that an object of many chunks is
/// hashed one chunk per step instead of all at once in one long loop turn.
final class SHA256Stream {
    private var context: OpaquePointer?

    init() {
        context = EVP_MD_CTX_new()
        precondition(context != nil && EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP SHA-256 unavailable")
    }

    deinit { EVP_MD_CTX_free(context) }

    func update(_ bytes: some Collection<UInt8>) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            _ = EVP_DigestUpdate(context, buffer.baseAddress, buffer.count)
        }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBufferPointer { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        }
    }

    /// The 32-byte digest; the stream is spent after it.
    func finish() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { out, initialized in
            var length: UInt32 = 0
            _ = EVP_DigestFinal_ex(context, out.baseAddress, &length)
            initialized = Int(length)
        }
    }
}

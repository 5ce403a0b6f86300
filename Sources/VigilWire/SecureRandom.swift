import COpenSSL

/// Cryptographically secure random bytes from libcrypto's `RAND_bytes`, for
/// session tokens, handshake keys and client mask keys (RFC 6455 §5.3 asks for
/// unpredictable masking keys).
public enum SecureRandom {
    /// `count` random bytes. A failing CSPRNG leaves no safe way to go on (a
    /// predictable token is worse than a crash), so failure stops the process.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "bad random byte count")
        if count == 0 { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            guard RAND_bytes(out.baseAddress, Int32(count)) == 1 else {
                fatalError("RAND_bytes failed: libcrypto CSPRNG unavailable")
            }
            initialized = count
        }
    }

    /// A random 32-bit value, e.g. a masking key for `FrameEncoder`.
    public static func uint32() -> UInt32 {
        let b = bytes(count: 4)
        return UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
    }
}

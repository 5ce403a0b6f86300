import COpenSSL

/// SHA-1, SHA-256 and base64 over libcrypto, for the RFC 6455 handshake (§4.2.2) and token digests.
///
/// The primitives are OpenSSL's; this type only sizes buffers and adds the strict
/// base64 checks the handshake needs (libcrypto's decoder tolerates whitespace and
/// non-canonical input).
public enum Crypto {
    /// SHA-1 digest (20 bytes). Used only where a protocol mandates it (the
    /// handshake accept value), never for security.
    public static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 20) { out, initialized in
            bytes.withUnsafeBufferPointer { input in
                _ = SHA1(input.baseAddress, input.count, out.baseAddress)
            }
            initialized = 20
        }
    }

    /// SHA-256 digest (32 bytes): what Vigil stores in place of capability tokens. Through
    /// `vigil_sha256` (the low-level calls): OpenSSL 3's one-shot `SHA256()` fetches the algorithm
    /// on every call, about three times slower for a token's few dozen bytes.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { out, initialized in
            bytes.withUnsafeBufferPointer { input in
                vigil_sha256(input.baseAddress, input.count, out.baseAddress)
            }
            initialized = 32
        }
    }

    /// Standard base64 (RFC 4648 §4) with `=` padding.
    public static func base64Encode(_ bytes: [UInt8]) -> String {
        if bytes.isEmpty { return "" }
        precondition(bytes.count <= Int(Int32.max) / 4 * 3, "base64 input too large for EVP_EncodeBlock")
        let capacity = (bytes.count + 2) / 3 * 4 + 1 // + NUL written by libcrypto
        let encoded = [UInt8](unsafeUninitializedCapacity: capacity) { out, initialized in
            let written = bytes.withUnsafeBufferPointer { input in
                EVP_EncodeBlock(out.baseAddress, input.baseAddress, Int32(input.count))
            }
            initialized = Int(max(0, written))
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// Strict base64 decoding: length a multiple of 4, only the RFC 4648 §4
    /// alphabet, `=` only as the last one or two characters, and unused bits of the
    /// last data character zero (canonical form). Returns nil otherwise.
    public static func base64Decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard !chars.isEmpty else { return [] }
        guard chars.count % 4 == 0, chars.count <= Int(Int32.max) else { return nil }
        var padding = 0
        if chars[chars.count - 1] == UInt8(ascii: "=") { padding += 1 }
        if chars[chars.count - 2] == UInt8(ascii: "=") { padding += 1 }
        if padding == 1 && chars[chars.count - 2] == UInt8(ascii: "=") { return nil }
        let dataCount = chars.count - padding
        for i in 0..<dataCount where sextet(chars[i]) == nil { return nil }
        // With one '=' the last data char carries 2 unused bits, with two '=' 4.
        if padding > 0, let last = sextet(chars[dataCount - 1]) {
            let unusedMask: UInt8 = padding == 1 ? 0x03 : 0x0F
            if last & unusedMask != 0 { return nil }
        }
        let decodedCount = chars.count / 4 * 3
        var decoded = [UInt8](unsafeUninitializedCapacity: decodedCount) { out, initialized in
            let written = chars.withUnsafeBufferPointer { input in
                EVP_DecodeBlock(out.baseAddress, input.baseAddress, Int32(input.count))
            }
            initialized = written == Int32(decodedCount) ? decodedCount : 0
        }
        guard decoded.count == decodedCount else { return nil }
        // EVP_DecodeBlock counts the padding as zero bytes; drop them.
        decoded.removeLast(padding)
        return decoded
    }

    /// The 6-bit value of a base64 alphabet character, nil for anything else.
    @inline(__always)
    static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}

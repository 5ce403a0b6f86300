/// The SHA-256 digest of a capability token (an edit token, later owner and watch tokens).
///
/// Vigil keeps only digests: a stolen snapshot or a memory dump does not hand out working tokens.
/// Comparison is constant-time so the time a check takes says nothing about how close a guess was.
public struct TokenDigest: Hashable, Sendable {
    public let words: (UInt64, UInt64, UInt64, UInt64)

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a token digest is 32 bytes")
        func word(_ i: Int) -> UInt64 {
            var w: UInt64 = 0
            for j in 0..<8 { w = w << 8 | UInt64(bytes[i * 8 + j]) }
            return w
        }
        words = (word(0), word(1), word(2), word(3))
    }

    /// Constant-time equality: every word is compared, whatever the first difference.
    public func matches(_ other: TokenDigest) -> Bool {
        let d = (words.0 ^ other.words.0) | (words.1 ^ other.words.1) | (words.2 ^ other.words.2) | (words.3 ^ other.words.3)
        return d == 0
    }

    public static func == (a: TokenDigest, b: TokenDigest) -> Bool { a.matches(b) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for w in [words.0, words.1, words.2, words.3] {
            for j in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: w >> UInt64(j * 8))) }
        }
        return out
    }
}

/// Where the domain gets randomness and token hashing. The daemon backs it with OpenSSL
/// (RAND_bytes, SHA-256); tests use a seeded generator, so the model stays pure and repeatable.
public protocol Secrets {
    /// `count` cryptographically random bytes.
    func randomBytes(_ count: Int) -> [UInt8]
    /// SHA-256 of the token's UTF-8 bytes.
    func digest(ofToken token: String) -> TokenDigest
}

extension Secrets {
    /// A new capability token: 256 random bits as unpadded base64url (43 characters).
    public func newToken() -> String {
        Base64URL.encode(randomBytes(32))
    }
}

/// Unpadded base64url (RFC 4648 §5), for tokens and session ids that travel in JSON and URLs.
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)]); out.append(alphabet[Int(n & 63)])
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18 & 63)]); out.append(alphabet[Int(n >> 12 & 63)]); out.append(alphabet[Int(n >> 6 & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of unpadded base64url `text`, as the Push API writes binary values
    /// (`PushSubscription.toJSON()`'s keys); nil for anything else. Trailing `=` is tolerated when
    /// it is exactly the padding the text lacks (keys pasted from other tools carry it), as
    /// VigilPush's `Base64URLCoding` does, so a key one accepts the other accepts too. Unused low
    /// bits of the last character must be zero: each value has one text.
    public static func decode(_ text: String) -> [UInt8]? {
        var utf8 = Array(text.utf8)
        if let firstPad = utf8.firstIndex(of: UInt8(ascii: "=")) {
            guard utf8.count % 4 == 0, utf8.count - firstPad <= 2, utf8[firstPad...].allSatisfy({ $0 == UInt8(ascii: "=") }) else { return nil }
            utf8.removeSubrange(firstPad...)
        }
        guard utf8.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * 3 / 4)
        var buffer: UInt32 = 0, bits = 0
        for c in utf8 {
            guard let v = Base64URLText.sextet(c) else { return nil }
            buffer = buffer << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        return buffer == 0 ? out : nil
    }
}

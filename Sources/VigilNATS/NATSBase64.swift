import VigilCore

/// Base64 (RFC 4648) as the NATS ecosystem writes it: the object store's names and digests in
/// padded base64url (§5), and the message bodies and headers of a `STREAM.MSG.GET` reply in
/// padded standard base64 (§4), both as Go's `encoding/base64` writes them.
public enum NATSBase64 {
    public enum Alphabet: Sendable { case standard, url }

    /// `bytes` in the alphabet, with `=` padding to a multiple of 4 unless `padded` is false.
    public static func encode(_ bytes: [UInt8], alphabet: Alphabet, padded: Bool = true) -> String {
        var text = Base64URL.encode(bytes)  // unpadded base64url; the rest is a mapping
        if alphabet == .standard {
            text = String(decoding: text.utf8.map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0 },
                          as: UTF8.self)
        }
        if padded { text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4) }
        return text
    }

    /// Strict decoding: only the alphabet's characters, `=` padding either absent or exactly what
    /// completes the last quantum, no lone final character, and the unused bits of the last
    /// character zero (the one canonical form). Nil for anything else; never traps.
    public static func decode(_ text: some Collection<UInt8>, alphabet: Alphabet) -> [UInt8]? {
        var chars = Array(text)
        var padding = 0
        while padding < 2, chars.last == UInt8(ascii: "=") {
            chars.removeLast()
            padding += 1
        }
        if padding > 0, (chars.count + padding) % 4 != 0 { return nil }
        let rest = chars.count % 4
        if rest == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3 + 2)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in chars {
            guard let v = sextet(c, alphabet) else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // Left-over bits (2 or 4) must be zero: another encoding of the same bytes is refused.
        guard accumulator == 0 else { return nil }
        return out
    }

    static func sextet(_ c: UInt8, _ alphabet: Alphabet) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+") where alphabet == .standard, UInt8(ascii: "-") where alphabet == .url: return 62
        case UInt8(ascii: "/") where alphabet == .standard, UInt8(ascii: "_") where alphabet == .url: return 63
        default: return nil
        }
    }
}

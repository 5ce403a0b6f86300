/// Unpadded base64url (RFC 4648 §5) over bytes, canonical only: the unused low bits of the last
/// character must be zero, so that one key, kid or sealed value has one spelling.
///
/// Byte loops rather than Foundation's base64 plus character replacement: per update the owner
/// encodes a sealed value and every watcher decodes one, and the `Character` round trip was half of
/// sealing's and opening's cost (`vigil-bench e2e`, docs/BENCHMARKS.md).
enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The value of a base64url character, or 0xFF.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        let count = bytes.count
        return String(unsafeUninitializedCapacity: (count * 4 + 2) / 3) { out in
            var o = 0, i = 0
            while i + 3 <= count {
                let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                out[o] = alphabet[Int(v >> 18)]
                out[o + 1] = alphabet[Int(v >> 12 & 63)]
                out[o + 2] = alphabet[Int(v >> 6 & 63)]
                out[o + 3] = alphabet[Int(v & 63)]
                o += 4
                i += 3
            }
            if count - i == 1 {
                let v = UInt32(bytes[i]) << 16
                out[o] = alphabet[Int(v >> 18)]
                out[o + 1] = alphabet[Int(v >> 12 & 63)]
                o += 2
            } else if count - i == 2 {
                let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                out[o] = alphabet[Int(v >> 18)]
                out[o + 1] = alphabet[Int(v >> 12 & 63)]
                out[o + 2] = alphabet[Int(v >> 6 & 63)]
                o += 3
            }
            return o
        }
    }

    /// The bytes of canonical unpadded base64url, or `nil` (another character, a length of 4n + 1,
    /// padding, or non-zero unused bits).
    static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            let n = utf8.count
            guard n % 4 != 1 else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(n * 3 / 4)
            var acc: UInt32 = 0, bits = 0
            for c in utf8 {
                let v = values[Int(c)]
                guard v != 0xFF else { return nil }
                acc = acc << 6 | UInt32(v)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                    acc &= (1 << UInt32(bits)) - 1
                }
            }
            // What is left (2 or 4 bits) is padding that must be zero.
            return acc == 0 ? out : nil
        }
    }
}

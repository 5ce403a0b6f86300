/// A pin's identity: a random (version 4) UUID. Its text form is the lowercase hyphenated UUID.
public typealias PinID = Identifier128<UUIDText>

/// The text form of a pin id: a UUID as 32 hex digits in groups of 8-4-4-4-12 (RFC 4122 §3),
/// written lowercase and read in either case. Random ids are version 4 with the RFC 4122 variant.
public enum UUIDText: IdentifierTextForm {
    public static func fixingRandomBits(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) {
        ((high & ~0xF000) | 0x4000,                                              // version 4
         (low & ~(0xC000_0000_0000_0000 as UInt64)) | 0x8000_0000_0000_0000)      // RFC 4122 variant
    }

    /// Parses the hyphenated hex form (either case); nil for anything else.
    public static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (high: UInt64, low: UInt64)? {
        var high: UInt64 = 0, low: UInt64 = 0
        var nibbles = 0
        var index = 0
        for byte in utf8 {
            index += 1
            if index == 9 || index == 14 || index == 19 || index == 24 {
                guard byte == UInt8(ascii: "-") else { return nil }
                continue
            }
            guard nibbles < 32, let value = hexValue(byte) else { return nil }
            if nibbles < 16 { high = high << 4 | UInt64(value) } else { low = low << 4 | UInt64(value) }
            nibbles += 1
        }
        guard nibbles == 32, index == 36 else { return nil }
        return (high, low)
    }

    public static func text(high: UInt64, low: UInt64) -> String {
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (n, word) in [high, low].enumerated() {
            for i in 0..<8 {
                let position = n * 8 + i
                if position == 4 || position == 6 || position == 8 || position == 10 { out.append(UInt8(ascii: "-")) }
                Hex.append(UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * i)), to: &out)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

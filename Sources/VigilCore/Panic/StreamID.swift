/// A panic stream's identity: 128 random bits. Its text form is unpadded base64url (22 characters),
/// short enough for a link and unguessable, though the ID alone opens nothing: watching needs a
/// watch token, and steering the stream needs the owner token or the owning connection.
public typealias StreamID = Identifier128<Base64URLText>

/// The text form of a stream id: its 16 bytes in unpadded base64url (RFC 4648 §5), 22 characters.
/// Random ids keep all 128 bits.
public enum Base64URLText: IdentifierTextForm {
    public static func fixingRandomBits(high: UInt64, low: UInt64) -> (high: UInt64, low: UInt64) {
        (high, low)
    }

    /// Parses the 22-character base64url form. Nil for any other length, any character outside the
    /// base64url alphabet, and for a last character whose 4 unused low bits are not zero: every ID
    /// has exactly one text form, so IDs compared as text and as values agree.
    public static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (high: UInt64, low: UInt64)? {
        var h: UInt64 = 0, l: UInt64 = 0
        var count = 0
        for byte in utf8 {
            guard count < 22, let value = sextet(byte) else { return nil }
            if count < 10 {                       // characters 0..9 carry bits 0..59
                h = h << 6 | UInt64(value)
            } else if count == 10 {               // character 10 straddles: 4 bits high, 2 bits low
                h = h << 4 | UInt64(value >> 2)
                l = UInt64(value & 3)
            } else if count < 21 {                // characters 11..20 carry 60 more bits of low
                l = l << 6 | UInt64(value)
            } else {                              // character 21: the last 2 bits and 4 zero bits
                guard value & 0xF == 0 else { return nil }
                l = l << 2 | UInt64(value >> 4)
            }
            count += 1
        }
        guard count == 22 else { return nil }
        return (h, l)
    }

    public static func text(high: UInt64, low: UInt64) -> String {
        Base64URL.encode(Identifier128<Self>(high: high, low: low).bytes)
    }

    /// The value of one base64url character (nil: not one); `Base64URL.decode` reads with it too.
    static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }
}

/// A panic stream's identity: 128 random bits. Its text form is unpadded base64url (22 characters),
/// short enough for a link and unguessable, though the ID alone opens nothing: watching needs a
/// watch token, and steering the stream needs the owner token or the owning connection.
public struct StreamID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    /// The ID made of the first 16 bytes of `bytes` (all 128 bits are kept).
    public init(random bytes: [UInt8]) {
        precondition(bytes.count >= 16, "a stream id is 16 bytes")
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<8 { h = h << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { l = l << 8 | UInt64(bytes[i]) }
        high = h
        low = l
    }

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses the 22-character base64url form. Nil for any other length, any character outside the
    /// base64url alphabet, and for a last character whose 4 unused low bits are not zero: every ID
    /// has exactly one text form, so IDs compared as text and as values agree.
    public init?(_ text: String) {
        var h: UInt64 = 0, l: UInt64 = 0
        var count = 0
        for byte in text.utf8 {
            guard count < 22, let value = StreamID.sextet(byte) else { return nil }
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
        high = h
        low = l
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        for word in [high, low] {
            for j in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: word >> UInt64(j * 8))) }
        }
        return out
    }

    public var description: String { Base64URL.encode(bytes) }

    public static func < (a: StreamID, b: StreamID) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
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

/// A pin's identity: a random (version 4) UUID, held as two words so that the store's dictionaries
/// hash 16 bytes instead of a 36-character string. Its text form is the lowercase hyphenated UUID.
public struct PinID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    /// A version 4 UUID from 16 random bytes (the version and variant bits are set here).
    public init(random bytes: [UInt8]) {
        precondition(bytes.count >= 16)
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<8 { h = h << 8 | UInt64(bytes[i]) }
        for i in 8..<16 { l = l << 8 | UInt64(bytes[i]) }
        h = (h & ~0xF000) | 0x4000                       // version 4
        l = (l & ~(0xC000_0000_0000_0000 as UInt64)) | 0x8000_0000_0000_0000  // RFC 4122 variant
        high = h
        low = l
    }

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses the hyphenated hex form (either case); nil for anything else.
    public init?(_ text: String) {
        var words: [UInt64] = [0, 0]
        var nibbles = 0
        var index = 0
        for byte in text.utf8 {
            index += 1
            if index == 9 || index == 14 || index == 19 || index == 24 {
                guard byte == UInt8(ascii: "-") else { return nil }
                continue
            }
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            guard nibbles < 32 else { return nil }
            words[nibbles / 16] = words[nibbles / 16] << 4 | UInt64(value)
            nibbles += 1
        }
        guard nibbles == 32, index == 36 else { return nil }
        high = words[0]
        low = words[1]
    }

    public var description: String {
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (n, word) in [high, low].enumerated() {
            for i in 0..<16 {
                let position = n * 16 + i
                if position == 8 || position == 12 || position == 16 || position == 20 { out.append(UInt8(ascii: "-")) }
                out.append(hex[Int(word >> UInt64(60 - 4 * i) & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func < (a: PinID, b: PinID) -> Bool {
        (a.high, a.low) < (b.high, b.low)
    }
}

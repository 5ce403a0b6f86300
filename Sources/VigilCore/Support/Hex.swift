/// Lowercase hexadecimal text of bytes (two digits per byte), for digests shown to operators.
public enum Hex {
    public static func lowercase<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits: StaticString = "0123456789abcdef"
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits.utf8Start[Int(byte >> 4)])
            out.append(digits.utf8Start[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

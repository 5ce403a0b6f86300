/// Lowercase hexadecimal text of bytes (two digits per byte), for digests, ids and file names.
public enum Hex {
    public static func lowercase<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { append(byte, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// An integer's digits, most significant first, padded to its full width (8 for a `UInt32`).
    public static func lowercase<Value: FixedWidthInteger>(_ value: Value) -> String {
        withUnsafeBytes(of: value.bigEndian) { lowercase($0) }
    }

    /// Appends the byte's two digits as UTF-8.
    @inline(__always)
    public static func append(_ byte: UInt8, to out: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        out.append(digits.utf8Start[Int(byte >> 4)])
        out.append(digits.utf8Start[Int(byte & 0xF)])
    }
}

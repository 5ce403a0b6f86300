/// The two forms of a P-256 ECDSA signature: DER `ECDSA-Sig-Value` (RFC 3279 §2.2.3: a SEQUENCE of
/// two INTEGERs, each minimal, so 1 to 33 bytes with a leading 0x00 when the top bit is set), what
/// OpenSSL writes; and raw r ‖ s (32 bytes each, big-endian, left-padded with zeros), what a JWT
/// carries (RFC 7518 §3.4).
///
/// Pure bytes and strict both ways: a DER text with a long-form length, a non-minimal or negative
/// integer, an integer of more than 32 bytes or bytes left over is refused, so a signature has
/// one accepted encoding.
public enum ECDSASignature {
    /// r ‖ s.
    public static let rawByteCount = 64
    static let scalarByteCount = 32

    /// Raw r ‖ s (64 bytes) from DER.
    public static func raw(der: [UInt8]) throws(ECDSASignatureError) -> [UInt8] {
        // SEQUENCE with a short-form length: the longest signature's content is 70 bytes.
        guard der.count >= 2, der[0] == 0x30, der[1] < 0x80, Int(der[1]) == der.count - 2 else {
            throw ECDSASignatureError("not a DER SEQUENCE of the signature's length")
        }
        var index = 2
        let r = try integer(der, at: &index)
        let s = try integer(der, at: &index)
        guard index == der.count else { throw ECDSASignatureError("bytes after the two INTEGERs") }
        return leftPadded(r) + leftPadded(s)
    }

    /// DER from raw r ‖ s (64 bytes).
    public static func der(raw: [UInt8]) throws(ECDSASignatureError) -> [UInt8] {
        guard raw.count == rawByteCount else { throw ECDSASignatureError("raw signature of \(raw.count) bytes, not 64") }
        let r = minimalInteger(raw[0..<32])
        let s = minimalInteger(raw[32..<64])
        guard !(r == [0] || s == [0]) else { throw ECDSASignatureError("r or s is zero") }
        var out: [UInt8] = [0x30, UInt8(4 + r.count + s.count), 0x02, UInt8(r.count)]
        out += r
        out += [0x02, UInt8(s.count)]
        out += s
        return out
    }

    /// The magnitude of the INTEGER at `index` (leading 0x00 removed), advancing past it.
    private static func integer(_ der: [UInt8], at index: inout Int) throws(ECDSASignatureError) -> ArraySlice<UInt8> {
        guard index + 2 <= der.count, der[index] == 0x02 else { throw ECDSASignatureError("an INTEGER expected") }
        let length = Int(der[index + 1])
        let start = index + 2
        guard length >= 1, length < 0x80, start + length <= der.count else { throw ECDSASignatureError("an INTEGER's length is wrong") }
        var value = der[start..<(start + length)]
        index = start + length
        guard value.first! & 0x80 == 0 else { throw ECDSASignatureError("a negative INTEGER") }
        if value.first == 0 {
            // Minimal DER: a leading zero only where the next byte's top bit would read as a sign.
            guard value.count > 1, value[value.startIndex + 1] & 0x80 != 0 else { throw ECDSASignatureError("a non-minimal INTEGER") }
            value = value.dropFirst()
        }
        guard value.count <= scalarByteCount else { throw ECDSASignatureError("an INTEGER longer than 32 bytes") }
        guard value.contains(where: { $0 != 0 }) else { throw ECDSASignatureError("r or s is zero") }
        return value
    }

    private static func leftPadded(_ value: ArraySlice<UInt8>) -> [UInt8] {
        [UInt8](repeating: 0, count: scalarByteCount - value.count) + value
    }

    /// `value` (32 bytes, big-endian) as a minimal positive DER INTEGER's content.
    private static func minimalInteger(_ value: ArraySlice<UInt8>) -> [UInt8] {
        let magnitude = value.drop { $0 == 0 }
        guard let first = magnitude.first else { return [0] }
        return first & 0x80 != 0 ? [0] + magnitude : Array(magnitude)
    }
}

/// Why bytes are not a P-256 ECDSA signature in the form asked for.
public struct ECDSASignatureError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

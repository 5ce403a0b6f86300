import VigilCore

/// Appends the fixed-width fields of the state formats to a byte buffer.
///
/// Integers are little-endian; ids and token digests are written as their canonical bytes
/// (big-endian words), so a hex dump shows the same digits as their text forms. Strings are a
/// u32 byte count and UTF-8. Every append goes through `withUnsafeBytes(of:)`, one bounds-checked
/// `append(contentsOf:)` per field, which keeps a million-pin snapshot encode well under a second.
struct StateWriter: Sendable {
    var bytes: [UInt8]

    init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) mutating func u8(_ v: UInt8) { bytes.append(v) }

    @inline(__always) mutating func u16(_ v: UInt16) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always) mutating func u32(_ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always) mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    @inline(__always) mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }

    @inline(__always) mutating func f64(_ v: Double) { u64(v.bitPattern) }

    @inline(__always) mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }

    /// A 64-bit word as 8 big-endian bytes (ids and digests keep their canonical byte order).
    @inline(__always) mutating func word(_ v: UInt64) {
        withUnsafeBytes(of: v.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            u32(UInt32(truncatingIfNeeded: utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func pinID(_ id: PinID) {
        word(id.high)
        word(id.low)
    }

    mutating func streamID(_ id: StreamID) {
        word(id.high)
        word(id.low)
    }

    mutating func digest(_ d: TokenDigest) {
        word(d.words.0)
        word(d.words.1)
        word(d.words.2)
        word(d.words.3)
    }

    /// Overwrites 4 bytes at `offset` (a length or checksum known only after what follows it).
    mutating func patchU32(_ v: UInt32, at offset: Int) {
        bytes[offset] = UInt8(truncatingIfNeeded: v)
        bytes[offset + 1] = UInt8(truncatingIfNeeded: v >> 8)
        bytes[offset + 2] = UInt8(truncatingIfNeeded: v >> 16)
        bytes[offset + 3] = UInt8(truncatingIfNeeded: v >> 24)
    }
}

/// Encodes WebSocket frames (RFC 6455 §5.2) into caller-owned memory.
///
/// `headerSize`, `writeHeader` and `applyMask` allocate nothing; the server reserves
/// `headerSize` bytes in its output buffer, writes the header there and appends the
/// payload. `frame` and `closePayload` allocate and exist for control frames,
/// clients and tests.
///
/// Mask keys use the same byte order as `FrameHeader.maskKey`: wire mask byte j is
/// `(key >> (8 * j)) & 0xFF`.
public enum FrameEncoder {
    /// Header bytes for a payload of `payloadCount` bytes: 2, 4 or 10, plus 4 if masked.
    @inlinable
    public static func headerSize(payloadCount: Int, masked: Bool) -> Int {
        precondition(payloadCount >= 0, "negative payload length")
        let base = payloadCount < 126 ? 2 : (payloadCount <= 0xFFFF ? 4 : 10)
        return masked ? base + 4 : base
    }

    /// Writes a frame header at `into` (which must have `headerSize` bytes of room)
    /// using the minimal length encoding. Returns the number of bytes written.
    @inlinable
    public static func writeHeader(
        into: UnsafeMutableRawPointer, opcode: Opcode, fin: Bool, rsv1: Bool,
        payloadCount: Int, maskKey: UInt32?
    ) -> Int {
        precondition(payloadCount >= 0, "negative payload length")
        var b0 = opcode.rawValue
        if fin { b0 |= 0x80 }
        if rsv1 { b0 |= 0x40 }
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        into.storeBytes(of: b0, as: UInt8.self)
        var cursor: Int
        if payloadCount < 126 {
            into.storeBytes(of: maskBit | UInt8(payloadCount), toByteOffset: 1, as: UInt8.self)
            cursor = 2
        } else if payloadCount <= 0xFFFF {
            into.storeBytes(of: maskBit | 126, toByteOffset: 1, as: UInt8.self)
            into.storeBytes(of: UInt16(payloadCount).bigEndian, toByteOffset: 2, as: UInt16.self)
            cursor = 4
        } else {
            into.storeBytes(of: maskBit | 127, toByteOffset: 1, as: UInt8.self)
            into.storeBytes(of: UInt64(payloadCount).bigEndian, toByteOffset: 2, as: UInt64.self)
            cursor = 10
        }
        if let key = maskKey {
            into.storeBytes(of: key.littleEndian, toByteOffset: cursor, as: UInt32.self)
            cursor += 4
        }
        return cursor
    }

    /// XORs `bytes` with the mask in place (masking and unmasking are the same
    /// operation, §5.3). `phase` is how many payload bytes precede `bytes[0]` in the
    /// frame (only `phase % 4` matters), so a payload split across reads is
    /// unmasked piecewise with the right key bytes.
    @inlinable
    public static func applyMask(_ bytes: UnsafeMutableRawBufferPointer, key: UInt32, phase: Int) {
        guard key != 0, let base = bytes.baseAddress else { return }
        let count = bytes.count
        // Rotate so byte 0 of the rotated key (little-endian order) is the key byte
        // for bytes[0]; after that, wire byte i is masked with rotated byte i % 4.
        let shift = UInt32((phase & 3) &* 8)
        let k32 = shift == 0 ? key : (key &>> shift) | (key &<< (32 &- shift))
        // The 8-byte word in memory holds key bytes 0,1,2,3,0,1,2,3 whatever the
        // host byte order: build it little-endian, then convert to native.
        let k64 = (UInt64(k32) | (UInt64(k32) &<< 32)).littleEndian
        var i = 0
        // 32 bytes per iteration; unaligned raw loads/stores are legal (SE-0349).
        while i &+ 32 <= count {
            let p = base + i
            p.storeBytes(of: p.loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            p.storeBytes(of: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self) ^ k64, toByteOffset: 8, as: UInt64.self)
            p.storeBytes(of: p.loadUnaligned(fromByteOffset: 16, as: UInt64.self) ^ k64, toByteOffset: 16, as: UInt64.self)
            p.storeBytes(of: p.loadUnaligned(fromByteOffset: 24, as: UInt64.self) ^ k64, toByteOffset: 24, as: UInt64.self)
            i &+= 32
        }
        while i &+ 8 <= count {
            let p = base + i
            p.storeBytes(of: p.loadUnaligned(as: UInt64.self) ^ k64, as: UInt64.self)
            i &+= 8
        }
        // i is a multiple of 8, so the tail starts at key byte 0 again.
        var k = k32
        while i < count {
            let p = base + i
            p.storeBytes(of: p.load(as: UInt8.self) ^ UInt8(truncatingIfNeeded: k), as: UInt8.self)
            k = (k &>> 8) | (k &<< 24)
            i &+= 1
        }
    }

    /// A whole frame as a new array (allocates). Masks the payload copy when
    /// `maskKey` is given; the caller's array is untouched.
    public static func frame(
        opcode: Opcode, payload: [UInt8], fin: Bool = true, rsv1: Bool = false, maskKey: UInt32? = nil
    ) -> [UInt8] {
        let headerCount = headerSize(payloadCount: payload.count, masked: maskKey != nil)
        let total = headerCount + payload.count
        return [UInt8](unsafeUninitializedCapacity: total) { out, initialized in
            let base = UnsafeMutableRawPointer(out.baseAddress!)
            let written = writeHeader(
                into: base, opcode: opcode, fin: fin, rsv1: rsv1,
                payloadCount: payload.count, maskKey: maskKey)
            payload.withUnsafeBytes { src in
                if let from = src.baseAddress {
                    (base + written).copyMemory(from: from, byteCount: src.count)
                }
            }
            if let key = maskKey {
                applyMask(UnsafeMutableRawBufferPointer(start: base + written, count: payload.count), key: key, phase: 0)
            }
            initialized = total
        }
    }

    /// The payload of a close frame: the code in network order, then the reason as
    /// UTF-8, cut at a code point boundary so the payload fits the 125 bytes of a
    /// control frame (reason ≤ 123 bytes, §5.5.1). Never use `noStatus` or
    /// `abnormal` here: they are for local reporting only (§7.4.1).
    public static func closePayload(code: CloseCode, reason: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(truncatingIfNeeded: code.rawValue >> 8), UInt8(truncatingIfNeeded: code.rawValue)]
        let utf8 = Array(reason.utf8)
        var cut = min(utf8.count, 123)
        // A String's UTF-8 is valid, so backing off continuation bytes (10xxxxxx)
        // lands on the start of a code point.
        while cut < utf8.count && cut > 0 && utf8[cut] & 0xC0 == 0x80 {
            cut -= 1
        }
        out.append(contentsOf: utf8[0..<cut])
        return out
    }
}

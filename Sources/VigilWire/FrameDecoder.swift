/// A resumable decoder for WebSocket frame headers (RFC 6455 §5.2).
///
/// A header is 2 to 14 bytes and may arrive split at any byte. When the whole
/// header is present in the caller's buffer it is parsed in place; otherwise the
/// bytes seen so far are copied into a 16-byte inline spill (two UInt64, never the
/// heap) and parsing resumes on the next call.
///
/// The decoder enforces every rule that can be judged from one header alone:
/// masking by role, RSV bits, reserved opcodes, control frame length and FIN,
/// 64-bit length high bit and minimal length encoding. Rules that need message
/// context (continuation order, message size) belong to `MessageReader`.
/// Frame-level checks that need only the first two bytes run as soon as those two
/// bytes arrive, so a bad frame fails without waiting for its extended length.
public struct FrameDecoder: Sendable {
    /// Outcome of one `decodeHeader` call.
    public enum Result: Equatable, Sendable {
        /// All available bytes were consumed into the spill; the header is incomplete.
        case needMore
        /// A complete, rule-checked header; `offset` now points at its payload.
        case header(FrameHeader)
        /// The header breaks a frame rule; the decoder is now useless.
        case failure(WireError)
    }

    /// Parsing progress. `empty`: no header bytes seen; `partial`: `spillCount`
    /// bytes of the current header wait in `spill`.
    @usableFromInline enum State: UInt8, Sendable {
        case empty
        case partial
    }

    @usableFromInline var spill: (UInt64, UInt64) = (0, 0)
    @usableFromInline var spillCount: UInt8 = 0
    @usableFromInline var state: State = .empty
    /// RSV bits (within 0x70) that negotiated extensions allow.
    @usableFromInline let allowedRSV: UInt8
    /// True for the server role: frames must be masked. False: must not be.
    @usableFromInline let expectMasked: Bool

    /// - Parameter allowedRSV: RSV bits an extension gave meaning to, as they sit in
    ///   the first byte (0x40 = RSV1). RSV1 is further limited to text/binary frames,
    ///   because permessage-deflate marks the first frame of a message with it.
    public init(role: Role, allowedRSV: UInt8 = 0) {
        self.allowedRSV = allowedRSV & 0x70
        self.expectMasked = role == .server
    }

    /// No header bytes are waiting.
    public var isEmpty: Bool { state == .empty }

    /// Drops any partially received header.
    public mutating func reset() {
        spill = (0, 0)
        spillCount = 0
        state = .empty
    }

    /// Decodes a header starting at `buffer[offset]`, advancing `offset` past every
    /// byte it consumed (the header's bytes, or all bytes if the header is incomplete).
    public mutating func decodeHeader(_ buffer: UnsafeRawBufferPointer, offset: inout Int) -> Result {
        let available = buffer.count &- offset
        guard available > 0, let base = buffer.baseAddress else { return .needMore }
        let start = base + offset

        if state == .empty, available >= 2 {
            // Fast path: parse straight from the caller's buffer.
            let b0 = start.load(as: UInt8.self)
            let b1 = start.load(fromByteOffset: 1, as: UInt8.self)
            if let error = checkFirstTwo(b0, b1) {
                offset &+= 2
                return .failure(error)
            }
            let length = FrameDecoder.headerLength(b1)
            if available >= length {
                offset &+= length
                return FrameDecoder.parse(start)
            }
        }
        return spillAndParse(start, available: available, offset: &offset)
    }

    /// Slow path: copy header bytes into the spill until the header is complete.
    @usableFromInline
    mutating func spillAndParse(_ start: UnsafeRawPointer, available: Int, offset: inout Int) -> Result {
        var consumed = 0
        while true {
            let have = Int(spillCount)
            // Until two bytes are known the full length is unknown; ask for two first.
            let target = have < 2 ? 2 : FrameDecoder.headerLength(spillByte(1))
            let take = min(target &- have, available &- consumed)
            if take > 0 {
                withUnsafeMutableBytes(of: &spill) { dst in
                    // have + take <= 14 < 16: stays inside the spill.
                    (dst.baseAddress! + have).copyMemory(from: start + consumed, byteCount: take)
                }
                spillCount = UInt8(have &+ take)
                consumed &+= take
                state = .partial
            }
            let now = Int(spillCount)
            if now < target {
                offset &+= consumed
                return .needMore
            }
            if target == 2 {
                if let error = checkFirstTwo(spillByte(0), spillByte(1)) {
                    offset &+= consumed
                    return .failure(error)
                }
                if FrameDecoder.headerLength(spillByte(1)) == 2 { break }
                continue
            }
            break
        }
        offset &+= consumed
        let result = withUnsafeBytes(of: &spill) { FrameDecoder.parse($0.baseAddress!) }
        reset()
        return result
    }

    @inline(__always)
    func spillByte(_ index: Int) -> UInt8 {
        withUnsafeBytes(of: spill) { $0[index] }
    }

    /// Header size implied by the second byte: 2, plus 2 or 8 for the extended
    /// length, plus 4 for the masking key.
    @inlinable @inline(__always)
    static func headerLength(_ b1: UInt8) -> Int {
        let len7 = b1 & 0x7F
        let extended = len7 == 126 ? 2 : (len7 == 127 ? 8 : 0)
        return 2 &+ extended &+ (b1 & 0x80 != 0 ? 4 : 0)
    }

    /// Rules decidable from the first two bytes (§5.1, §5.2, §5.5).
    @inlinable @inline(__always)
    func checkFirstTwo(_ b0: UInt8, _ b1: UInt8) -> WireError? {
        let masked = b1 & 0x80 != 0
        if masked != expectMasked {
            return expectMasked ? .unmaskedFrame : .maskedFrameFromServer
        }
        let op = b0 & 0x0F
        guard let opcode = Opcode(rawValue: op) else { return .reservedOpcode(op) }
        let rsv = b0 & 0x70
        if rsv & ~allowedRSV != 0 { return .reservedBitsSet }
        // RSV1 (permessage-deflate) marks the first frame of a data message only.
        if rsv & 0x40 != 0 && opcode != .text && opcode != .binary { return .reservedBitsSet }
        if opcode.isControl {
            if b0 & 0x80 == 0 { return .fragmentedControlFrame }
            if b1 & 0x7F > 125 { return .controlFrameTooLong }
        }
        return nil
    }

    /// Parses a complete header whose first two bytes passed `checkFirstTwo`.
    @usableFromInline
    static func parse(_ p: UnsafeRawPointer) -> Result {
        let b0 = p.load(as: UInt8.self)
        let b1 = p.load(fromByteOffset: 1, as: UInt8.self)
        let len7 = b1 & 0x7F
        var length = UInt64(len7)
        var cursor = 2
        if len7 == 126 {
            length = UInt64(UInt16(bigEndian: p.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
            // §5.2: "the minimal number of bytes MUST be used to encode the length".
            if length < 126 { return .failure(.nonMinimalLength) }
            cursor = 4
        } else if len7 == 127 {
            length = UInt64(bigEndian: p.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
            if length & (1 << 63) != 0 { return .failure(.lengthHighBitSet) }
            if length <= 0xFFFF { return .failure(.nonMinimalLength) }
            cursor = 10
        }
        var key: UInt32 = 0
        let masked = b1 & 0x80 != 0
        if masked {
            // Wire byte j becomes bits 8j..<8j+8 (little-endian memory order).
            key = UInt32(littleEndian: p.loadUnaligned(fromByteOffset: cursor, as: UInt32.self))
        }
        return .header(FrameHeader(firstByte: b0, masked: masked, payloadLength: length, maskKey: key))
    }
}

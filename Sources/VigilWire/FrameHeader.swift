/// A decoded WebSocket frame header (RFC 6455 §5.2), already checked by
/// `FrameDecoder` against the frame-level rules.
///
/// The first byte is kept packed as it came off the wire; FIN, RSV and opcode are
/// computed views of it.
///
/// Mask key byte order: `maskKey` holds the four masking-key bytes in wire order as
/// the UInt32's little-endian bytes, i.e. wire byte j is `(maskKey >> (8 * j)) & 0xFF`.
/// `FrameEncoder` uses the same mapping, so a key round-trips unchanged.
public struct FrameHeader: Equatable, Sendable {
    /// FIN, RSV1-3 and the opcode, exactly as the frame's first byte.
    public var firstByte: UInt8
    /// Whether the MASK bit was set.
    public var masked: Bool
    /// The payload length announced by the header.
    public var payloadLength: UInt64
    /// The masking key (see the type's note on byte order); 0 when not masked.
    public var maskKey: UInt32

    public init(firstByte: UInt8, masked: Bool, payloadLength: UInt64, maskKey: UInt32) {
        self.firstByte = firstByte
        self.masked = masked
        self.payloadLength = payloadLength
        self.maskKey = maskKey
    }

    /// FIN: this is the final fragment of its message.
    @inlinable public var fin: Bool { firstByte & 0x80 != 0 }
    /// The RSV1-3 bits in place (mask 0x70): 0x40 = RSV1, 0x20 = RSV2, 0x10 = RSV3.
    @inlinable public var rsv: UInt8 { firstByte & 0x70 }
    /// RSV1, used by permessage-deflate to mark a compressed message.
    @inlinable public var rsv1: Bool { firstByte & 0x40 != 0 }
    /// The raw 4-bit opcode.
    @inlinable public var opcodeBits: UInt8 { firstByte & 0x0F }
    /// The opcode; nil only for reserved values, which `FrameDecoder` never yields.
    @inlinable public var opcode: Opcode? { Opcode(rawValue: opcodeBits) }
}

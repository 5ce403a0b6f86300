/// A WebSocket frame opcode (RFC 6455 §5.2). Values 3-7 and 0xB-0xF are reserved
/// and have no case: the decoder rejects them before building an `Opcode`.
public enum Opcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Control frames have the high bit of the 4-bit opcode set (§5.5).
    @inlinable
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

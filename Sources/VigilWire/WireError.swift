/// Every way a peer can break RFC 6455 framing, as one closed enum.
///
/// `closeCode` and `reason` are the single place where a failure is mapped to what
/// goes into the close frame Vigil sends back before dropping the connection.
public enum WireError: Error, Equatable, Sendable {
    /// A client sent a frame without a mask (§5.1: clients MUST mask).
    case unmaskedFrame
    /// A server sent a masked frame (§5.1: servers MUST NOT mask).
    case maskedFrameFromServer
    /// RSV bits set that no negotiated extension defines (§5.2), or RSV1 on a
    /// continuation or control frame.
    case reservedBitsSet
    /// Opcode 0x3-0x7 or 0xB-0xF (§5.2).
    case reservedOpcode(UInt8)
    /// A control frame announced more than 125 payload bytes (§5.5).
    case controlFrameTooLong
    /// A control frame with FIN clear (§5.5: control frames MUST NOT be fragmented).
    case fragmentedControlFrame
    /// A continuation frame with no fragmented message in progress (§5.4).
    case unexpectedContinuation
    /// A text or binary frame while a fragmented message awaits its continuation (§5.4).
    case expectedContinuation
    /// The message's cumulative payload exceeds the configured limit.
    case messageTooBig
    /// Text message or close reason is not valid UTF-8 (§8.1).
    case invalidUTF8
    /// A close frame carried a code a peer may not send (§7.4).
    case invalidCloseCode(UInt16)
    /// A close frame with a 1-byte payload: too short for a status code (§5.5.1).
    case closePayloadTooShort
    /// The payload length was not encoded in the minimal number of bytes (§5.2).
    case nonMinimalLength
    /// A 64-bit payload length with its most significant bit set (§5.2).
    case lengthHighBitSet
    /// A permessage-deflate message whose payload is not valid DEFLATE data (RFC 7692 §7.2.2).
    /// 1007, like invalid UTF-8: the frames were sound, the message's content was not.
    case invalidCompressedData
    /// zlib could not allocate its state for a compressed message: our failure, not the peer's.
    case compressionFailed

    /// The status code to send in the close frame that answers this failure.
    public var closeCode: CloseCode {
        switch self {
        case .messageTooBig:
            return .messageTooBig
        case .invalidUTF8, .invalidCompressedData:
            return .invalidPayload
        case .compressionFailed:
            return .internalError
        case .unmaskedFrame, .maskedFrameFromServer, .reservedBitsSet, .reservedOpcode,
             .controlFrameTooLong, .fragmentedControlFrame, .unexpectedContinuation,
             .expectedContinuation, .invalidCloseCode, .closePayloadTooShort,
             .nonMinimalLength, .lengthHighBitSet:
            return .protocolError
        }
    }

    /// Short ASCII text for the close frame's reason (always well under the
    /// 123-byte limit of §5.5.1).
    public var reason: String {
        switch self {
        case .unmaskedFrame: return "client frame not masked"
        case .maskedFrameFromServer: return "server frame masked"
        case .reservedBitsSet: return "reserved bits set"
        case .reservedOpcode(let op): return "reserved opcode \(op)"
        case .controlFrameTooLong: return "control frame payload over 125 bytes"
        case .fragmentedControlFrame: return "fragmented control frame"
        case .unexpectedContinuation: return "continuation without a message in progress"
        case .expectedContinuation: return "new message before the previous one finished"
        case .messageTooBig: return "message too big"
        case .invalidUTF8: return "invalid UTF-8"
        case .invalidCloseCode(let code): return "invalid close code \(code)"
        case .closePayloadTooShort: return "close payload of 1 byte"
        case .nonMinimalLength: return "payload length not minimally encoded"
        case .lengthHighBitSet: return "64-bit payload length with high bit set"
        case .invalidCompressedData: return "invalid compressed data"
        case .compressionFailed: return "decompression unavailable"
        }
    }
}

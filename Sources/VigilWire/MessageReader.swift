/// The message-level WebSocket decoder (RFC 6455 §5) a connection runs over its
/// input buffer.
///
/// It drives a `FrameDecoder` for headers and adds the rules that need context:
/// continuation order (§5.4), the cumulative message size limit, incremental UTF-8
/// validation of text (§8.1) and close frame payloads (§5.5.1, §7.4). Data payloads
/// are never copied: they are unmasked in place in the caller's buffer and handed
/// out as chunks, so the data path performs no allocation. Control payloads (≤ 125
/// bytes) are returned as arrays.
///
/// The struct is kept small (see `MessageReaderTests.storedSize`) because one
/// lives in every connection. An idle reader owns no heap memory: the control
/// payload accumulator is an empty array except while a control frame's payload
/// is split across reads.
///
/// After a `close` event the reader keeps decoding if called; the connection layer
/// decides to stop reading (RFC 6455 §5.5.1: nothing may follow a close frame).
public struct MessageReader {
    /// What the reader is in the middle of.
    @usableFromInline enum Phase {
        /// Waiting for (the rest of) a frame header.
        case header
        /// Inside a data frame's payload; `remaining` bytes left.
        case data
        /// Inside a control frame's payload; `remaining` bytes left.
        case control
        /// A rule was broken; terminal.
        case failed(WireError)
    }

    /// Whether a data message is in progress, and its type.
    @usableFromInline enum InProgress: UInt8 {
        case none, text, binary
    }

    // Field order packs the small fields into the decoder's tail padding.
    @usableFromInline var decoder: FrameDecoder
    @usableFromInline var inProgress: InProgress = .none
    @usableFromInline var validator = UTF8Validator()
    /// Validate text messages as they stream (default true). The compression layer
    /// turns it off for a compressed message right after its `messageStart`, before
    /// the first `messageData`, and validates the inflated text itself; the setting
    /// applies to chunks and the end-of-message check alike and stays until changed.
    /// Close reasons are always validated.
    public var validatesText = true
    /// First byte (FIN, RSV, opcode) of the frame whose payload is being read.
    @usableFromInline var frameFirstByte: UInt8 = 0
    @usableFromInline var phase: Phase = .header
    /// Masking key of the current frame, rotated after every chunk so that its
    /// byte 0 always applies to the next payload byte (the mask phase carried
    /// across reads). Zero for unmasked frames.
    @usableFromInline var maskKey: UInt32 = 0
    /// Payload bytes of the current frame not yet consumed.
    @usableFromInline var remaining: UInt64 = 0
    /// Payload bytes announced so far by the frames of the current data message.
    /// Invariant: messageBytes <= maxMessageBytes.
    @usableFromInline var messageBytes: UInt64 = 0
    @usableFromInline let maxMessageBytes: UInt64
    /// Accumulates a control payload split across reads; empty (no heap) otherwise.
    @usableFromInline var control: [UInt8] = []

    /// - Parameters:
    ///   - role: `.server` expects masked frames, `.client` unmasked ones.
    ///   - maxMessageBytes: limit on the total payload of one data message
    ///     (negative counts as 0).
    ///   - allowedRSV: RSV bits negotiated extensions allow (0x40 = RSV1 for
    ///     permessage-deflate); any other RSV bit fails with 1002.
    public init(role: Role, maxMessageBytes: Int, allowedRSV: UInt8 = 0) {
        decoder = FrameDecoder(role: role, allowedRSV: allowedRSV)
        self.maxMessageBytes = UInt64(max(0, maxMessageBytes))
    }

    /// Between frames with nothing held: no header bytes waiting, no message or control frame
    /// in progress, not failed, text validation on. A reader at rest behaves exactly as a new
    /// one built with the same role, limit and RSV bits (a server connection keeps none while
    /// idle: `Connection` builds a new one for each read and keeps only one that is not at rest).
    public var isAtRest: Bool {
        guard case .header = phase else { return false }
        return decoder.isEmpty && inProgress == .none && control.isEmpty && validatesText
    }

    /// Decodes from `buffer[offset..<buffer.count]`, unmasking payload bytes in
    /// place, advances `offset` past what it consumed and returns one event. Call
    /// in a loop until `.needMore` (then `offset == buffer.count`) or `.failure`.
    /// Pointers in `.messageData` point into `buffer`.
    public mutating func next(_ buffer: UnsafeMutableRawBufferPointer, offset: inout Int) -> WireEvent {
        precondition(offset >= 0 && offset <= buffer.count, "offset outside the buffer")
        while true {
            switch phase {
            case .header:
                switch decoder.decodeHeader(UnsafeRawBufferPointer(buffer), offset: &offset) {
                case .needMore:
                    return .needMore
                case .failure(let error):
                    return fail(error)
                case .header(let header):
                    if let event = begin(header) { return event }
                }
            case .data:
                if remaining == 0 {
                    phase = .header
                    if frameFirstByte & 0x80 != 0 { return finishMessage() }
                    continue
                }
                let available = buffer.count &- offset
                guard available > 0, let base = buffer.baseAddress else { return .needMore }
                let n = remaining < UInt64(available) ? Int(remaining) : available
                let chunk = UnsafeMutableRawBufferPointer(start: base + offset, count: n)
                unmask(chunk)
                if inProgress == .text && validatesText && !validator.feed(UnsafeRawBufferPointer(chunk)) {
                    return fail(.invalidUTF8)
                }
                remaining &-= UInt64(n)
                offset &+= n
                return .messageData(UnsafeRawBufferPointer(chunk))
            case .control:
                if remaining > 0 {
                    let available = buffer.count &- offset
                    guard available > 0, let base = buffer.baseAddress else { return .needMore }
                    // remaining <= 125 here (FrameDecoder checked it), so Int() is safe.
                    let n = min(Int(remaining), available)
                    let chunk = UnsafeMutableRawBufferPointer(start: base + offset, count: n)
                    unmask(chunk)
                    if control.isEmpty {
                        control.reserveCapacity(Int(remaining))
                    }
                    control.append(contentsOf: UnsafeRawBufferPointer(chunk))
                    remaining &-= UInt64(n)
                    offset &+= n
                    if remaining > 0 { return .needMore }
                }
                phase = .header
                let payload = control
                control = []
                return finishControl(payload)
            case .failed(let error):
                return .failure(error)
            }
        }
    }

    /// Unmasks a chunk of the current frame and advances the mask phase.
    @inline(__always)
    mutating func unmask(_ chunk: UnsafeMutableRawBufferPointer) {
        guard maskKey != 0 else { return }
        FrameEncoder.applyMask(chunk, key: maskKey, phase: 0)
        let shift = UInt32((chunk.count & 3) &* 8)
        if shift != 0 {
            maskKey = (maskKey &>> shift) | (maskKey &<< (32 &- shift))
        }
    }

    /// Applies the message-level rules to a new frame header. Returns the event to
    /// report now, or nil to keep decoding.
    @usableFromInline
    mutating func begin(_ header: FrameHeader) -> WireEvent? {
        frameFirstByte = header.firstByte
        maskKey = header.maskKey
        remaining = header.payloadLength
        let length = header.payloadLength
        switch header.opcodeBits {
        case Opcode.continuation.rawValue:
            guard inProgress != .none else { return fail(.unexpectedContinuation) }
            // messageBytes <= maxMessageBytes, so the subtraction cannot wrap.
            guard length <= maxMessageBytes &- messageBytes else { return fail(.messageTooBig) }
            messageBytes &+= length
            phase = .data
            return nil
        case Opcode.text.rawValue, Opcode.binary.rawValue:
            guard inProgress == .none else { return fail(.expectedContinuation) }
            // Fail on the header alone: the excess is never read or buffered.
            guard length <= maxMessageBytes else { return fail(.messageTooBig) }
            let kind: MessageKind = header.opcodeBits == Opcode.text.rawValue ? .text : .binary
            inProgress = kind == .text ? .text : .binary
            messageBytes = length
            validator.reset()
            phase = .data
            return .messageStart(kind, compressed: header.rsv1)
        default:
            // FrameDecoder only lets through known opcodes: the rest are control.
            phase = .control
            return nil
        }
    }

    /// The final fragment is complete: check the text ended on a code point.
    @usableFromInline
    mutating func finishMessage() -> WireEvent {
        let wasText = inProgress == .text
        inProgress = .none
        messageBytes = 0
        if wasText && validatesText && !validator.isAtBoundary {
            return fail(.invalidUTF8)
        }
        validator.reset()
        return .messageEnd
    }

    /// Turns a complete control payload into its event (§5.5).
    @usableFromInline
    mutating func finishControl(_ payload: [UInt8]) -> WireEvent {
        switch frameFirstByte & 0x0F {
        case Opcode.ping.rawValue:
            return .ping(payload)
        case Opcode.pong.rawValue:
            return .pong(payload)
        default:
            return closeEvent(payload)
        }
    }

    /// Validates a close payload: empty, or a valid code followed by UTF-8 text.
    @usableFromInline
    mutating func closeEvent(_ payload: [UInt8]) -> WireEvent {
        if payload.isEmpty { return .close(code: nil, reason: "") }
        if payload.count == 1 { return fail(.closePayloadTooShort) }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        guard CloseCode.isValidReceived(code) else { return fail(.invalidCloseCode(code)) }
        let valid = payload.withUnsafeBytes { all in
            UTF8Validator.validate(UnsafeRawBufferPointer(rebasing: all[2...]))
        }
        guard valid else { return fail(.invalidUTF8) }
        return .close(code: code, reason: String(decoding: payload[2...], as: UTF8.self))
    }

    /// Enters the terminal state.
    @usableFromInline
    mutating func fail(_ error: WireError) -> WireEvent {
        phase = .failed(error)
        control = []
        return .failure(error)
    }
}

import VigilBytes

/// Whole WebSocket messages out of a byte stream: a `MessageReader` plus the assembly of
/// messages whose frames or fragments span reads. Both ends use it (vigild's connections and
/// vigil-load's client connections), so the assembly rule is written once.
///
/// Zero copy in the common case: a message that arrives whole in one read is handed out as a
/// pointer into the caller's buffer. Only a message that spans reads is copied, into a spill
/// chunk that exists while that message is being assembled and until the next call after it was
/// handed out; an idle connection keeps no storage here.
///
/// With permessage-deflate agreed (RFC 7692), a message whose first frame has RSV1 set is
/// inflated chunk by chunk as it arrives (`CompressedMessage`), its text validated as it
/// inflates, its inflated size held to the reader's message limit, and handed out whole like
/// any other message; it is valid until the next call. Uncompressed messages, on the same
/// connection or any other, take the zero-copy path above unchanged.
public struct MessageAssembler {
    /// What the stream holds next.
    public enum Event {
        /// Everything given was consumed; call again with more bytes.
        case needMore
        /// A complete data message. Text has been validated as UTF-8. The bytes are valid until
        /// the next call on this assembler (or until the caller's buffer is reused).
        case message(MessageKind, UnsafeRawBufferPointer)
        case ping([UInt8])
        case pong([UInt8])
        /// A valid close frame; `code` is nil when it carried none.
        case close(code: UInt16?, reason: String)
        /// The peer broke the protocol: terminal.
        case failure(WireError)
    }

    /// The frame-level decoder (settable, e.g. to turn text validation off in a load client).
    /// Whether RSV1 is inflated or refused is decided by the reader given to `init`: a reader
    /// swapped in later with other `allowedRSV` is not looked at again.
    public var reader: MessageReader
    // Field order: `single` (17 bytes) and the one-byte fields together, the references after
    // them, so that alignment leaves no padding between them (the assembler is part of every
    // connection's object: 120 bytes in the first order, 104 in this one).
    /// The message's only chunk so far, still in the caller's buffer.
    private var single: UnsafeRawBufferPointer?
    private var kind: MessageKind = .text
    /// Why `next` cannot take the plain path: bits of `Detour`. One byte tested once per call,
    /// where a "spill handed out" flag was tested before compression existed, so a connection
    /// that agreed no compression runs the loop it ran then (callgrind: 758 instructions per
    /// 64-byte message against 757 before; benchmarks/deflate_bench.sh).
    private var detour: UInt8 = 0
    /// A compressed message is being inflated.
    private var inflating = false
    /// The message so far, once it spans reads (or has several chunks).
    private var spill: ByteChunk?
    /// Inflation, when permessage-deflate was agreed.
    private var compressed: CompressedMessage?

    /// An assembler without compression. A message with RSV1 fails with 1002: in the reader
    /// when it was built with the default `allowedRSV`, here when it allows RSV1 (there is
    /// nothing to inflate with).
    public init(reader: MessageReader) {
        self.reader = reader
        // A reader that lets RSV1 through with nothing to inflate: the detour fails such messages.
        if reader.decoder.allowedRSV & 0x40 != 0 { detour = Detour.compression }
    }

    /// An assembler that inflates compressed messages with the agreed `inflation` parameters;
    /// nil means none were agreed. `reader` must allow RSV1 (`allowedRSV: 0x40`) when
    /// `inflation` is given; the inflated size limit is the reader's `maxMessageBytes`. With a
    /// `pool` (the loop's), the inflater's zlib state and output buffer come from it and go
    /// back to it between messages instead of malloc and free.
    public init(reader: MessageReader, inflation: DeflateParameters?, pool: InflaterPool? = nil) {
        self.reader = reader
        if let inflation {
            precondition(reader.decoder.allowedRSV & 0x40 != 0, "a reader that inflates must allow RSV1")
            compressed = CompressedMessage(inflation, maxMessageBytes: Int(clamping: reader.maxMessageBytes), pool: pool)
            detour = Detour.compression
        }
    }

    /// An assembler with its reader: RSV1 allowed exactly when `inflation` is given, so a
    /// compressed frame on a connection that agreed no compression stays a 1002.
    public init(role: Role, maxMessageBytes: Int, inflation: DeflateParameters?, pool: InflaterPool? = nil) {
        let reader = MessageReader(role: role, maxMessageBytes: maxMessageBytes, allowedRSV: inflation == nil ? 0 : 0x40)
        self.init(reader: reader, inflation: inflation, pool: pool)
    }

    /// Whether a data message is part-way assembled (a close now would cut it).
    public var isMidMessage: Bool { single != nil || spill != nil || inflating }

    /// Nothing held and nothing in progress, and no compression agreed: this assembler behaves
    /// exactly as a new one with the same reader settings, so a connection may let it go between
    /// messages and build a new one for its next read (an idle server connection keeps none).
    public var isAtRest: Bool {
        compressed == nil && single == nil && spill == nil && detour == 0 && reader.isAtRest
    }

    /// The connection's inflater, when compression was agreed (for memory accounting).
    public var inflater: Inflater? { compressed?.inflater }

    /// Decodes from `buffer[offset...]` (unmasking in place) and returns the next event; call in
    /// a loop until `.needMore`, `.close` or `.failure`.
    public mutating func next(_ buffer: UnsafeMutableRawBufferPointer, offset: inout Int) -> Event {
        if detour != 0 { return nextByDetour(buffer, &offset) }
        return assemble(buffer, &offset, inflates: false)
    }

    /// Bits of `detour`.
    private enum Detour {
        /// The last `.message` handed out our spill chunk: release it.
        static let spillHandedOut: UInt8 = 1
        /// The last `.message` handed out the inflater's output: release it.
        static let inflatedHandedOut: UInt8 = 2
        /// The reader may report compressed messages: take the inflating loop.
        static let compression: UInt8 = 4
    }

    @inline(never)
    private mutating func nextByDetour(_ buffer: UnsafeMutableRawBufferPointer, _ offset: inout Int) -> Event {
        if detour & Detour.spillHandedOut != 0 { spill = nil }
        if detour & Detour.inflatedHandedOut != 0 { compressed?.inflater.releaseOutput() }
        detour &= Detour.compression
        return detour != 0 ? assemble(buffer, &offset, inflates: true) : assemble(buffer, &offset, inflates: false)
    }

    /// The assembly loop, in two copies: `inflates` is a constant at both call sites, so the
    /// plain copy has none of the compressed path's tests.
    @inline(__always)
    private mutating func assemble(_ buffer: UnsafeMutableRawBufferPointer, _ offset: inout Int, inflates: Bool) -> Event {
        while true {
            switch reader.next(buffer, offset: &offset) {
            case .needMore:
                // The caller's buffer is about to be reused: keep the part we have.
                if let chunk = single {
                    single = nil
                    keep(chunk)
                }
                return .needMore
            case .messageStart(let k, let isCompressed):
                kind = k
                if inflates && isCompressed, let error = startCompressed(k) { return fail(error) }
            case .messageData(let chunk):
                if inflates && inflating {
                    if let error = feedCompressed(chunk) { return fail(error) }
                } else if single == nil && spill == nil {
                    single = chunk
                } else {
                    if let first = single {
                        single = nil
                        keep(first)
                    }
                    keep(chunk)
                }
            case .messageEnd:
                if let chunk = single {
                    single = nil
                    return .message(kind, chunk)
                }
                if inflates && inflating { return finishCompressed() }
                if let whole = spill {
                    detour |= Detour.spillHandedOut
                    return .message(kind, whole.bytes)
                }
                return .message(kind, UnsafeRawBufferPointer(start: nil, count: 0))
            case .ping(let payload):
                return .ping(payload)
            case .pong(let payload):
                return .pong(payload)
            case .close(let code, let reason):
                reset()
                return .close(code: code, reason: reason)
            case .failure(let error):
                reset()
                return .failure(error)
            }
        }
    }

    /// Forgets a part-way message (the connection is closing), and with it any zlib state.
    public mutating func reset() {
        single = nil
        spill = nil
        detour &= Detour.compression
        if let compressed {
            if inflating { reader.validatesText = compressed.readerValidatedText }
            compressed.inflater.discard()
        }
        inflating = false
    }

    /// RSV1 on a message's first frame: inflate it. The reader would validate the compressed
    /// bytes as text, so its validation is off for this message (see `validatesText`).
    /// Out of line, like the rest of the compressed path, to keep `next` as small as it was.
    @inline(never)
    private mutating func startCompressed(_ kind: MessageKind) -> WireError? {
        // A reader allowed RSV1 without an agreement: compressed data cannot be read (§6).
        guard let compressed else { return .reservedBitsSet }
        compressed.start(kind, readerValidates: reader.validatesText)
        reader.validatesText = false
        inflating = true
        return nil
    }

    /// The next compressed chunk of the message.
    @inline(never)
    private func feedCompressed(_ chunk: UnsafeRawBufferPointer) -> WireError? {
        compressed!.feed(chunk)
    }

    /// The compressed message's last frame ended: inflate the tail and hand the message out.
    @inline(never)
    private mutating func finishCompressed() -> Event {
        let compressed = compressed!
        inflating = false
        reader.validatesText = compressed.readerValidatedText
        switch compressed.finish() {
        case .success(let bytes):
            detour |= Detour.inflatedHandedOut
            return .message(kind, bytes)
        case .failure(let error):
            return fail(error)
        }
    }

    /// A failure found here, not by the reader: terminal, like the reader's own.
    @inline(never)
    private mutating func fail(_ error: WireError) -> Event {
        reset()
        _ = reader.fail(error)
        return .failure(error)
    }

    /// Appends to the spill chunk, doubling it when full (the reader bounds the message size).
    private mutating func keep(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let have = spill?.count ?? 0
        if let chunk = spill, chunk.capacity - chunk.count >= bytes.count {
            chunk.append(bytes)
            return
        }
        let grown = ByteChunk(capacity: max(have + bytes.count, have * 2, 256))
        if let old = spill { grown.append(old.bytes) }
        grown.append(bytes)
        spill = grown
    }
}

import VigilBytes

/// Whole WebSocket messages out of a byte stream: a `MessageReader` plus the assembly of
/// messages whose frames or fragments span reads. Both ends use it (vigild's connections and
/// vigil-load's client connections), so the assembly rule is written once.
///
/// Zero copy in the common case: a message that arrives whole in one read is handed out as a
/// pointer into the caller's buffer. Only a message that spans reads is copied, into a spill
/// chunk that exists while that message is being assembled and until the next call after it was
/// handed out; an idle connection keeps no storage here.
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
    public var reader: MessageReader
    private var kind: MessageKind = .text
    /// The message's only chunk so far, still in the caller's buffer.
    private var single: UnsafeRawBufferPointer?
    /// The message so far, once it spans reads (or has several chunks).
    private var spill: ByteChunk?
    /// The spill chunk was handed out in the last `.message`: release it on the next call.
    private var spillHandedOut = false

    public init(reader: MessageReader) {
        self.reader = reader
    }

    /// Whether a data message is part-way assembled (a close now would cut it).
    public var isMidMessage: Bool { single != nil || spill != nil }

    /// Decodes from `buffer[offset...]` (unmasking in place) and returns the next event; call in
    /// a loop until `.needMore`, `.close` or `.failure`.
    public mutating func next(_ buffer: UnsafeMutableRawBufferPointer, offset: inout Int) -> Event {
        if spillHandedOut {
            spill = nil
            spillHandedOut = false
        }
        while true {
            switch reader.next(buffer, offset: &offset) {
            case .needMore:
                // The caller's buffer is about to be reused: keep the part we have.
                if let chunk = single {
                    single = nil
                    keep(chunk)
                }
                return .needMore
            case .messageStart(let k, _):
                kind = k
            case .messageData(let chunk):
                if single == nil && spill == nil {
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
                if let whole = spill {
                    spillHandedOut = true
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

    /// Forgets a part-way message (the connection is closing).
    public mutating func reset() {
        single = nil
        spill = nil
        spillHandedOut = false
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

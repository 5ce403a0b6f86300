/// One thing `MessageReader.next` found in the byte stream.
///
/// Data messages arrive as `messageStart`, zero or more `messageData` chunks and
/// `messageEnd`; control frames (`ping`, `pong`, `close`) arrive whole and may sit
/// between the chunks of a fragmented data message.
public enum WireEvent {
    /// Everything given was consumed; call again with more bytes.
    case needMore
    /// The first frame of a data message. `compressed` is RSV1 of that frame, only
    /// possible when the reader was built with RSV1 in `allowedRSV`.
    case messageStart(MessageKind, compressed: Bool)
    /// The next chunk of the current data message: never empty, unmasked in place
    /// inside the caller's buffer (no copy). For text with validation on, the bytes
    /// up to and including this chunk are valid UTF-8 so far. Valid until the caller
    /// reuses its buffer.
    case messageData(UnsafeRawBufferPointer)
    /// The final fragment of the current data message is complete.
    case messageEnd
    /// A complete ping; its payload (at most 125 bytes) is to be echoed in a pong.
    case ping([UInt8])
    /// A complete pong.
    case pong([UInt8])
    /// A valid close frame: `code` is nil when the payload was empty; `reason` is valid UTF-8.
    case close(code: UInt16?, reason: String)
    /// The peer broke the protocol. Terminal: every later call returns the same failure.
    case failure(WireError)
}

import VigilBytes

/// A complete server text frame in one immutable chunk, queued by reference on many
/// connections: one event to 10,000 subscribers is one encode, one header and one buffer.
public enum SharedFrame {
    /// Room a writer keeps in front of a payload for the largest unmasked header (2 + 8 bytes).
    public static let headroom = 10

    /// Writes the frame header into the headroom in front of the chunk's payload and moves the
    /// chunk's `start` to it, so the chunk's content becomes the whole frame. `compressed` sets
    /// RSV1: the payload is a permessage-deflate message (`Deflater`, RFC 7692 §6), which only
    /// connections that agreed the deflater's configuration may be sent.
    public static func text(_ chunk: ByteChunk, compressed: Bool = false) -> ByteChunk {
        let payload = chunk.count - chunk.start
        let header = FrameEncoder.headerSize(payloadCount: payload, masked: false)
        precondition(chunk.start >= header, "the writer kept no headroom for the frame header")
        chunk.start -= header
        _ = FrameEncoder.writeHeader(into: chunk.base + chunk.start, opcode: .text, fin: true, rsv1: compressed,
                                     payloadCount: payload, maskKey: nil)
        return chunk
    }
}

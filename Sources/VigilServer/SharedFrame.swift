import VigilLoop
import VigilWire

/// A complete server frame in one immutable chunk, queued by reference on many connections:
/// one event to 10,000 subscribers is one encode, one header and one buffer.
enum SharedFrame {
    static func text(_ payload: UnsafeRawBufferPointer) -> ByteChunk {
        let header = FrameEncoder.headerSize(payloadCount: payload.count, masked: false)
        let chunk = ByteChunk(capacity: header + payload.count)
        let written = FrameEncoder.writeHeader(into: chunk.base, opcode: .text, fin: true, rsv1: false, payloadCount: payload.count, maskKey: nil)
        chunk.commit(written)
        chunk.append(payload)
        return chunk
    }
}

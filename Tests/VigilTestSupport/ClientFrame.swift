import VigilWire

/// A client's (masked, RFC 6455 §5.3) frame built with the project's encoder: what a server-side
/// reader must accept. The fixed default key keeps expected bytes stable; pass another to vary it.
public func masked(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false, key: UInt32 = 0x3D21_FA37) -> [UInt8] {
    FrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv1: rsv1, maskKey: key)
}

/// `bytes` cut at the given offsets (any order; out-of-range offsets are ignored), as a socket
/// might deliver them: parsers must give the same result for every split.
public func split(_ bytes: [UInt8], at points: [Int]) -> [[UInt8]] {
    var chunks: [[UInt8]] = []
    var start = 0
    for p in points.sorted() where p >= start && p <= bytes.count {
        chunks.append(Array(bytes[start..<p]))
        start = p
    }
    chunks.append(Array(bytes[start...]))
    return chunks
}

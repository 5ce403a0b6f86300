// The chunking the wire and deflate fuzz targets share; compiled into both (see Tests/fuzz/run).

/// The chunks of `input`: a size byte, then that many bytes (0: the rest), again and again.
func fuzzChunks(_ input: UnsafeBufferPointer<UInt8>) -> [[UInt8]] {
    var chunks: [[UInt8]] = []
    var at = 0
    while at < input.count {
        let lead = Int(input[at])
        at += 1
        let count = lead == 0 ? input.count - at : min(lead, input.count - at)
        chunks.append(Array(input[at..<(at + count)]))
        at += count
    }
    return chunks
}

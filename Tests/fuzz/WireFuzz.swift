// libFuzzer entry point for MessageReader and HTTPRequestParser; built and run by Tests/fuzz/run.
// Compiled together with the VigilWire sources and FuzzChunks.swift (see Tests/fuzz/run), so no import.
//
// The first input byte picks the target (and the reader's role). The rest is a sequence of
// chunks, each led by a byte that chooses its size, as uWebSockets' fuzzing/helpers.h does: 1-255
// is that many bytes (fewer at the end), 0 is everything that is left. So one input splits its
// stream at many different points, and libFuzzer explores split points by mutating those bytes.
// Each chunk is fed in its own buffer, as a connection hands over each read.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let chunks = fuzzChunks(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if selector & 0x80 == 0 {
        fuzzMessageReader(chunks, role: selector & 0x40 == 0 ? .server : .client)
    } else {
        fuzzRequestParser(chunks)
    }
    return 0
}

/// Feeds every chunk to one reader until it fails; every event must leave the offset in the
/// chunk, `needMore` only once the chunk is used up, and data events are never empty.
func fuzzMessageReader(_ chunks: [[UInt8]], role: Role) {
    var reader = MessageReader(role: role, maxMessageBytes: 4096, allowedRSV: 0x40)
    for var chunk in chunks {
        let failed: Bool = chunk.withUnsafeMutableBytes { buffer in
            var offset = 0
            while true {
                let event = reader.next(buffer, offset: &offset)
                precondition(offset >= 0 && offset <= buffer.count)
                switch event {
                case .needMore:
                    precondition(offset == buffer.count)
                    return false
                case .failure:
                    return true
                case .messageData(let d):
                    precondition(!d.isEmpty)
                default:
                    continue
                }
            }
        }
        if failed { return }
    }
}

/// Feeds chunks to one request parser until it completes or fails; a complete head leaves a
/// leftover inside the last chunk and goes through handshake validation.
func fuzzRequestParser(_ chunks: [[UInt8]]) {
    var parser = HTTPRequestParser(maxHeadBytes: 512, maxHeaderCount: 8)
    for chunk in chunks {
        let result = chunk.withUnsafeBytes { parser.feed($0) }
        switch result {
        case .needMore:
            continue
        case .complete(let head, let leftover):
            precondition(leftover >= 0 && leftover <= chunk.count)
            _ = Handshake.validate(head, supportedSubprotocols: ["v1"])
            return
        default:
            return
        }
    }
}

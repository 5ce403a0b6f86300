// libFuzzer entry point for MessageReader and HTTPRequestParser ; built and run by Tests/fuzz/run.
// The first input byte picks the target and the chunk size, so libFuzzer also
// explores split points.
// Compiled together with the VigilWire sources (see Tests/fuzz/run), so no import.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let chunk = Int(selector & 0x3F) + 1
    if selector & 0x80 == 0 {
        var reader = MessageReader(role: selector & 0x40 == 0 ? .server : .client, maxMessageBytes: 4096, allowedRSV: 0x40)
        bytes.withUnsafeMutableBytes { all in
            var base = 0
            while base < all.count {
                let end = min(base + chunk, all.count)
                let slice = UnsafeMutableRawBufferPointer(rebasing: all[..<end])
                var offset = base
                while true {
                    let event = reader.next(slice, offset: &offset)
                    if case .needMore = event { precondition(offset == end); break }
                    if case .failure = event { return }
                    if case .messageData(let d) = event { precondition(!d.isEmpty) }
                }
                base = end
            }
        }
    } else {
        var parser = HTTPRequestParser(maxHeadBytes: 512, maxHeaderCount: 8)
        var base = 0
        while base < bytes.count {
            let end = min(base + chunk, bytes.count)
            let result = bytes[base..<end].withUnsafeBytes { parser.feed($0) }
            if case .needMore = result { base = end; continue }
            if case .complete(let head, let leftover) = result {
                precondition(leftover >= 0 && leftover <= end - base)
                _ = Handshake.validate(head, supportedSubprotocols: ["v1"])
            }
            break
        }
    }
    return 0
}

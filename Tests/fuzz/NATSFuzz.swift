// libFuzzer entry point for the NATS codec (VigilNATS); built and run by Tests/fuzz/run.
//
// The input after its first byte is cut into chunks whose sizes it chooses (FuzzChunks.swift) and
// fed to one NATSParser as a server's bytes would arrive. Beyond "no crash":
// - the operations are the same as when the whole input is fed at once (split invariance);
// - the parser's buffer stays within one chunk plus one bounded operation;
// - once failed, it stays failed;
// - every HMSG's header block re-encodes and decodes to the same headers;
// - every payload also goes through the JetStream reply decoders (publish ack, stream info,
//   consumer name, delivery info from the reply subject), which must answer without trapping;
// - and through the object store's readers (`objectStore` below): base64 decodes only its one
//   canonical form, a meta that reads re-encodes to the same meta, a stored message, a direct get
//   and a purge reply answer, and an assembly fed the payload's pieces never keeps more than its meta allows;
// - the whole input also goes to the credential readers (a `.creds` file, an nkey seed's text,
//   base32): whatever decodes re-encodes to the same text, nothing traps.
// The first byte's low bit picks a small or the default max_payload cap.
import VigilNATS

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let cap = data[0] & 1 == 0 ? 512 : 8 * 1_048_576
    let body = UnsafeBufferPointer(start: data + 1, count: size - 1)
    let chunks = fuzzChunks(body)
    let chunked = run(chunks, cap: cap)
    let whole = run([chunks.flatMap { $0 }], cap: cap)
    precondition(chunked.ops == whole.ops && chunked.error == whole.error, "split changed the result")
    for op in chunked.ops {
        guard case .message(let message) = op else { continue }
        if let headers = message.headers {
            var block: [UInt8] = []
            do {
                try headers.encode(into: &block)
                let again = try NATSHeaders.decode(block[...])
                precondition(again == headers, "headers round trip")
            } catch {
                preconditionFailure("decoded headers do not re-encode: \(error)")
            }
        }
        _ = JSPubAck.decode(message.payload)
        _ = JSStreamInfo.decode(message.payload)
        _ = JSOrderedConsumerConfig.decodeName(message.payload)
        if let reply = message.replyTo { _ = JSDeliveryInfo(replySubject: reply) }
        objectStore(message.payload)
        _ = JSDirectGet.decode(message)
        var consumption = JSOrderedConsumption(startAfter: 0)
        _ = consumption.received(message)
    }
    credentials(UnsafeBufferPointer(start: data, count: size))
    return 0
}

/// The credential readers on hostile bytes: what decodes must re-encode to the same text.
private func credentials(_ bytes: UnsafeBufferPointer<UInt8>) {
    if let creds = try? NATSCredentials.parse(bytes) {
        precondition(creds.seed.role == .user && creds.seed.raw.count == 32, "a creds seed is a user's 32 bytes")
        precondition(NATSCredentials.isJWT(Array(creds.jwt.utf8)[...]), "a parsed JWT is well formed")
    }
    let text = String(decoding: bytes.prefix(128), as: UTF8.self)
    if let seed = try? NKey.decodeSeed(text) {
        let encoded = NKey.encodeSeed(seed)
        precondition(try! NKey.decodeSeed(encoded) == seed, "seed round trip")
        let trimmed = text.trimmingSpaces
        precondition(encoded == trimmed, "one text per seed")
    }
    let letters = Array(bytes.prefix(128))
    if let decoded = Base32.decode(letters) {
        precondition(Base32.encode(decoded) == String(decoding: letters, as: UTF8.self), "base32 round trip")
    }
}

private extension String {
    var trimmingSpaces: String {
        let space: (UInt8) -> Bool = { $0 == 32 || $0 == 9 || $0 == 10 || $0 == 13 }
        let bytes = Array(utf8)
        let start = bytes.firstIndex { !space($0) } ?? bytes.count
        let end = (bytes.lastIndex { !space($0) } ?? -1) + 1
        return start < end ? String(decoding: bytes[start..<end], as: UTF8.self) : ""
    }
}

private func run(_ chunks: [[UInt8]], cap: Int) -> (ops: [NATSServerOp], error: NATSProtocolError?) {
    var parser = NATSParser(maxControlLine: 256, maxInfoLine: 1024, maxPayload: cap, payloadCap: cap)
    var ops: [NATSServerOp] = []
    for chunk in chunks {
        parser.append(chunk)
        precondition(parser.bufferedBytes <= chunk.count + 1024 + cap + 1300, "buffer over its bound")
        while true {
            do {
                guard let op = try parser.next() else { break }
                ops.append(op)
            } catch {
                do {
                    _ = try parser.next()
                    preconditionFailure("a failed parser recovered")
                } catch let again {
                    precondition(again == error, "a failed parser changed its error")
                }
                return (ops, error)
            }
        }
    }
    return (ops, nil)
}

private func objectStore(_ payload: [UInt8]) {
    for alphabet in [NATSBase64.Alphabet.standard, .url] {
        if let bytes = NATSBase64.decode(payload, alphabet: alphabet) {
            let again = NATSBase64.encode(bytes, alphabet: alphabet, padded: payload.contains(UInt8(ascii: "=")))
            precondition(Array(again.utf8) == payload, "base64 decoded a non-canonical form")
        }
    }
    _ = JSObjectDigest.parse(String(decoding: payload, as: UTF8.self))
    _ = JSStoredMessage.decode(payload)
    _ = JSPurge.decodePurged(payload)
    _ = JSObjectStoreConfig(bucket: "B").problem(existing: payload)
    if case .success(let info) = JSObjectInfo.decode(payload) {
        precondition((try? JSObjectInfo.decode(info.encode()).get()) == info, "object meta round trip")
        _ = SnapshotMetadata(entries: info.metadata)
    }
    // The payload as the chunks of a small object: its first byte the chunk count, the rest split
    // by the following bytes' values.
    guard let first = payload.first else { return }
    var info = JSObjectInfo(name: "n", bucket: "B", nuid: "N", size: UInt64(payload.count / 2), chunks: Int(first % 8), digest: "")
    if info.chunks == 0 { info.size = 0 }
    var assembly = JSObjectAssembly(info: info, maxChunkBytes: 64)
    var at = 1
    while at < payload.count {
        let count = min(Int(payload[at] % 80), payload.count - at - 1)
        let verdict = assembly.add(Array(payload[(at + 1)..<(at + 1 + count)]))
        precondition(UInt64(assembly.bytes.count) <= info.size && assembly.chunksReceived <= info.chunks, "assembly past its meta")
        if verdict != .more { break }
        at += 1 + count
    }
    let end = assembly.finish()
    precondition(end == .complete ? assembly.isComplete : !assembly.isComplete, "finish disagrees with isComplete")
}

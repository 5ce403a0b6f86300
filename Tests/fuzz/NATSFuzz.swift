// libFuzzer entry point for the NATS codec (VigilNATS); built and run by Tests/fuzz/run.
//
// The input after its first byte is cut into chunks whose sizes it chooses (FuzzChunks.swift) and
// fed to one NATSParser as a server's bytes would arrive. Beyond "no crash":
// - the operations are the same as when the whole input is fed at once (split invariance);
// - the parser's buffer stays within one chunk plus one bounded operation;
// - once failed, it stays failed;
// - every HMSG's header block re-encodes and decodes to the same headers;
// - every payload also goes through the JetStream reply decoders (publish ack, stream info,
//   consumer name, delivery info from the reply subject), which must answer without trapping.
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
        var consumption = JSOrderedConsumption(startAfter: 0)
        _ = consumption.received(message)
    }
    return 0
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

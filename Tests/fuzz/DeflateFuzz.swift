// libFuzzer entry point for permessage-deflate (RFC 7692); built and run by Tests/fuzz/run.
// Compiled together with the VigilWire sources and FuzzChunks.swift, so no import.
//
// The first input byte picks the target in its top two bits and settings in the others:
//   00  negotiation: the rest, cut at newlines, is the Sec-WebSocket-Extensions header lines
//   01  an inflating MessageAssembler fed raw (unmasked, client-role) frames in chunks
//   10  the same assembler fed one message whose compressed payload is the rest, in fragments
//   11  round trip: the rest deflated, framed, fed in chunks; the same bytes must come out
// Every path checks invariants with preconditions, so a wrong answer is a crash, not a pass.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let rest = UnsafeBufferPointer(start: data + 1, count: size - 1)
    switch selector >> 6 {
    case 0: fuzzNegotiation(rest, selector)
    case 1: fuzzFrames(fuzzChunks(rest), selector)
    case 2: fuzzCompressedPayload(fuzzChunks(rest), selector)
    default: fuzzRoundTrip(Array(rest), selector)
    }
    return 0
}

let fuzzMaxMessage = 4096

/// Agreed parameters chosen by the selector's low bits.
func fuzzParameters(_ selector: UInt8) -> DeflateParameters {
    DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: selector & 1 != 0,
                      serverMaxWindowBits: 15, clientMaxWindowBits: 8 + Int((selector >> 1) & 7))
}

/// Any header lines: a malformed header throws, a declined one gives nil, and an accepted one's
/// response, offered back, must be accepted with the very same parameters (it is a valid offer
/// whose values are already within the settings).
func fuzzNegotiation(_ rest: UnsafeBufferPointer<UInt8>, _ selector: UInt8) {
    let lines = rest.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    let settings = DeflateSettings(serverMaxWindowBits: 9 + Int(selector & 7), clientMaxWindowBits: 9 + Int((selector >> 3) & 7),
                                   serverNoContextTakeover: selector & 0x08 != 0, clientNoContextTakeover: selector & 0x10 != 0)
    guard let agreement = try? PerMessageDeflate.negotiate(lines, settings: settings) else { return }
    let p = agreement.parameters
    precondition((9...settings.serverMaxWindowBits).contains(p.serverMaxWindowBits))
    precondition((8...15).contains(p.clientMaxWindowBits))
    precondition(!settings.serverNoContextTakeover || p.serverNoContextTakeover)
    precondition(!settings.clientNoContextTakeover || p.clientNoContextTakeover)
    let offers = try? ExtensionHeaderParser.parse([agreement.responseHeader])
    precondition(offers?.count == 1 && offers?[0].name == PerMessageDeflate.name)
    let again = try? PerMessageDeflate.negotiate([agreement.responseHeader], settings: settings)
    precondition(again?.parameters == p && again?.responseHeader == agreement.responseHeader)
}

/// What an assembler made of a stream: each message as its kind's byte then its bytes, and a
/// failure as 0xEE then its close code, so two runs compare with ==.
typealias FuzzOutcome = [[UInt8]]

/// Feeds chunks to an inflating assembler, checking every event; returns what came out.
func fuzzAssemble(_ assembler: inout MessageAssembler, _ chunks: [[UInt8]]) -> FuzzOutcome {
    var outcome: FuzzOutcome = []
    for var chunk in chunks {
        let failed: Bool = chunk.withUnsafeMutableBytes { buffer in
            var offset = 0
            while true {
                let event = assembler.next(buffer, offset: &offset)
                precondition(offset >= 0 && offset <= buffer.count)
                switch event {
                case .needMore:
                    precondition(offset == buffer.count)
                    return false
                case .message(let kind, let bytes):
                    precondition(bytes.count <= fuzzMaxMessage)
                    precondition(kind == .binary || UTF8Validator.validate(bytes))
                    outcome.append([kind == .text ? 1 : 2] + Array(bytes))
                case .failure(let error):
                    let code = error.closeCode.rawValue
                    outcome.append([0xEE, UInt8(code >> 8), UInt8(code & 0xFF)])
                    return true
                case .close:
                    return true
                case .ping, .pong:
                    continue
                }
            }
        }
        // Whatever the input, the inflater holds at most a message and zlib's state.
        precondition((assembler.inflater?.heapBytes ?? 0) <= fuzzMaxMessage + 48 * 1024)
        if failed { break }
    }
    return outcome
}

/// The stream read three times: with a pool (which the run fills, failures included), without
/// one, and with the now used pool. Parked streams are reset, so all three must agree.
func fuzzPooled(_ chunks: [[UInt8]], _ selector: UInt8) {
    let pool = InflaterPool(maxStreams: 2, maxBuffers: 2, maxBufferBytes: 2048)
    var outcomes: [FuzzOutcome] = []
    for usePool in [true, false, true] {
        var assembler = MessageAssembler(role: .client, maxMessageBytes: fuzzMaxMessage, inflation: fuzzParameters(selector),
                                         pool: usePool ? pool : nil)
        outcomes.append(fuzzAssemble(&assembler, chunks))
    }
    precondition(outcomes[0] == outcomes[1] && outcomes[1] == outcomes[2], "a pooled stream changed the outcome")
    precondition(pool.heapBytes <= 2 * (8 * 1024 + (1 << 15)) + 2 * 2048)
}

func fuzzFrames(_ chunks: [[UInt8]], _ selector: UInt8) {
    fuzzPooled(chunks, selector)
}

/// An unmasked server-to-client frame.
func fuzzFrame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool, rsv1: Bool) -> [UInt8] {
    FrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv1: rsv1, maskKey: nil)
}

/// The chunks as the fragments of one compressed message, one frame per read.
func fuzzCompressedPayload(_ chunks: [[UInt8]], _ selector: UInt8) {
    let opcode: Opcode = selector & 0x20 != 0 ? .text : .binary
    let pieces = chunks.isEmpty ? [[]] : chunks
    let frames = pieces.enumerated().map { i, piece in
        fuzzFrame(i == 0 ? opcode : .continuation, piece, fin: i == pieces.count - 1, rsv1: i == 0)
    }
    fuzzPooled(frames, selector)
}

/// The message deflated twice in a row (the second time over the first one's window when
/// context takeover is on), framed in up to three fragments, read back in chunks.
func fuzzRoundTrip(_ message: [UInt8], _ selector: UInt8) {
    var parameters = fuzzParameters(selector)
    parameters.clientMaxWindowBits = max(9, parameters.clientMaxWindowBits)
    let configuration = Deflater.Configuration(windowBits: parameters.clientMaxWindowBits, memoryLevel: 1 + Int(selector & 7),
                                               compressionLevel: 1 + Int((selector >> 3) & 7),
                                               noContextTakeover: parameters.clientNoContextTakeover)
    guard let deflater = Deflater(configuration) else { return }
    let kind: MessageKind = message.withUnsafeBytes { UTF8Validator.validate($0) } ? .text : .binary
    var stream: [UInt8] = []
    for _ in 0..<2 {
        var out = [UInt8](repeating: 0, count: deflater.maxCompressedCount(message.count))
        let n = message.withUnsafeBytes { m in out.withUnsafeMutableBytes { deflater.compress(m, into: $0) } }
        precondition(n != nil, "the bound did not suffice")
        let payload = Array(out[..<n!])
        let cut1 = message.isEmpty ? 0 : Int(message[0]) % (payload.count + 1)
        let cut2 = message.count < 2 ? payload.count : max(cut1, Int(message[1]) % (payload.count + 1))
        let pieces = [Array(payload[..<cut1]), Array(payload[cut1..<cut2]), Array(payload[cut2...])]
        for (i, piece) in pieces.enumerated() {
            stream += fuzzFrame(i == 0 ? (kind == .text ? .text : .binary) : .continuation, piece, fin: i == 2, rsv1: i == 0)
        }
    }
    let step = 1 + Int(selector & 0x1F) * 7
    let chunks = stride(from: 0, to: stream.count, by: step).map { Array(stream[$0..<min($0 + step, stream.count)]) }
    var assembler = MessageAssembler(role: .client, maxMessageBytes: fuzzMaxMessage, inflation: parameters)
    let outcome = fuzzAssemble(&assembler, chunks)
    if message.count <= fuzzMaxMessage {
        let expected = [kind == .text ? 1 : 2] + message
        precondition(outcome == [expected, expected], "round trip differs")
    } else {
        precondition(outcome == [[0xEE, 0x03, 0xF1]], "an oversized message passed") // 1009
    }
}

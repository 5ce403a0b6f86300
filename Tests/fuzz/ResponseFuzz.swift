// libFuzzer entry point for the HTTP client's pure code in VigilWire; built and run by Tests/fuzz/run.
// Compiled together with the VigilWire sources and FuzzChunks.swift (see lib.sh), so no import.
//
// The first input byte picks the target and its options; the rest is its input:
// - 0-127: HTTPResponseReader (with HTTPChunkedDecoder and HTTPBodyFraming behind it), the rest cut
//   into chunks whose sizes it chooses (FuzzChunks.swift). Beyond "no crash": the outcome (message,
//   failure, or still waiting) and the bytes left after the response are the same as when the whole
//   input is fed at once; a failure is final; the kept body stays within its bound and the counted
//   one within the body's. Bit 0 says the request was HEAD, bit 1 that the server then closes.
// - 128-191: OutgoingURL. A URL it accepts has a port, an origin-form target, http only on loopback,
//   and is accepted again, the same, when written back from its parts; the encoder's request for it
//   reads back through HTTPRequestParser with the same target and Host.
// - 192-255: Retry-After and HTTP-date: no trap; a delay is never negative nor past its cap.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let rest = UnsafeBufferPointer(start: data + 1, count: size - 1)
    switch selector {
    case 0..<128: fuzzResponseReader(fuzzChunks(rest), head: selector & 1 != 0, close: selector & 2 != 0)
    case 128..<192: fuzzURL(String(decoding: rest, as: UTF8.self))
    default: fuzzRetryAfter(String(decoding: rest, as: UTF8.self))
    }
    return 0
}

/// Small bounds, so that inputs of a few hundred bytes reach every limit.
let fuzzLimits = HTTPResponseReader.Limits(maxHeadBytes: 256, maxHeaderCount: 8, maxKeptBodyBytes: 16, maxBodyBytes: 200,
                                           maxTrailerBytes: 64)

/// What one reading of a response came to, comparable across splits.
struct ReadOutcome: Equatable {
    var status: Int?
    var body: [UInt8] = []
    var discarded = 0
    var trailers: [String] = []
    var keepAlive = false
    var failure: HTTPResponseError?
    /// Input bytes after the response (or not looked at, after a failure: 0).
    var after = 0
}

func readResponse(_ chunks: [[UInt8]], head: Bool, close: Bool) -> ReadOutcome {
    var reader = HTTPResponseReader(limits: fuzzLimits, requestWasHead: head)
    var outcome = ReadOutcome()
    var failed: HTTPResponseError?
    for (i, chunk) in chunks.enumerated() {
        let result = chunk.withUnsafeBytes { reader.feed($0) }
        switch result {
        case .needMore:
            continue
        case .complete(let message, let leftover):
            precondition(leftover >= 0 && leftover <= chunk.count)
            record(message, into: &outcome)
            outcome.after = leftover + chunks[(i + 1)...].reduce(0) { $0 + $1.count }
            return outcome
        case .failure(let error):
            failed = error
        }
        break
    }
    if let failed {
        // Final: more bytes or the end of input repeat it.
        guard case .failure(let again) = [UInt8(0)].withUnsafeBytes({ reader.feed($0) }), again == failed,
              case .failure(let atEnd) = reader.endOfInput(), atEnd == failed else { preconditionFailure("a failure did not stay") }
        outcome.failure = failed
        return outcome
    }
    guard close else { return outcome }
    switch reader.endOfInput() {
    case .complete(let message, let leftover):
        precondition(leftover == 0)
        record(message, into: &outcome)
    case .failure(let error):
        outcome.failure = error
    case .needMore:
        preconditionFailure("the end of input left the reader waiting")
    }
    return outcome
}

func record(_ message: HTTPResponseMessage, into outcome: inout ReadOutcome) {
    precondition((200...599).contains(message.statusCode) || message.statusCode < 100 || message.statusCode > 599, "a 1xx is interim")
    precondition(message.body.count <= fuzzLimits.maxKeptBodyBytes, "kept body over its bound")
    precondition(message.discardedBodyBytes >= 0 && message.body.count + message.discardedBodyBytes <= fuzzLimits.maxBodyBytes)
    precondition(message.discardedBodyBytes == 0 || message.body.count == fuzzLimits.maxKeptBodyBytes, "dropped before the kept bytes were full")
    outcome.status = message.statusCode
    outcome.body = message.body
    outcome.discarded = message.discardedBodyBytes
    outcome.trailers = message.trailers.map { "\($0.name): \($0.value)" }
    outcome.keepAlive = message.keepAlive
}

func fuzzResponseReader(_ chunks: [[UInt8]], head: Bool, close: Bool) {
    let chunked = readResponse(chunks, head: head, close: close)
    let whole = readResponse([chunks.flatMap { $0 }], head: head, close: close)
    precondition(chunked == whole, "the split changed the outcome: \(chunked) against \(whole)")
}

func fuzzURL(_ text: String) {
    guard let url = try? OutgoingURL(parsing: text) else { return }
    let origin = url.origin
    precondition(origin.port != 0 && !origin.host.isEmpty && url.target.hasPrefix("/"))
    precondition(origin.scheme == .https || origin.isLoopback, "plain http off loopback")
    guard let again = try? OutgoingURL(parsing: origin.description + url.target) else { preconditionFailure("written back, refused") }
    precondition(again == url, "written back, read differently")
    var bytes: [UInt8] = []
    do {
        try HTTPRequestEncoder.encode(OutgoingRequest(target: url.target), authority: origin.authority, into: &bytes)
    } catch {
        preconditionFailure("an accepted URL's request was refused: \(error)")
    }
    var parser = HTTPRequestParser()
    guard case .complete(let request, 0) = bytes.withUnsafeBytes({ parser.feed($0) }) else { preconditionFailure("request unread") }
    precondition(request.target == url.target && request.value("host") == origin.authority)
}

func fuzzRetryAfter(_ text: String) {
    for now: Int64 in [0, 1_700_000_000, 4_102_444_800] {
        if let delay = RetryAfter.delaySeconds(text, nowUnixSeconds: now) {
            precondition(delay >= 0 && delay <= RetryAfter.maxSeconds)
        }
        _ = HTTPDate.parse(text, nowUnixSeconds: now)
    }
}

/// Reads one whole HTTP/1.1 response (RFC 9112 §4, §6, §7) from bytes as they arrive: the head
/// through `HTTPResponseParser`, interim 1xx responses skipped, then the body as
/// `HTTPBodyFraming` says (a length, the chunked coding with trailers, until the server closes,
/// or none), and `keepAlive` decided.
///
/// Pure and resumable: `feed` takes every chunk read from the socket (split anywhere), keeps
/// only a partial line and the kept body, and returns `needMore`, `complete` (with the bytes of
/// the last chunk that follow the response: a client that sends one request at a time has none
/// coming, so any are the server's error) or a failure, which is final; `endOfInput` tells it
/// the server closed. Bounds, all enforced as bytes arrive: the head (size, field count), the
/// body (`maxBodyBytes` in all, a larger `Content-Length` failing at once), the trailers; only
/// the body's first `maxKeptBodyBytes` are stored.
public struct HTTPResponseReader {
    /// The reader's bounds.
    public struct Limits: Equatable, Sendable {
        public var maxHeadBytes: Int
        public var maxHeaderCount: Int
        /// Body bytes kept in the message; the rest is counted and dropped.
        public var maxKeptBodyBytes: Int
        /// Body bytes read at all: past it the response fails as too large.
        public var maxBodyBytes: Int
        public var maxTrailerBytes: Int

        public init(maxHeadBytes: Int = 16_384, maxHeaderCount: Int = 100, maxKeptBodyBytes: Int = 4096,
                    maxBodyBytes: Int = 1_048_576, maxTrailerBytes: Int = 4096) {
            self.maxHeadBytes = maxHeadBytes
            self.maxHeaderCount = maxHeaderCount
            self.maxKeptBodyBytes = maxKeptBodyBytes
            self.maxBodyBytes = maxBodyBytes
            self.maxTrailerBytes = maxTrailerBytes
        }
    }

    /// Interim responses (100 Continue, 103 Early Hints) skipped before a final one, at most.
    static let maxInterimResponses = 8

    private enum Phase {
        case head
        case body(HTTPResponseHead, HTTPBodyFraming)
        case done(HTTPResponseMessage)
        case failed(HTTPResponseError)
    }

    public let limits: Limits
    private let requestWasHead: Bool
    private var phase = Phase.head
    private var headParser: HTTPResponseParser
    private var interim = 0
    private var chunked: HTTPChunkedDecoder
    /// Body bytes still to come for a `length` framing.
    private var remaining = 0
    private var bodyRead = 0
    private var body: [UInt8] = []
    /// Whether any byte of the response arrived (a server that closes an idle keep-alive
    /// connection as the request goes out sends none).
    public private(set) var started = false

    public init(limits: Limits = Limits(), requestWasHead: Bool = false) {
        self.limits = limits
        self.requestWasHead = requestWasHead
        headParser = HTTPResponseParser(maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount)
        chunked = HTTPChunkedDecoder(maxTrailerBytes: limits.maxTrailerBytes)
    }

    /// What the server sent next; see the type's notes.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> HTTPResponseReadResult {
        if !bytes.isEmpty { started = true }
        var index = 0
        while true {
            switch phase {
            case .failed(let error):
                return .failure(error)
            case .done(let message):
                return .complete(message, leftover: bytes.count - index)
            case .head:
                switch headParser.feed(UnsafeRawBufferPointer(rebasing: bytes[index...])) {
                case .needMore:
                    return .needMore
                case .failure(let why):
                    return fail(headParser.exceededLimit ? .tooLarge(why) : .malformed(why))
                case .complete(let head, let leftover):
                    index = bytes.count - leftover
                    if let failure = headComplete(head) { return failure }
                }
            case .body(let head, let framing):
                if let result = readBody(bytes, index: &index, head, framing) { return result }
            }
        }
    }

    /// The server closed its side: a body read until close is complete; anything else unfinished
    /// ended early.
    public mutating func endOfInput() -> HTTPResponseReadResult {
        switch phase {
        case .failed(let error):
            return .failure(error)
        case .done(let message):
            return .complete(message, leftover: 0)
        case .body(let head, .untilClose):
            finish(head, keepAlive: false)
            return endOfInput()
        case .head, .body:
            return fail(.closedEarly)
        }
    }

    /// Decides what follows a head: another head after an interim response, or the body.
    private mutating func headComplete(_ head: HTTPResponseHead) -> HTTPResponseReadResult? {
        if (100...199).contains(head.statusCode) {
            // 101 answers an upgrade, which the client never asks for.
            guard head.statusCode != 101 else { return fail(.malformed("101 Switching Protocols to a request without Upgrade")) }
            interim += 1
            guard interim <= Self.maxInterimResponses else { return fail(.malformed("more than \(Self.maxInterimResponses) interim responses")) }
            headParser = HTTPResponseParser(maxHeadBytes: limits.maxHeadBytes, maxHeaderCount: limits.maxHeaderCount)
            return nil
        }
        switch HTTPBodyFraming.of(head, requestWasHead: requestWasHead) {
        case .failure(let error):
            return fail(error)
        case .success(.none):
            finish(head, keepAlive: HTTPBodyFraming.keepsAlive(head, framing: .none))
        case .success(.length(let n)):
            guard n <= limits.maxBodyBytes else { return fail(.tooLarge("Content-Length \(n) over \(limits.maxBodyBytes) bytes")) }
            if n == 0 {
                finish(head, keepAlive: HTTPBodyFraming.keepsAlive(head, framing: .length(0)))
            } else {
                remaining = n
                phase = .body(head, .length(n))
            }
        case .success(let framing):
            phase = .body(head, framing)
        }
        return nil
    }

    /// Takes body bytes from `index` on; a result when the body ended, failed or needs more.
    private mutating func readBody(_ bytes: UnsafeRawBufferPointer, index: inout Int, _ head: HTTPResponseHead,
                                   _ framing: HTTPBodyFraming) -> HTTPResponseReadResult? {
        switch framing {
        case .length:
            let n = min(remaining, bytes.count - index)
            if let failure = keep(bytes, index..<(index + n)) { return failure }
            index += n
            remaining -= n
            guard remaining == 0 else { return .needMore }
            finish(head, keepAlive: HTTPBodyFraming.keepsAlive(head, framing: framing))
            return nil
        case .untilClose:
            if let failure = keep(bytes, index..<bytes.count) { return failure }
            index = bytes.count
            return .needMore
        case .chunked:
            while true {
                switch chunked.next(bytes, index: &index) {
                case .data(let range):
                    if let failure = keep(bytes, range) { return failure }
                case .needMore:
                    return .needMore
                case .end:
                    finish(head, keepAlive: HTTPBodyFraming.keepsAlive(head, framing: framing))
                    return nil
                case .failure(let error):
                    return fail(error)
                }
            }
        case .none:
            return nil  // finished at the head; not reached
        }
    }

    /// Counts body bytes against the bound and keeps the first ones.
    private mutating func keep(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> HTTPResponseReadResult? {
        bodyRead += range.count
        guard bodyRead <= limits.maxBodyBytes else { return fail(.tooLarge("body over \(limits.maxBodyBytes) bytes")) }
        let room = limits.maxKeptBodyBytes - body.count
        if room > 0 {
            body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[range.lowerBound..<(range.lowerBound + min(room, range.count))]))
        }
        return nil
    }

    private mutating func finish(_ head: HTTPResponseHead, keepAlive: Bool) {
        phase = .done(HTTPResponseMessage(head: head, body: body, discardedBodyBytes: bodyRead - body.count,
                                          trailers: chunked.trailers, keepAlive: keepAlive))
        body = []
    }

    private mutating func fail(_ error: HTTPResponseError) -> HTTPResponseReadResult {
        phase = .failed(error)
        return .failure(error)
    }
}

/// What `HTTPResponseReader` found.
public enum HTTPResponseReadResult {
    case needMore
    /// The response is whole; `leftover` counts the bytes of the last chunk fed that follow it.
    case complete(HTTPResponseMessage, leftover: Int)
    case failure(HTTPResponseError)
}

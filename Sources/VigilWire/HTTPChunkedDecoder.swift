/// The chunked transfer coding (RFC 9112 §7.1) decoded incrementally: chunk-size lines (hex,
/// optional extensions, which are ignored), chunk data, the last chunk, then trailer fields up to
/// the empty line.
///
/// Pure and resumable like the head parsers: `next` takes whatever arrived and returns the data
/// it found (a range of the caller's bytes, no copy), `needMore` once the bytes are used up,
/// `end` after the empty line that closes the trailers, or a failure, which is final. Lines are
/// bounded (a chunk-size line at 1 KiB, the trailer section at `maxTrailerBytes` and
/// `maxTrailerCount` fields), sizes at 15 hex digits (no overflow); the body's own bound is the
/// reader's, which counts the data.
public struct HTTPChunkedDecoder {
    /// What `next` found.
    public enum Event: Equatable {
        /// Chunk data: these bytes of the buffer given.
        case data(Range<Int>)
        /// The buffer is used up (nothing in it was kept except a partial line).
        case needMore
        /// The trailer section ended: the body is complete, and `index` is just past it.
        case end
        case failure(HTTPResponseError)
    }

    private enum State: Equatable {
        case sizeLine
        case data(remaining: Int)
        /// The CRLF after a chunk's data.
        case dataEnd
        case trailers
        case done
        case failed(HTTPResponseError)
    }

    static let maxSizeLineBytes = 1024
    private let maxTrailerBytes: Int
    private let maxTrailerCount: Int
    private var state = State.sizeLine
    private var lines = HTTPLineReader(maxBytes: HTTPChunkedDecoder.maxSizeLineBytes)
    /// The trailer fields, in arrival order (valid once `end` is returned).
    public private(set) var trailers: [(name: String, value: String)] = []

    public init(maxTrailerBytes: Int = 4096, maxTrailerCount: Int = 32) {
        self.maxTrailerBytes = maxTrailerBytes
        self.maxTrailerCount = maxTrailerCount
    }

    public mutating func next(_ bytes: UnsafeRawBufferPointer, index: inout Int) -> Event {
        while true {
            switch state {
            case .failed(let error):
                return .failure(error)
            case .done:
                return .end
            case .data(let remaining):
                guard index < bytes.count else { return .needMore }
                let n = min(remaining, bytes.count - index)
                let range = index..<(index + n)
                index += n
                if n == remaining {
                    state = .dataEnd
                    lines = HTTPLineReader(maxBytes: 2)
                } else {
                    state = .data(remaining: remaining - n)
                }
                return .data(range)
            case .sizeLine, .dataEnd, .trailers:
                switch lines.nextLine(bytes, index: &index) {
                case .needMore:
                    return .needMore
                case .tooLong:
                    if state == .trailers { return fail(.tooLarge("trailers over \(maxTrailerBytes) bytes")) }
                    return fail(.malformed(state == .dataEnd ? "chunk data not followed by CRLF" : "chunk size line too long"))
                case .bareCR:
                    return fail(.malformed("bare CR in chunked framing"))
                case .line:
                    if let failure = consumeLine() { return failure }
                }
            }
        }
    }

    private mutating func consumeLine() -> Event? {
        let line = lines.line
        switch state {
        case .sizeLine:
            guard let size = Self.parseSize(line) else { return fail(.malformed("bad chunk size line")) }
            if size == 0 {
                state = .trailers
                lines = HTTPLineReader(maxBytes: maxTrailerBytes)
            } else {
                state = .data(remaining: size)
            }
        case .dataEnd:
            guard line.isEmpty else { return fail(.malformed("chunk data not followed by CRLF")) }
            state = .sizeLine
            lines = HTTPLineReader(maxBytes: Self.maxSizeLineBytes)
        case .trailers:
            if line.isEmpty {
                state = .done
                return nil
            }
            if line[0] == 0x20 || line[0] == 0x09 { return fail(.malformed("obsolete line folding in trailers")) }
            guard trailers.count < maxTrailerCount else { return fail(.tooLarge("more than \(maxTrailerCount) trailer fields")) }
            switch HTTPSyntax.parseField(line) {
            case .success(let field): trailers.append(field)
            case .failure(let error): return fail(.malformed("trailer: \(error.message)"))
            }
        case .data, .done, .failed:
            break
        }
        return nil
    }

    private mutating func fail(_ error: HTTPResponseError) -> Event {
        state = .failed(error)
        return .failure(error)
    }

    /// `1*HEXDIG [BWS ";" chunk-ext]`: the size, nil when malformed or over 15 hex digits. The
    /// extensions are not interpreted (nothing vigild asks for uses them), only kept free of
    /// control characters.
    static func parseSize(_ line: [UInt8]) -> Int? {
        var size = 0
        var digits = 0
        var i = 0
        while i < line.count, let v = HTTPSyntax.hexValue(line[i]) {
            guard digits < 15 else { return nil }
            size = size << 4 | v
            digits += 1
            i += 1
        }
        guard digits > 0 else { return nil }
        while i < line.count, line[i] == 0x20 || line[i] == 0x09 { i += 1 }
        guard i < line.count else { return size }
        guard line[i] == UInt8(ascii: ";") else { return nil }
        for c in line[i...] where (c < 0x20 && c != 0x09) || c == 0x7F { return nil }
        return size
    }
}

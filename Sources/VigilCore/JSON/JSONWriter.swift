import VigilBytes

/// Appends JSON text to a byte buffer, inserting commas itself.
///
/// Used on the hot path to serialize each event once, straight into the chunk whose bytes then go
/// to many subscribers (`takeChunk`), so it allocates nothing beyond that chunk and its growth:
/// strings are copied in escaped runs, integers written digit by digit from a stack buffer,
/// doubles through `JSONASCIISink`.
///
/// Comma state is one Bool. A comma is due before a key or value exactly when something was
/// written at the same level before it; closing a container always leaves its parent with "a value
/// was written", so no per-level stack is needed. The writer does not check the call sequence
/// (a key outside an object, an unbalanced end): callers are our own code, covered by tests.
///
/// Output choices: doubles use Swift's shortest round-trip form, so `1.0` is written "1.0",
/// `1e-7` "1e-07" and `1e16` "1e+16" (all valid JSON); NaN and ±infinity, which JSON cannot
/// express, are written as `null` rather than trapping the daemon. Control characters are escaped
/// as \n \r \t \b \f or \u00xx (lowercase hex); everything else, U+2028/U+2029 included, is raw UTF-8.
public struct JSONWriter {
    private var out: JSONOutput
    /// True when the next key or value at the current level must be preceded by a comma.
    private var needsComma = false

    /// - Parameters:
    ///   - capacity: bytes to allocate up front (the buffer doubles when it must).
    ///   - headroom: bytes kept free in front of the text, for a frame header (see `takeChunk`).
    public init(capacity: Int = 256, headroom: Int = 0) {
        out = JSONOutput(capacity: capacity + headroom, headroom: headroom)
    }

    /// An arena writer: each document is handed over as a frame (`takeFrame`) right after the
    /// one before, in a shared chunk of `arenaCapacity` bytes, so that a run of documents is one
    /// contiguous byte range (`OutputQueue`'s merge rule makes it one queue entry). `headroom` is
    /// the first guess of a header's size; each frame's actual size is the next guess.
    public init(arenaCapacity: Int, headroom: Int) {
        out = JSONOutput(capacity: arenaCapacity, headroom: headroom, arenaCapacity: arenaCapacity)
    }

    /// The text so far, as a new array (tests and tools; the daemon uses `withUnsafeBytes` or `takeChunk`).
    public var bytes: [UInt8] { Array(out.payload) }

    /// The text so far, without a copy; valid during `body` only.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(out.payload)
    }

    /// Bytes of text written so far.
    public var count: Int { out.payload.count }

    /// Bytes the current buffer holds before it must grow (headroom included).
    public var capacity: Int { out.capacity }

    /// Empties the buffer, keeping its capacity, to write the next document.
    public mutating func reset() {
        out.reset()
        needsComma = false
    }

    /// Where the writer is: `rollBack(to:)` undoes everything written after it.
    public struct Mark: Sendable {
        fileprivate let count: Int
        fileprivate let needsComma: Bool
    }

    public func mark() -> Mark { Mark(count: out.documentCount, needsComma: needsComma) }

    /// Forgets what was written since `mark` (a value that did not fit a size budget).
    public mutating func rollBack(to mark: Mark) {
        out.truncate(to: mark.count)
        needsComma = mark.needsComma
    }

    /// Hands over the chunk holding the text (its content is the text; `start` is the headroom,
    /// free for a header in front) and continues in a fresh chunk, ready for the next document.
    public mutating func takeChunk() -> ByteChunk {
        needsComma = false
        return out.take()
    }

    /// Arena mode: hands over the text as a frame, `headerSize` bytes of room for its header (the
    /// first bytes of the range) followed by the text, starting where the frame taken last ended
    /// (unless a new arena began), and continues after it. The caller writes the header.
    public mutating func takeFrame(headerSize: Int) -> ChunkSlice {
        needsComma = false
        return out.takeFrame(headerSize: headerSize)
    }

    @inline(__always)
    private mutating func separate() {
        if needsComma { out.append(0x2C) }
    }

    public mutating func beginObject() {
        separate()
        out.append(0x7B)
        needsComma = false
    }

    public mutating func endObject() {
        out.append(0x7D)
        needsComma = true
    }

    public mutating func beginArray() {
        separate()
        out.append(0x5B)
        needsComma = false
    }

    public mutating func endArray() {
        out.append(0x5D)
        needsComma = true
    }

    /// A member name; the next call writes its value. Literal keys are escaped like any string
    /// (a scan of a few ASCII bytes), so a key with a quote in it still yields valid JSON.
    public mutating func key(_ name: StaticString) {
        separate()
        out.append(0x22)
        name.withUTF8Buffer { appendEscaped($0) }
        out.append(0x22)
        out.append(0x3A)
        needsComma = false
    }

    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        out.append(0x3A)
        needsComma = false
    }

    public mutating func string(_ s: String) {
        separate()
        appendQuoted(s)
        needsComma = true
    }

    public mutating func int(_ v: Int64) {
        separate()
        appendInteger(v)
        needsComma = true
    }

    /// Shortest round-trip digits; `null` for NaN and ±infinity (see the type's notes).
    public mutating func double(_ v: Double) {
        separate()
        appendDouble(v)
        needsComma = true
    }

    public mutating func bool(_ v: Bool) {
        separate()
        appendLiteral(v ? "true" : "false")
        needsComma = true
    }

    public mutating func null() {
        separate()
        appendLiteral("null")
        needsComma = true
    }

    /// Writes a parsed value back out. Integral numbers within ±2^53 (except -0) are written as
    /// integers, so a client's `"ref": 7` comes back as `7`, not `7.0`. Objects keep member order.
    /// Recurses once per nesting level; parsed values are depth-limited by the parser.
    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: null()
        case .bool(let b): bool(b)
        case .string(let s): string(s)
        case .number(let d):
            if let i = v.int64, d != 0 || d.sign == .plus {
                int(i)
            } else {
                double(d)
            }
        case .array(let elements):
            beginArray()
            for element in elements { value(element) }
            endArray()
        case .object(let object):
            beginObject()
            for member in object.members {
                key(member.key)
                value(member.value)
            }
            endObject()
        }
    }

    /// Splices pre-serialized JSON as one value. The bytes are trusted to be one valid JSON value.
    public mutating func raw(_ jsonBytes: [UInt8]) {
        separate()
        jsonBytes.withUnsafeBufferPointer { out.append($0) }
        needsComma = true
    }

    public mutating func field(_ name: StaticString, _ v: String) {
        key(name)
        string(v)
    }

    public mutating func field(_ name: StaticString, _ v: Int64) {
        key(name)
        int(v)
    }

    public mutating func field(_ name: StaticString, _ v: Double) {
        key(name)
        double(v)
    }

    public mutating func field(_ name: StaticString, _ v: Bool) {
        key(name)
        bool(v)
    }

    // MARK: - Text

    private mutating func appendLiteral(_ literal: StaticString) {
        out.append(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    private mutating func appendQuoted(_ s: String) {
        out.append(0x22)
        var s = s
        // withUTF8 copies only a non-contiguous (bridged) string, which Linux never has.
        s.withUTF8 { appendEscaped($0) }
        out.append(0x22)
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    /// Copies UTF-8 in runs, breaking a run only at `"`, `\` and control characters.
    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        for i in 0..<utf8.count {
            let b = utf8[i]
            guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
            out.append(UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
            runStart = i &+ 1
            out.append(0x5C)
            switch b {
            case 0x22, 0x5C: out.append(b)
            case 0x0A: out.append(0x6E) // n
            case 0x0D: out.append(0x72) // r
            case 0x09: out.append(0x74) // t
            case 0x08: out.append(0x62) // b
            case 0x0C: out.append(0x66) // f
            default:
                let hex = JSONWriter.hexDigits.utf8Start
                out.append(0x75) // u
                out.append(0x30)
                out.append(0x30)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        out.append(UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
    }

    // MARK: - Numbers

    /// Decimal digits written backwards into a 20-byte stack buffer (Int64.min has 19 digits and a
    /// sign), then appended in one go. `magnitude` is a UInt64, so Int64.min needs no special case.
    private mutating func appendInteger(_ v: Int64) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var magnitude = v.magnitude
            var start = 20
            repeat {
                start &-= 1
                buffer[start] = 0x30 &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            if v < 0 {
                start &-= 1
                buffer[start] = 0x2D
            }
            out.append(UnsafeBufferPointer(rebasing: buffer[start..<20]))
        }
    }

    private mutating func appendDouble(_ v: Double) {
        guard v.isFinite else {
            appendLiteral("null")
            return
        }
        // Move the array into the sink and back (no copy: the array stays uniquely referenced).
        var sink = JSONASCIISink(out: out)
        v.write(to: &sink)
        out = sink.out
    }
}

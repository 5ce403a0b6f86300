/// The parser's cursor over one input buffer: the structure (values, arrays, objects, depth),
/// whitespace and literals. Strings and numbers live in the `JSONReader+String` and
/// `JSONReader+Number` extensions.
///
/// Invariant: every read of `input[i]` is preceded by a check that `i < input.count` (the buffer's
/// subscript is unchecked in release builds).
struct JSONReader {
    let input: UnsafeBufferPointer<UInt8>
    /// The next byte to read.
    var index = 0
    let maxDepth: Int
    /// Reused for strings with escapes, so a message with many escaped strings grows one buffer.
    var scratch: [UInt8] = []

    init(_ input: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.input = input
        self.maxDepth = maxDepth
    }

    static let space: UInt8 = 0x20, tab: UInt8 = 0x09, lineFeed: UInt8 = 0x0A, carriageReturn: UInt8 = 0x0D
    static let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, comma: UInt8 = 0x2C, colon: UInt8 = 0x3A
    static let openBracket: UInt8 = 0x5B, closeBracket: UInt8 = 0x5D
    static let openBrace: UInt8 = 0x7B, closeBrace: UInt8 = 0x7D
    static let minus: UInt8 = 0x2D, zero: UInt8 = 0x30, nine: UInt8 = 0x39

    func fail(_ offset: Int, _ message: String) -> JSONError {
        JSONError(offset: offset, message: message)
    }

    /// Skips the four whitespace bytes of RFC 8259 §2, and nothing else (no NBSP, no BOM).
    mutating func skipWhitespace() {
        while index < input.count {
            let b = input[index]
            guard b == JSONReader.space || b == JSONReader.lineFeed || b == JSONReader.carriageReturn
                || b == JSONReader.tab else { return }
            index &+= 1
        }
    }

    /// The whole document. Iterative: `frames` holds the open containers, innermost last. Each
    /// turn of the outer loop reads one value; a container's opening pushes a frame and goes round
    /// again for its first value, and the inner loop hands a finished value to its container and
    /// pops every container the text closes right after it.
    mutating func parseDocument() throws(JSONError) -> JSONValue {
        if input.isEmpty { throw fail(0, "empty input") }
        var frames: [JSONContainerFrame] = []
        var value: JSONValue
        readValue: while true {
            skipWhitespace()
            guard index < input.count else { throw fail(index, "expected a value") }
            switch input[index] {
            case JSONReader.openBrace, JSONReader.openBracket:
                let isObject = input[index] == JSONReader.openBrace
                // Depth counts containers, empty ones included, so "[]" at maxDepth 0 fails.
                guard frames.count < maxDepth else { throw fail(index, "nesting deeper than \(maxDepth)") }
                index &+= 1
                skipWhitespace()
                let close = isObject ? JSONReader.closeBrace : JSONReader.closeBracket
                if index < input.count && input[index] == close {
                    index &+= 1
                    value = isObject ? .object(JSONObject(labelled: [])) : .array([])
                } else {
                    var frame = JSONContainerFrame(isObject: isObject)
                    if isObject { frame.pendingKey = try parseKey(in: frame) }
                    frames.append(frame)
                    continue readValue
                }
            case JSONReader.quote:
                value = .string(try parseString())
            case 0x74: // t
                try expectLiteral("true")
                value = .bool(true)
            case 0x66: // f
                try expectLiteral("false")
                value = .bool(false)
            case 0x6E: // n
                try expectLiteral("null")
                value = .null
            case JSONReader.minus, JSONReader.zero...JSONReader.nine:
                value = .number(try parseNumber())
            default:
                throw fail(index, "expected a value")
            }

            while let top = frames.indices.last {
                frames[top].add(value)
                let isObject = frames[top].isObject
                skipWhitespace()
                guard index < input.count else {
                    throw fail(index, isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                let b = input[index]
                if b == JSONReader.comma {
                    index &+= 1
                    if isObject {
                        skipWhitespace()
                        frames[top].pendingKey = try parseKey(in: frames[top])
                    }
                    // A closing bracket here would be a trailing comma: the value reader rejects it.
                    continue readValue
                }
                guard b == (isObject ? JSONReader.closeBrace : JSONReader.closeBracket) else {
                    throw fail(index, isObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                index &+= 1
                value = frames.removeLast().value()
            }
            skipWhitespace()
            guard index == input.count else { throw fail(index, "unexpected data after the value") }
            return value
        }
    }

    /// An object key, the whitespace after it and the colon; rejects a key the object already has.
    /// Expects `index` at the key's opening quote (whitespace before it already skipped).
    mutating func parseKey(in frame: JSONContainerFrame) throws(JSONError) -> String {
        let keyStart = index
        guard index < input.count, input[index] == JSONReader.quote else {
            throw fail(index, "expected a string key")
        }
        let key = try parseString()
        if frame.hasKey(key) { throw fail(keyStart, "duplicate key") }
        skipWhitespace()
        guard index < input.count, input[index] == JSONReader.colon else { throw fail(index, "expected ':'") }
        index &+= 1
        return key
    }

    /// Consumes `literal` exactly, failing at the first byte that differs.
    mutating func expectLiteral(_ literal: StaticString) throws(JSONError) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for b in expected {
            guard index < input.count, input[index] == b else { throw fail(index, "invalid literal") }
            index &+= 1
        }
    }
}

/// Strings (RFC 8259 §7) with UTF-8 validation (RFC 3629 §4).
///
/// Fast path: a string without escapes is validated in place and becomes a String straight from
/// the input bytes. Only a string with a backslash goes through `scratch`.
extension JSONReader {
    /// Reads the string whose opening quote is at `index`; leaves `index` after the closing quote.
    mutating func parseString() throws(JSONError) -> String {
        let start = index &+ 1
        var i = start
        while i < input.count {
            let b = input[i]
            if b == JSONReader.quote {
                index = i &+ 1
                return String(decoding: UnsafeBufferPointer(rebasing: input[start..<i]), as: UTF8.self)
            }
            if b == JSONReader.backslash {
                return try parseEscapedString(from: start, firstEscape: i)
            }
            if b < 0x20 { throw fail(i, "unescaped control character in string") }
            i = b < 0x80 ? i &+ 1 : try endOfMultibyteScalar(at: i)
        }
        throw fail(input.count, "unterminated string")
    }

    /// The slow path: `start..<firstEscape` is plain, already-validated text. Plain runs are copied
    /// to `scratch` whole, escapes decoded one by one.
    private mutating func parseEscapedString(from start: Int, firstEscape: Int) throws(JSONError) -> String {
        scratch.removeAll(keepingCapacity: true)
        var runStart = start
        var i = firstEscape
        while i < input.count {
            let b = input[i]
            if b == JSONReader.quote || b == JSONReader.backslash {
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: input[runStart..<i]))
                if b == JSONReader.quote {
                    index = i &+ 1
                    return String(decoding: scratch, as: UTF8.self)
                }
                i = try decodeEscape(at: i)
                runStart = i
                continue
            }
            if b < 0x20 { throw fail(i, "unescaped control character in string") }
            i = b < 0x80 ? i &+ 1 : try endOfMultibyteScalar(at: i)
        }
        throw fail(input.count, "unterminated string")
    }

    /// Decodes the escape whose backslash is at `i` into `scratch`; returns the index after it.
    private mutating func decodeEscape(at i: Int) throws(JSONError) -> Int {
        guard i &+ 1 < input.count else { throw fail(input.count, "unterminated string") }
        let decoded: UInt8
        switch input[i &+ 1] {
        case JSONReader.quote, JSONReader.backslash, 0x2F: decoded = input[i &+ 1] // \" \\ \/
        case 0x62: decoded = 0x08 // \b
        case 0x66: decoded = 0x0C // \f
        case 0x6E: decoded = 0x0A // \n
        case 0x72: decoded = 0x0D // \r
        case 0x74: decoded = 0x09 // \t
        case 0x75: return try decodeUnicodeEscape(at: i) // \u
        default: throw fail(i &+ 1, "invalid escape")
        }
        scratch.append(decoded)
        return i &+ 2
    }

    /// `\uXXXX` at `i`, or a surrogate pair `\uD8xx\uDCxx` (RFC 8259 §7) combined into one scalar.
    /// A high surrogate not followed by a low one, or a low one alone, is rejected at its backslash:
    /// it has no UTF-8 form, and replacing it silently would let two different texts mean the same.
    private mutating func decodeUnicodeEscape(at i: Int) throws(JSONError) -> Int {
        let unit = try hexQuad(at: i &+ 2)
        var scalar = UInt32(unit)
        var next = i &+ 6
        if unit >= 0xDC00 && unit <= 0xDFFF { throw fail(i, "unpaired surrogate") }
        if unit >= 0xD800 && unit <= 0xDBFF {
            guard next &+ 1 < input.count, input[next] == JSONReader.backslash, input[next &+ 1] == 0x75 else {
                throw fail(i, "unpaired surrogate")
            }
            let low = try hexQuad(at: next &+ 2)
            guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(i, "unpaired surrogate") }
            scalar = 0x10000 &+ ((UInt32(unit) &- 0xD800) << 10) &+ (UInt32(low) &- 0xDC00)
            next &+= 6
        }
        appendUTF8(scalar)
        return next
    }

    /// Four hex digits at `i...i+3`, either case.
    private func hexQuad(at i: Int) throws(JSONError) -> UInt16 {
        var value: UInt16 = 0
        for j in i..<(i &+ 4) {
            guard j < input.count else { throw fail(input.count, "unterminated string") }
            let b = input[j]
            let digit: UInt8
            switch b {
            case 0x30...0x39: digit = b &- 0x30
            case 0x41...0x46: digit = b &- 0x41 &+ 10
            case 0x61...0x66: digit = b &- 0x61 &+ 10
            default: throw fail(j, "invalid \\u escape")
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    /// Encodes a scalar (never a surrogate, at most 0x10FFFF) as UTF-8 into `scratch`.
    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(0xC0 | UInt8(scalar >> 6))
            scratch.append(0x80 | UInt8(scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(0xE0 | UInt8(scalar >> 12))
            scratch.append(0x80 | UInt8(scalar >> 6 & 0x3F))
            scratch.append(0x80 | UInt8(scalar & 0x3F))
        default:
            scratch.append(0xF0 | UInt8(scalar >> 18))
            scratch.append(0x80 | UInt8(scalar >> 12 & 0x3F))
            scratch.append(0x80 | UInt8(scalar >> 6 & 0x3F))
            scratch.append(0x80 | UInt8(scalar & 0x3F))
        }
    }

    /// Validates the multi-byte UTF-8 sequence whose lead byte (>= 0x80) is at `i` and returns the
    /// index after it. The ranges are RFC 3629 §4's: the second byte's range depends on the lead so
    /// overlong forms (C0, C1, E0 80-9F, F0 80-8F), surrogates (ED A0-BF) and code points above
    /// U+10FFFF (F4 90-BF, F5-FF) are refused. Fails at the first byte that cannot belong.
    private func endOfMultibyteScalar(at i: Int) throws(JSONError) -> Int {
        let lead = input[i]
        let tailCount: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: tailCount = 1
        case 0xE0: tailCount = 2; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: tailCount = 2
        case 0xED: tailCount = 2; high = 0x9F
        case 0xF0: tailCount = 3; low = 0x90
        case 0xF1...0xF3: tailCount = 3
        case 0xF4: tailCount = 3; high = 0x8F
        default: throw fail(i, "invalid UTF-8")
        }
        for k in 1...tailCount {
            let j = i &+ k
            guard j < input.count else { throw fail(input.count, "unterminated string") }
            let b = input[j]
            guard b >= low && b <= high else { throw fail(j, "invalid UTF-8") }
            low = 0x80
            high = 0xBF
        }
        return i &+ tailCount &+ 1
    }
}

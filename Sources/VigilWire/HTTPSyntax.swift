/// Byte-level grammar pieces of RFC 9110/9112 shared by the request and response
/// parsers: tokens, the HTTP-version, header field lines.
enum HTTPSyntax {
    /// tchar (RFC 9110 §5.6.2): visible ASCII except delimiters.
    @inline(__always)
    static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"),
             UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    static func isToken<C: Collection>(_ bytes: C) -> Bool where C.Element == UInt8 {
        !bytes.isEmpty && bytes.allSatisfy(isTokenChar)
    }

    /// `HTTP/` DIGIT `.` DIGIT (RFC 9112 §2.3), case-sensitive.
    static func parseVersion<C: Collection>(_ bytes: C) -> (major: Int, minor: Int)? where C.Element == UInt8 {
        let b = Array(bytes)
        guard b.count == 8, b[0..<5].elementsEqual("HTTP/".utf8), b[6] == UInt8(ascii: ".") else { return nil }
        guard let major = digit(b[5]), let minor = digit(b[7]) else { return nil }
        return (major, minor)
    }

    @inline(__always)
    static func digit(_ c: UInt8) -> Int? {
        c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") ? Int(c - UInt8(ascii: "0")) : nil
    }

    /// The value of a hex digit (either case), nil for any other byte.
    @inline(__always)
    static func hexValue(_ c: UInt8) -> Int? {
        if let d = digit(c) { return d }
        let lower = HTTPHeaderSearch.lowerASCII(c)
        return lower >= UInt8(ascii: "a") && lower <= UInt8(ascii: "f") ? Int(lower - UInt8(ascii: "a")) + 10 : nil
    }

    /// Parses `field-name ":" OWS field-value OWS` (RFC 9112 §5). Returns the field
    /// or the reason it is malformed. Callers reject obs-fold before calling.
    static func parseField(_ line: [UInt8]) -> Result<(name: String, value: String), FieldError> {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return .failure(.missingColon) }
        let name = line[..<colon]
        if let last = name.last, last == 0x20 || last == 0x09 {
            // §5.1: no whitespace is allowed between the field name and colon.
            return .failure(.whitespaceBeforeColon)
        }
        guard isToken(name) else { return .failure(.badName) }
        let value = HTTPHeaderSearch.trimOWS(line[(colon + 1)...])
        for c in value where (c < 0x20 && c != 0x09) || c == 0x7F {
            return .failure(.controlCharacter)
        }
        return .success((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    /// Why a field line was rejected.
    enum FieldError: Error {
        case missingColon, whitespaceBeforeColon, badName, controlCharacter

        var message: String {
            switch self {
            case .missingColon: return "header line without colon"
            case .whitespaceBeforeColon: return "whitespace between header name and colon"
            case .badName: return "invalid header name"
            case .controlCharacter: return "control character in header value"
            }
        }
    }
}

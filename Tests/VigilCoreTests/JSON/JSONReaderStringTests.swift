import Testing
@testable import VigilCore

/// Strings (RFC 8259 §7): escapes, surrogate pairs, control characters and UTF-8 validity.
@Suite struct JSONReaderStringTests {
    static let accepted: [(String, String)] = [
        (#""""#, ""),
        (#""abc""#, "abc"),
        (#""\"\\\/\b\f\n\r\t""#, "\"\\/\u{8}\u{C}\n\r\t"),
        (#""\u0041\u00e9\u00E9\u20ac""#, "Aéé€"),
        (#""\uD834\uDD1E""#, "𝄞"),
        (#""\ud83d\ude00 ok""#, "😀 ok"),
        (#""\uDBFF\uDFFF""#, "\u{10FFFF}"),
        (#""\u0000""#, "\u{0}"),
        (#""\uFFFF\uFFFE""#, "\u{FFFF}\u{FFFE}"),
        (#""a\u0022b""#, "a\"b"),
        ("\"κόσμε 日本語 𝄞\"", "κόσμε 日本語 𝄞"),
        ("\"\u{2028}\u{2029}\u{7F}\"", "\u{2028}\u{2029}\u{7F}"),
        (#""before \n after é \u00e9 𝄞""#, "before \n after é é 𝄞"),
    ]

    @Test(arguments: accepted)
    func decodes(_ text: String, _ expected: String) throws {
        let value = try JSONTestSupport.parse(text)
        #expect(value.string == expected)
        // Byte-exact too: Swift's == would also accept a canonically equivalent string.
        #expect(value.string.map { Array($0.utf8) } == Array(expected.utf8))
    }

    static let rejected: [(String, Int, String)] = [
        (#""\uD800""#, 1, "unpaired surrogate"),
        (#""\uD800x""#, 1, "unpaired surrogate"),
        (#""\uD800\uD800""#, 1, "unpaired surrogate"),
        (#""\uD800\n""#, 1, "unpaired surrogate"),
        (#""\uDC00""#, 1, "unpaired surrogate"),
        (#""\uDFFF\uD800""#, 1, "unpaired surrogate"),
        (#""\x""#, 2, "invalid escape"),
        (#""\U0041""#, 2, "invalid escape"),
        (#""\'""#, 2, "invalid escape"),
        (#""\u12""#, 5, #"invalid \u escape"#),
        (#""\u12G4""#, 5, #"invalid \u escape"#),
        (#""\u""#, 3, #"invalid \u escape"#),
        (#""abc"#, 4, "unterminated string"),
        (#""abc\"#, 5, "unterminated string"),
        (#""\u00"#, 5, "unterminated string"),
        ("\"a\nb\"", 2, "unescaped control character in string"),
        ("\"\t\"", 1, "unescaped control character in string"),
        ("'a'", 0, "expected a value"),
    ]

    @Test(arguments: rejected)
    func rejectsEscapes(_ text: String, _ offset: Int, _ message: String) {
        #expect(JSONTestSupport.error(text) == JSONError(offset: offset, message: message))
    }

    @Test func rejectsEveryRawControlCharacter() {
        for b in UInt8(0)..<0x20 {
            #expect(JSONTestSupport.error([0x22, 0x61, b, 0x22]) == JSONError(offset: 2, message: "unescaped control character in string"))
        }
    }

    /// RFC 3629 §4: overlong forms, surrogates, > U+10FFFF, stray and missing continuation bytes.
    static let invalidUTF8: [([UInt8], Int)] = [
        ([0xFF], 1), ([0xFE], 1), ([0x80], 1), ([0xBF], 1), ([0x61, 0x80], 2),
        ([0xC0, 0xAF], 1), ([0xC1, 0xBF], 1), ([0xE0, 0x80, 0xAF], 2), ([0xE0, 0x9F, 0xBF], 2),
        ([0xF0, 0x80, 0x80, 0xAF], 2), ([0xF0, 0x8F, 0xBF, 0xBF], 2),
        ([0xED, 0xA0, 0x80], 2), ([0xED, 0xBF, 0xBF], 2),
        ([0xF4, 0x90, 0x80, 0x80], 2), ([0xF5, 0x80, 0x80, 0x80], 1),
        ([0xF8, 0x88, 0x80, 0x80, 0x80], 1), ([0xFC, 0x84, 0x80, 0x80, 0x80, 0x80], 1),
        ([0xC2, 0x41], 2), ([0xE2, 0x28, 0xA1], 2), ([0xE2, 0x82, 0x28], 3), ([0xF0, 0x9F, 0x98, 0x28], 4),
        ([0xC2], 2), ([0xE2, 0x82], 3), ([0xF0, 0x9F, 0x98], 4), // truncated by the closing quote
    ]

    @Test(arguments: invalidUTF8)
    func rejectsInvalidUTF8(_ body: [UInt8], _ offset: Int) {
        let error = JSONTestSupport.error([0x22] + body + [0x22])
        #expect(error?.offset == offset, "\(body): \(String(describing: error))")
        // Also on the escaped-string path, shifted by the two-byte escape in front.
        let escaped = JSONTestSupport.error([0x22, 0x5C, 0x6E] + body + [0x22])
        #expect(escaped?.offset == offset + 2, "\(body) after an escape: \(String(describing: escaped))")
    }

    @Test func acceptsEveryValidUTF8Boundary() throws {
        let vectors: [[UInt8]] = [
            [0x7F], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
            [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
        ]
        for v in vectors {
            let value = try JSONParser.parse([0x22] + v + [0x22])
            #expect(value.string.map { Array($0.utf8) } == v)
        }
    }

    @Test func invalidUTF8OutsideStringsIsRejected() {
        #expect(JSONTestSupport.error([0xEF, 0xBB, 0xBF, 0x31])?.offset == 0) // a BOM is not whitespace
        #expect(JSONTestSupport.error([0x5B, 0xC3, 0xA9, 0x5D])?.offset == 1)
    }

    @Test func everyBMPEscapeDecodesToItsScalar() throws {
        for unit in stride(from: 0, through: 0xFFFF, by: 7) where !(0xD800...0xDFFF).contains(unit) {
            let hex = String(unit, radix: 16)
            let text = "\"\\u" + String(repeating: "0", count: 4 - hex.count) + hex + "\""
            #expect(try JSONTestSupport.parse(text).string?.unicodeScalars.first?.value == UInt32(unit))
        }
    }
}

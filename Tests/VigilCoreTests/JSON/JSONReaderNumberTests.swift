import Testing
@testable import VigilCore
import VigilTestSupport

/// Numbers (RFC 8259 §6): the grammar, correct rounding (Swift's own `Double(String)`, itself
/// correctly rounded, is the oracle) and range.
@Suite struct JSONReaderNumberTests {
    static let accepted = [
        "0", "-0", "1", "-1", "1e5", "1E+5", "1e-5", "-1.5e-3", "0.5", "52.52", "-0.0001", "1e-7", "0e0",
        "0E-0", "-0.0e+0", "123456789", "9007199254740991", "9007199254740992", "9007199254740993",
        "-9007199254740993", "18446744073709551615", "18446744073709551616", "123456789012345678901234567890",
        "1e22", "1e23", "8.98846567431158e307", "1.7976931348623157e308", "-1.7976931348623157e308",
        "2.2250738585072011e-308", "2.2250738585072014e-308", "4.9406564584124654e-324", "5e-324",
        "2.4703282292062328e-324", "2.4703282292062327e-324", "1e-400", "-1e-400", "1e-99999999999999999999",
        "0.1", "0.30000000000000004", "1.000000000000000000000000000000000001", "100000000000000000000000e-3",
        "0.000000000000000000000000000001", "0.0000000000000000000000000000012345678901234567890123",
        "3.141592653589793238462643383279", "1.5e0000000000000000000000000001", "7e22", "9007199254740992e22",
        "1234567890123456789", "12345678901234567890", "4.35", "0.0000000001", "1e+308",
    ]

    @Test(arguments: accepted)
    func acceptsAndRoundsCorrectly(_ text: String) throws {
        let value = try JSONTestSupport.parse(text)
        let expected = Double(text)!
        #expect(value.double?.bitPattern == expected.bitPattern, "\(text) → \(value), expected \(expected)")
    }

    @Test func negativeZeroKeepsItsSign() throws {
        #expect(try JSONTestSupport.parse("-0").double?.sign == .minus)
        #expect(try JSONTestSupport.parse("-0.0e5").double?.sign == .minus)
        #expect(try JSONTestSupport.parse("0").double?.sign == .plus)
    }

    static let rejected: [(String, Int)] = [
        ("01", 1), ("-01", 2), ("00", 1), ("+1", 0), (".5", 0), ("1.", 2), ("1.e5", 2), ("1e", 2), ("1e+", 3),
        ("1e-", 3), ("-", 1), ("--1", 1), ("- 1", 1), ("1e400", 0), ("-1e400", 0), ("1.7976931348623159e308", 0),
        ("1e99999999999999999999", 0), ("NaN", 0), ("Infinity", 0), ("-Infinity", 1), ("0x10", 1), ("1_000", 1),
        ("1.5.2", 3), ("1 2", 2), ("1e5e5", 3), ("-.5", 1), ("[01]", 2), ("[1.]", 3), ("0.e1", 2), ("1,", 1),
    ]

    @Test(arguments: rejected)
    func rejectsWithOffset(_ text: String, _ offset: Int) {
        let error = JSONTestSupport.error(text)
        #expect(error?.offset == offset, "\(text): \(String(describing: error))")
    }

    @Test func overflowNamesTheNumber() {
        #expect(JSONTestSupport.error("[1, 2e400]") == JSONError(offset: 4, message: "number out of range"))
        #expect(JSONTestSupport.error("01")?.message == "leading zeros are not allowed")
    }

    /// A number that fills a whole message still takes the strtod path correctly.
    @Test func veryLongNumbers() throws {
        let digits = String(repeating: "9", count: 5_000)
        #expect(try JSONTestSupport.parse("0." + digits).double == 1.0)
        #expect(JSONTestSupport.error(digits)?.message == "number out of range")
        #expect(try JSONTestSupport.parse("1" + String(repeating: "0", count: 300)).double == 1e300)
    }

    /// Randomly formatted decimals agree with the oracle, exercising both conversion paths.
    @Test func randomDecimalsAgreeWithOracle() throws {
        var rng = SplitMix64(state: 42)
        for _ in 0..<3_000 {
            var text = Bool.random(using: &rng) ? "-" : ""
            let intDigits = Int.random(in: 1...20, using: &rng)
            text += String(Int.random(in: 1...9, using: &rng))
            for _ in 1..<intDigits { text += String(Int.random(in: 0...9, using: &rng)) }
            if Bool.random(using: &rng) {
                text += "."
                for _ in 0..<Int.random(in: 1...20, using: &rng) { text += String(Int.random(in: 0...9, using: &rng)) }
            }
            if Bool.random(using: &rng) { text += "e" + String(Int.random(in: -330...300, using: &rng)) }
            let expected = Double(text)!
            if expected.isFinite {
                #expect(try JSONTestSupport.parse(text).double?.bitPattern == expected.bitPattern, "\(text)")
            } else {
                #expect(JSONTestSupport.error(text) != nil, "\(text)")
            }
        }
    }
}

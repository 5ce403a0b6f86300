#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Numbers (RFC 8259 §6), correctly rounded to Double.
///
/// The grammar is checked byte by byte while the digits are gathered into a decimal significand
/// and a power of ten. Most wire numbers (coordinates, timestamps, ids) then take Clinger's exact
/// fast path; the rest go to the C library's correctly rounded `strtod`, given a rewritten copy
/// with no decimal point ("12.5e3" becomes "125e2") so the result cannot depend on LC_NUMERIC.
extension JSONReader {
    /// 10^0 … 10^22: every power of ten that a Double holds exactly.
    private static let exactPowersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    /// An exponent this large already over- or underflows any significand a message can carry;
    /// clamping there keeps the arithmetic below far from Int overflow.
    private static let exponentClamp = 1 << 50

    private func isDigit(_ i: Int) -> Bool {
        i < input.count && input[i] >= JSONReader.zero && input[i] <= JSONReader.nine
    }

    /// Reads the number starting at `index` ('-' or a digit); leaves `index` after it.
    mutating func parseNumber() throws(JSONError) -> Double {
        let start = index
        var i = index
        let negative = input[i] == JSONReader.minus
        if negative { i &+= 1 }
        guard isDigit(i) else { throw fail(i, "expected a digit") }

        // Significant digits (leading zeros skipped) accumulate into `significand` while 19 of
        // them cannot overflow UInt64; a longer significand sets `truncated` and goes to strtod.
        var significand: UInt64 = 0
        var significantDigits = 0
        var truncated = false
        var fractionDigits = 0
        func accumulate(_ b: UInt8) {
            let digit = UInt64(b &- JSONReader.zero)
            if significantDigits == 0 && digit == 0 { return }
            if significantDigits < 19 {
                significand = significand &* 10 &+ digit
                significantDigits &+= 1
            } else {
                truncated = true
            }
        }

        if input[i] == JSONReader.zero {
            i &+= 1
            if isDigit(i) { throw fail(i, "leading zeros are not allowed") }
        } else {
            while isDigit(i) {
                accumulate(input[i])
                i &+= 1
            }
        }
        if i < input.count && input[i] == 0x2E { // .
            i &+= 1
            guard isDigit(i) else { throw fail(i, "expected a digit after '.'") }
            while isDigit(i) {
                accumulate(input[i])
                fractionDigits &+= 1
                i &+= 1
            }
        }
        var exponent = 0
        if i < input.count && (input[i] == 0x65 || input[i] == 0x45) { // e E
            i &+= 1
            var exponentNegative = false
            if i < input.count && (input[i] == 0x2B || input[i] == JSONReader.minus) { // + -
                exponentNegative = input[i] == JSONReader.minus
                i &+= 1
            }
            guard isDigit(i) else { throw fail(i, "expected a digit in the exponent") }
            while isDigit(i) {
                if exponent < JSONReader.exponentClamp {
                    exponent = exponent &* 10 &+ Int(input[i] &- JSONReader.zero)
                }
                i &+= 1
            }
            if exponentNegative { exponent = -exponent }
        }
        index = i

        if significand == 0 && !truncated { return negative ? -0.0 : 0.0 }
        // value = significand × 10^powerOfTen (ignoring truncated digits, which only the slow path sees)
        let powerOfTen = exponent &- fractionDigits
        if !truncated && significand <= (1 << 53) && powerOfTen >= -22 && powerOfTen <= 22 {
            // Clinger: both operands are exact Doubles, so one IEEE multiply or divide is the
            // correctly rounded result.
            let magnitude = powerOfTen >= 0
                ? Double(significand) * JSONReader.exactPowersOfTen[powerOfTen]
                : Double(significand) / JSONReader.exactPowersOfTen[-powerOfTen]
            return negative ? -magnitude : magnitude
        }
        let value = strtodWithoutDecimalPoint(start..<i, exponent: powerOfTen)
        guard value.isFinite else { throw fail(start, "number out of range") }
        return value
    }

    /// Copies the sign and every digit of the significand in `range` (dropping '.' and the exponent)
    /// and appends "e<powerOfTen>", then converts with strtod. Returns ±infinity on overflow.
    private func strtodWithoutDecimalPoint(_ range: Range<Int>, exponent powerOfTen: Int) -> Double {
        // sign + digits + 'e' + up to 20 exponent characters + NUL
        let capacity = range.count &+ 24
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer -> Double in
            var n = 0
            for j in range {
                let b = input[j]
                if b == 0x2E { continue }
                if b == 0x65 || b == 0x45 { break }
                buffer[n] = CChar(bitPattern: b)
                n &+= 1
            }
            buffer[n] = 0x65 // e
            n &+= 1
            var e = powerOfTen
            if e < 0 {
                buffer[n] = 0x2D // -
                n &+= 1
                e = -e
            }
            // Exponent digits, written backwards then reversed in place.
            let firstDigit = n
            repeat {
                buffer[n] = CChar(0x30 &+ e % 10)
                n &+= 1
                e /= 10
            } while e > 0
            var lo = firstDigit, hi = n &- 1
            while lo < hi {
                buffer.swapAt(lo, hi)
                lo &+= 1
                hi &-= 1
            }
            buffer[n] = 0
            return strtod(buffer.baseAddress!, nil)
        }
    }
}

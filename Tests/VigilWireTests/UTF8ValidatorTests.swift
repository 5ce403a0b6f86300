import Testing
@testable import VigilWire
import VigilTestSupport

/// RFC 3629 vectors plus Swift's own decoder as an oracle.
@Suite struct UTF8ValidatorTests {
    func valid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { UTF8Validator.validate($0) }
    }

    /// Swift's decoder: valid iff decoding does not repair anything.
    func oracle(_ bytes: [UInt8]) -> Bool {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    @Test func knownValid() {
        let vectors: [[UInt8]] = [
            [], Array("plain ascii, long enough for the 8-byte path".utf8),
            [0x7F], [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF],
            [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
            [0xF4, 0x8F, 0xBF, 0xBF], Array("κόσμε €𝄞 日本語".utf8),
        ]
        for v in vectors {
            #expect(valid(v), "\(v)")
        }
    }

    @Test func knownInvalid() {
        let vectors: [[UInt8]] = [
            [0xC0, 0x80], [0xC1, 0xBF], // overlong 2-byte
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], // overlong 3-byte
            [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], // overlong 4-byte
            [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF], // surrogates D800, DFFF
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xFE], // > U+10FFFF
            [0xF8, 0x88, 0x80, 0x80, 0x80], [0xFC, 0x84, 0x80, 0x80, 0x80, 0x80], // 5/6-byte forms
            [0x80], [0xBF], [0x61, 0x80], // stray continuation
            [0xC2], [0xE2, 0x82], [0xF0, 0x9F, 0x98], // truncated
            [0xC2, 0x41], [0xE2, 0x28, 0xA1], [0xF0, 0x9F, 0x28, 0x8C], // bad tails
            Array("0123456789abcdef".utf8) + [0xC0] + Array("0123456789".utf8),
        ]
        for v in vectors {
            #expect(!valid(v), "\(v)")
            #expect(!oracle(v), "oracle disagrees on \(v)")
        }
    }

    @Test func failsAtTheFirstBadByteAndStays() {
        var validator = UTF8Validator()
        let ok: [UInt8] = [0x61, 0xE0]
        let bad: [UInt8] = [0x80]
        #expect(ok.withUnsafeBytes { validator.feed($0) })
        #expect(!validator.isAtBoundary)
        #expect(!bad.withUnsafeBytes { validator.feed($0) })
        #expect(!ok.withUnsafeBytes { validator.feed($0) })
        #expect(!validator.isAtBoundary)
        validator.reset()
        #expect(validator.isAtBoundary)
        #expect(ok.withUnsafeBytes { validator.feed($0) })
    }

    @Test func everySplitOfMultibyteText() {
        let text = Array("a€b𝄞c κόσμε ASCII-run-of-bytes 日本".utf8)
        for a in 0...text.count {
            for b in a...text.count {
                var validator = UTF8Validator()
                let parts = [Array(text[..<a]), Array(text[a..<b]), Array(text[b...])]
                var ok = true
                for part in parts { ok = ok && part.withUnsafeBytes { validator.feed($0) } }
                #expect(ok && validator.isAtBoundary, "split \(a) \(b)")
            }
        }
    }

    @Test func exhaustiveTwoBytes() {
        for a in 0...255 {
            for b in 0...255 {
                let bytes = [UInt8(a), UInt8(b)]
                if valid(bytes) != oracle(bytes) {
                    Issue.record("mismatch on \(bytes)")
                    return
                }
            }
        }
    }

    @Test func threeAndFourByteLeads() {
        let tails: [UInt8] = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF]
        for lead in 0xE0...0xFF {
            for second in 0...255 {
                for third in tails {
                    let three = [UInt8(lead), UInt8(second), third]
                    let four = three + [0x80]
                    if valid(three) != oracle(three) || valid(four) != oracle(four) {
                        Issue.record("mismatch on \(four)")
                        return
                    }
                }
            }
        }
    }

    @Test func randomAgainstOracle() {
        var rng = SplitMix64(state: 0x5EED)
        // Bias towards interesting bytes so valid multi-byte sequences occur.
        let pool: [UInt8] = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5]
        var validSeen = 0
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...12, using: &rng)
            let bytes = (0..<length).map { _ in
                Bool.random(using: &rng) ? pool.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
            let expected = oracle(bytes)
            if expected { validSeen += 1 }
            #expect(valid(bytes) == expected, "\(bytes)")
            // Same answer when fed in two pieces.
            let cut = Int.random(in: 0...length, using: &rng)
            var validator = UTF8Validator()
            let ok = Array(bytes[..<cut]).withUnsafeBytes { validator.feed($0) }
                && Array(bytes[cut...]).withUnsafeBytes { validator.feed($0) }
            #expect((ok && validator.isAtBoundary) == expected)
        }
        #expect(validSeen > 1000)
        // Round-trip through String as a second oracle for valid inputs.
        for _ in 0..<500 {
            let scalars = (0..<8).compactMap { _ in Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &rng)) }
            var s = ""
            s.unicodeScalars.append(contentsOf: scalars)
            #expect(valid(Array(s.utf8)))
        }
    }

    @Test func asciiFastPathAlignments() {
        // An invalid byte at every position of a long ASCII run, across 8-byte words.
        for position in 0..<40 {
            var bytes = [UInt8](repeating: 0x61, count: 40)
            bytes[position] = 0x80
            #expect(!valid(bytes))
            for offset in 0..<8 {
                #expect(!Array(bytes[min(offset, position)...]).withUnsafeBytes { UTF8Validator.validate($0) })
            }
        }
    }
}

import Testing
@testable import VigilGeo

/// The alphabet tables agree with each other and reject the four excluded letters.
struct GeohashBase32Tests {
    @Test func thirtyTwoDistinctSymbols() {
        #expect(GeohashBase32.symbols.count == 32)
        #expect(Set(GeohashBase32.symbols).count == 32)
        #expect(String(decoding: GeohashBase32.symbols, as: UTF8.self) == "0123456789bcdefghjkmnpqrstuvwxyz")
    }

    @Test func valueInvertsSymbolInBothCases() {
        for (value, symbol) in GeohashBase32.symbols.enumerated() {
            #expect(GeohashBase32.value(of: symbol) == UInt8(value))
            let upper = Character(Unicode.Scalar(symbol)).uppercased().utf8.first!
            #expect(GeohashBase32.value(of: upper) == UInt8(value))
        }
    }

    @Test func rejectsEverythingElse() {
        for ascii in ["a", "i", "l", "o", "A", "I", "L", "O", " ", "-", "{", "\u{0}"] {
            #expect(GeohashBase32.value(of: ascii.utf8.first!) == nil, "\(ascii)")
        }
        #expect(GeohashBase32.value(of: 0xC3) == nil)
        #expect(GeohashBase32.value(of: 0xFF) == nil)
        let accepted = (0..<256).filter { GeohashBase32.value(of: UInt8($0)) != nil }
        #expect(accepted.count == 32 + 22) // 10 digits + 22 letters, letters in both cases
    }
}

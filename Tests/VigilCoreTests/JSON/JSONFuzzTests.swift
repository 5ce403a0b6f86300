import Testing
@testable import VigilCore
import VigilTestSupport

/// Random bytes and mutated documents never crash the parser; whatever it accepts survives
/// write → parse unchanged (the same property as Tests/fuzz/JSONFuzz.swift, without libFuzzer).
@Suite struct JSONFuzzTests {
    /// Bytes JSON texts are made of, plus a few that break UTF-8.
    static let alphabet: [UInt8] = Array("{}[]:,\"\\/ \n\t0123456789-+.eEtrufalsn\\u".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC3, 0xA9, 0xED, 0xF0, 0xFF]

    func check(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes, maxDepth: 8) else { return }
        let written = JSONTestSupport.written(value)
        let again = try? JSONParser.parse(written, maxDepth: 8)
        #expect(again.map { JSONTestSupport.identical($0, value) } == true, "\(bytes)")
    }

    @Test func randomAndMutatedInputsNeverCrash() {
        var rng = SplitMix64(state: 0xF022)
        var generator = RandomJSON(rng: SplitMix64(state: 99))
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<2_500 {
            let count = Int.random(in: 0...64, using: &rng)
            check((0..<count).map { _ in Self.alphabet[Int.random(in: 0..<Self.alphabet.count, using: &rng)] })
        }
        for _ in 0..<2_500 {
            var bytes = JSONTestSupport.written(generator.value(depth: 4))
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let at = Int.random(in: 0...bytes.count, using: &rng)
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where at < bytes.count: bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &rng)
                case 1: bytes.insert(Self.alphabet[Int.random(in: 0..<Self.alphabet.count, using: &rng)], at: at)
                case 2 where at < bytes.count: bytes.remove(at: at)
                case 3: bytes.removeSubrange(at...)
                default:
                    let end = min(bytes.count, at + Int.random(in: 0...8, using: &rng))
                    bytes.insert(contentsOf: bytes[at..<end], at: at)
                }
            }
            check(bytes)
        }
        #expect(clock.now - start < .seconds(2))
    }
}

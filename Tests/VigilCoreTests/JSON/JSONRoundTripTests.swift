import Testing
@testable import VigilCore
import VigilTestSupport

/// Writer → parser round trips over seeded random values.
@Suite struct JSONRoundTripTests {
    @Test func randomValuesRoundTrip() throws {
        var generator = RandomJSON(rng: SplitMix64(state: 0x5EED_1234))
        for iteration in 0..<2_000 {
            let value = generator.value(depth: 5)
            let bytes = JSONTestSupport.written(value)
            let parsed = try JSONParser.parse(bytes)
            #expect(JSONTestSupport.identical(parsed, value), "iteration \(iteration): \(String(decoding: bytes, as: UTF8.self))")
            #expect(parsed == value)
            // Writing is stable: the parsed value writes the same bytes.
            #expect(JSONTestSupport.written(parsed) == bytes)
        }
    }

    @Test func randomDoublesRoundTripBitExactly() throws {
        var rng = SplitMix64(state: 7)
        for _ in 0..<5_000 {
            let d = Double(bitPattern: rng.next())
            guard d.isFinite else { continue }
            var writer = JSONWriter()
            writer.double(d)
            #expect(try JSONParser.parse(writer.bytes).double?.bitPattern == d.bitPattern)
        }
    }
}

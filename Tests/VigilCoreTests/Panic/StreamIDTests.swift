import Testing
@testable import VigilCore
import VigilTestSupport

@Suite struct StreamIDTests {
    @Test func textIs22Base64URLCharactersAndRoundTrips() {
        let secrets = TestSecrets(seed: 7)
        for _ in 0..<200 {
            let id = StreamID(random: secrets.randomBytes(16))
            let text = id.description
            #expect(text.utf8.count == 22)
            #expect(StreamID(text) == id)
            #expect(StreamID(random: id.bytes) == id)
        }
    }

    @Test func knownBytesEncodeLikeBase64URL() {
        let id = StreamID(random: [0xFB, 0xFF] + [UInt8](repeating: 0, count: 13) + [0x03])
        #expect(id.description == "-_8AAAAAAAAAAAAAAAAAAw")
        #expect(StreamID("-_8AAAAAAAAAAAAAAAAAAw") == id)
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAAA") == StreamID(high: 0, low: 0))
        #expect(StreamID("_____________________w") == StreamID(high: .max, low: .max))
    }

    @Test func malformedTextIsRejected() {
        #expect(StreamID("") == nil)
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAA") == nil)      // 21
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAAAA") == nil)    // 23
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAA+A") == nil)     // base64, not base64url
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAA=") == nil)     // padding
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAAB") == nil)     // unused low bits set: not canonical
        #expect(StreamID("AAAAAAAAAAAAAAAAAAAAAé") == nil)
    }

    @Test func orderIsByValue() {
        #expect(StreamID(high: 1, low: 0) > StreamID(high: 0, low: .max))
        #expect(StreamID(high: 1, low: 1) > StreamID(high: 1, low: 0))
    }
}

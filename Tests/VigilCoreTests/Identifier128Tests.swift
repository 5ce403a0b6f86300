import Testing
@testable import VigilCore
import VigilTestSupport

/// What `Identifier128` does once for both kinds of id: words, bytes, order, hashing, and parsing
/// from bytes. The text forms have their own tests (`PinIDTests`, `StreamIDTests`).
@Suite struct Identifier128Tests {
    @Test func theSameWordsReadDifferentlyInEachForm() {
        let pin = PinID(high: 1, low: 2)
        let stream = StreamID(high: 1, low: 2)
        #expect(pin.description == "00000000-0000-0001-0000-000000000002")
        #expect(stream.description == "AAAAAAAAAAEAAAAAAAAAAg")
        #expect(pin.bytes == stream.bytes)
        #expect(pin.bytes == [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2])
        #expect(PinID(stream.description) == nil && StreamID(pin.description) == nil)
    }

    @Test func bytesAreBothWordsBigEndian() {
        let id = PinID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)
        #expect(id.bytes == Array(1...16))
        #expect(StreamID(random: Array(1...16)) == StreamID(high: id.high, low: id.low))
    }

    @Test func aRandomPinIDFixesOnlyTheVersionAndVariantBits() {
        #expect(PinID(random: [UInt8](repeating: 0, count: 16)).description == "00000000-0000-4000-8000-000000000000")
        #expect(PinID(random: [UInt8](repeating: 0xFF, count: 16)).description == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        let secrets = TestSecrets(seed: 3)
        for _ in 0..<100 {
            let id = PinID(random: secrets.randomBytes(16))
            #expect(PinID(random: id.bytes) == id, "fixing the bits twice changes nothing")
        }
    }

    @Test func orderIsTheOrderOfTheBytesAndOfUUIDText() {
        let secrets = TestSecrets(seed: 11)
        for _ in 0..<500 {
            // Shared high words half the time, so the low word decides too.
            let a = PinID(random: secrets.randomBytes(16))
            let b = secrets.randomBytes(1)[0] & 1 == 0 ? PinID(high: a.high, low: PinID(random: secrets.randomBytes(16)).low)
                                                      : PinID(random: secrets.randomBytes(16))
            #expect((a < b) == a.bytes.lexicographicallyPrecedes(b.bytes))
            #expect((a < b) == (a.description < b.description))
            let s = StreamID(high: a.high, low: a.low), t = StreamID(high: b.high, low: b.low)
            #expect((s < t) == (a < b))
        }
    }

    @Test func equalityAndHashingUseBothWords() {
        let ids: [StreamID] = [StreamID(high: 1, low: 2), StreamID(high: 2, low: 1), StreamID(high: 1, low: 1),
                               StreamID(high: 2, low: 2), StreamID(high: 1, low: 2)]
        #expect(Set(ids).count == 4)
        #expect(ids[0] == ids[4] && ids[0] != ids[1])
        var seen: [StreamID: Int] = [:]
        for (i, id) in ids.enumerated() { seen[id, default: 0] += i }
        #expect(seen[StreamID(high: 1, low: 2)] == 4)
    }

    @Test func parsesAnIdInsideALargerBuffer() {
        let id = PinID(random: TestSecrets(seed: 5).randomBytes(16))
        let message = Array("{\"id\":\"\(id)\"}".utf8)
        message.withUnsafeBufferPointer { all in
            #expect(PinID(utf8: UnsafeBufferPointer(rebasing: all[7..<43])) == id)
            #expect(PinID(utf8: UnsafeBufferPointer(rebasing: all[7..<44])) == nil, "a byte after the id")
            #expect(PinID(utf8: UnsafeBufferPointer(rebasing: all[6..<43])) == nil, "a byte before the id")
        }
    }
}

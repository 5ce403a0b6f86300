import Testing
@testable import VigilPush

/// A public key is made only from a point of P-256: the hostile shapes a subscription could carry
/// are each refused with their own error.
@Suite struct P256PublicKeyTests {
    @Test func acceptsTheRFCKeys() throws {
        let key = try P256PublicKey(base64URL: RFC8291Vector.userAgentPublic)
        #expect(key.bytes.count == 65)
        #expect(key.base64URL == RFC8291Vector.userAgentPublic)
        #expect(try P256PublicKey(bytes: TestKeys.sec1Public).bytes == TestKeys.sec1Public)
    }

    @Test func refusesWrongLengths() {
        let good = TestKeys.sec1Public
        for count in [0, 1, 33, 64, 66, 97, 200] {
            let bytes = Array((good + good + good + good).prefix(count))
            #expect(throws: PushKeyError.wrongLength(what: "P-256 public key", expected: 65, actual: count)) { try P256PublicKey(bytes: bytes) }
        }
    }

    @Test func refusesCompressedAndOtherForms() {
        var compressed = TestKeys.sec1Public
        compressed[0] = 0x02
        #expect(throws: PushKeyError.notUncompressedPoint) { try P256PublicKey(bytes: compressed) }
        var hybrid = TestKeys.sec1Public
        hybrid[0] = 0x06
        #expect(throws: PushKeyError.notUncompressedPoint) { try P256PublicKey(bytes: hybrid) }
    }

    @Test func refusesPointsOffTheCurve() {
        // Every single-byte change of the coordinates moves the point off the curve (P-256 has at
        // most two points per X; changing Y by one bit leaves it).
        for index in stride(from: 1, to: 65, by: 3) {
            var bytes = TestKeys.sec1Public
            bytes[index] ^= 0x01
            #expect(throws: PushKeyError.notOnCurve) { try P256PublicKey(bytes: bytes) }
        }
        #expect(throws: PushKeyError.notOnCurve) { try P256PublicKey(bytes: [0x04] + [UInt8](repeating: 0, count: 64)) }
        #expect(throws: PushKeyError.notOnCurve) { try P256PublicKey(bytes: [0x04] + [UInt8](repeating: 0xFF, count: 64)) }
    }

    @Test func refusesText() {
        #expect(throws: PushKeyError.notBase64URL(what: "P-256 public key")) { try P256PublicKey(base64URL: "not base64!") }
        #expect(throws: PushKeyError.wrongLength(what: "P-256 public key", expected: 65, actual: 3)) { try P256PublicKey(base64URL: "AAAA") }
    }
}

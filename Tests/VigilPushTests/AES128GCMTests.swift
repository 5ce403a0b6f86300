import Testing
@testable import VigilPush

/// AES-128-GCM against the GCM specification's test cases 1 and 2 (McGrew & Viega), and the
/// refusal of every altered byte.
@Suite struct AES128GCMTests {
    let zeroKey = [UInt8](repeating: 0, count: 16)
    let zeroNonce = [UInt8](repeating: 0, count: 12)

    @Test func specificationVectors() throws {
        #expect(try AES128GCM.seal(key: zeroKey, nonce: zeroNonce, plaintext: []) == TestKeys.hex("58e2fccefa7e3061367f1d57a4e7455a"))
        let sealed = try AES128GCM.seal(key: zeroKey, nonce: zeroNonce, plaintext: [UInt8](repeating: 0, count: 16))
        #expect(sealed == TestKeys.hex("0388dace60b6a392f328c2b971b2fe78" + "ab6e47d42cec13bdf53a67b21257bddf"))
        #expect(try AES128GCM.open(key: zeroKey, nonce: zeroNonce, sealed: sealed[...]) == [UInt8](repeating: 0, count: 16))
    }

    @Test func everyAlteredByteIsRefused() throws {
        let plaintext = Array("the quick brown fox".utf8)
        let sealed = try AES128GCM.seal(key: zeroKey, nonce: zeroNonce, plaintext: plaintext)
        for index in sealed.indices {
            var altered = sealed
            altered[index] ^= 0x80
            #expect(throws: WebPushError.authenticationFailed) { try AES128GCM.open(key: zeroKey, nonce: zeroNonce, sealed: altered[...]) }
        }
        var otherKey = zeroKey
        otherKey[0] = 1
        #expect(throws: WebPushError.authenticationFailed) { try AES128GCM.open(key: otherKey, nonce: zeroNonce, sealed: sealed[...]) }
        #expect(throws: WebPushError.authenticationFailed) { try AES128GCM.open(key: zeroKey, nonce: zeroNonce, sealed: sealed.prefix(15)) }
    }
}

import Testing
@testable import VigilPush

/// HKDF-SHA256 against RFC 5869 Appendix A.1 (test case 1), each step apart.
@Suite struct HKDFTests {
    @Test func rfc5869TestCase1() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt = TestKeys.hex("000102030405060708090a0b0c")
        let info = TestKeys.hex("f0f1f2f3f4f5f6f7f8f9")
        let prk = try HKDF.extract(salt: salt, inputKeyMaterial: ikm)
        #expect(prk == TestKeys.hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"))
        // The test's OKM is 42 bytes; Web Push takes one block, so its first 32 and a shorter prefix.
        let okm = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
        #expect(try HKDF.expand(pseudorandomKey: prk, info: info, length: 32) == TestKeys.hex(okm))
        #expect(try HKDF.expand(pseudorandomKey: prk, info: info, length: 12) == TestKeys.hex(String(okm.prefix(24))))
    }
}

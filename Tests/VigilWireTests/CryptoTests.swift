import Testing
@testable import VigilWire
import VigilTestSupport

/// libcrypto wrappers against published vectors (FIPS 180 for SHA-1, RFC 4648 §10).
@Suite struct CryptoTests {
    func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    @Test func sha256Vectors() {
        // FIPS 180-2 appendix B examples.
        #expect(hex(Crypto.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(Crypto.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func sha1Vectors() {
        #expect(hex(Crypto.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(hex(Crypto.sha1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    }

    @Test func base64Vectors() {
        let vectors = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
                       ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            #expect(Crypto.base64Encode(Array(plain.utf8)) == encoded)
            #expect(Crypto.base64Decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func strictDecoding() {
        for bad in ["Zg", "Zg=", "Zh==", "Zm9=", "Z===", "====", "Zm9v\n", " Zm9v", "Zm-v", "Zg==Zg==", "Z=g="] {
            #expect(Crypto.base64Decode(bad) == nil, "\(bad)")
        }
    }

    @Test func randomRoundTrip() {
        var rng = SplitMix64(state: 9)
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            #expect(Crypto.base64Decode(Crypto.base64Encode(bytes)) == bytes)
        }
    }
}

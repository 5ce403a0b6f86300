import Testing
@testable import VigilPush

/// Unpadded base64url: RFC 4648 §10's vectors in the URL alphabet, padding tolerated only when
/// right, and every non-canonical text refused.
@Suite struct Base64URLCodingTests {
    @Test func vectors() {
        let vectors = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            #expect(Base64URLCoding.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URLCoding.decode(encoded) == Array(plain.utf8))
        }
    }

    @Test func urlAlphabet() {
        #expect(Base64URLCoding.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URLCoding.decode("-_-_") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URLCoding.decode("+/+/") == nil, "the standard alphabet's characters are not base64url")
    }

    @Test func paddingOnlyWhenExact() {
        #expect(Base64URLCoding.decode("Zg==") == Array("f".utf8))
        #expect(Base64URLCoding.decode("Zm8=") == Array("fo".utf8))
        for bad in ["Zg=", "Zg===", "Zm8==", "Z", "Zh", "Zm9", "Zg==Zg", " Zg", "Zg\n", "Z.g"] {
            #expect(Base64URLCoding.decode(bad) == nil, "\(bad)")
        }
    }

    @Test func roundTripsEveryLength() {
        var bytes: [UInt8] = []
        for n in 0..<100 {
            #expect(Base64URLCoding.decode(Base64URLCoding.encode(bytes)) == bytes)
            bytes.append(UInt8(truncatingIfNeeded: n &* 37 &+ 11))
        }
    }
}

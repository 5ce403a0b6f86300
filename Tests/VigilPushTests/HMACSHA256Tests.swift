import Testing
@testable import VigilPush

/// HMAC-SHA256 against RFC 4231 test cases 1 and 2; the comparison's answers.
@Suite struct HMACSHA256Tests {
    @Test func rfc4231() {
        #expect(HMACSHA256.mac(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
                == TestKeys.hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        #expect(HMACSHA256.mac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == TestKeys.hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test func comparison() {
        let a = [UInt8](repeating: 7, count: 32)
        var b = a
        #expect(HMACSHA256.equal(a, b))
        b[31] = 8
        #expect(!HMACSHA256.equal(a, b))
        #expect(!HMACSHA256.equal(a, Array(a.prefix(31))))
    }
}

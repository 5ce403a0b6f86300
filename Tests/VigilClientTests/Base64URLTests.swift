import Foundation
import Testing
@testable import VigilClient

@Suite struct Base64URLTests {
    private func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func encodesAsFoundationDoesWithoutPaddingAndDecodesBack() {
        var state: UInt64 = 0x1234_5678
        for n in 0..<100 {
            let bytes = (0..<n).map { _ -> UInt8 in
                state = state &* 6_364_136_223_846_793_005 &+ 1
                return UInt8(truncatingIfNeeded: state >> 56)
            }
            let text = E2E.base64urlEncode(bytes)
            #expect(text == reference(bytes), "\(n) bytes")
            #expect(E2E.base64urlDecode(text) == bytes, "\(n) bytes")
        }
        #expect(E2E.base64urlEncode([0xFB, 0xFF]) == "-_8")
    }

    @Test func refusesWhatIsNotCanonicalUnpaddedBase64url() {
        #expect(E2E.base64urlDecode("AA") == [0])
        #expect(E2E.base64urlDecode("AB") == nil)        // unused bits not zero
        #expect(E2E.base64urlDecode("AAB") == nil)
        #expect(E2E.base64urlDecode("AAAAA") == nil)     // 4n + 1 characters
        #expect(E2E.base64urlDecode("AA==") == nil)      // padding
        #expect(E2E.base64urlDecode("A+A/") == nil)      // base64, not base64url
        #expect(E2E.base64urlDecode("AA AA") == nil)
        #expect(E2E.base64urlDecode("é") == nil)
        #expect(E2E.base64urlDecode("") == [])
    }
}

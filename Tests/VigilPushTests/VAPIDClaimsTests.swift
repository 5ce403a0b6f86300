import Testing
@testable import VigilPush

/// The JWT's header and claims, byte for byte, and JSON string escaping.
@Suite struct VAPIDClaimsTests {
    @Test func exactJSON() throws {
        let claims = VAPIDClaims(audience: "https://push.example.net", expiry: 1_453_523_768, subject: try VAPIDSubject("mailto:push@example.com"))
        #expect(String(decoding: claims.json, as: UTF8.self) == #"{"aud":"https://push.example.net","exp":1453523768,"sub":"mailto:push@example.com"}"#)
        #expect(String(decoding: VAPIDClaims.headerJSON, as: UTF8.self) == #"{"typ":"JWT","alg":"ES256"}"#)
        // RFC 8292 §2.4's example header, as base64url.
        #expect(Base64URLCoding.encode(VAPIDClaims.headerJSON) == "eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9")
    }

    @Test func quoting() {
        #expect(VAPIDClaims.quoted(#"a"b\c"#) == #""a\"b\\c""#)
        #expect(VAPIDClaims.quoted("x\u{01}\n") == #""x\u0001\u000a""#)
        #expect(VAPIDClaims.quoted("é") == "\"é\"")
    }
}

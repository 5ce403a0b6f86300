import Testing
@testable import VigilPush

/// RFC 8291 Appendix A's intermediate values, step by step: a wrong info string or a swapped
/// salt shows at the step that uses it.
@Suite struct WebPushKeyScheduleTests {
    @Test func intermediateValues() throws {
        let keys = try WebPushKeySchedule(
            sharedSecret: RFC8291Vector.bytes(RFC8291Vector.sharedSecret),
            authSecret: RFC8291Vector.bytes(RFC8291Vector.authSecret),
            userAgentKey: P256PublicKey(base64URL: RFC8291Vector.userAgentPublic),
            applicationServerKey: P256PublicKey(base64URL: RFC8291Vector.applicationServerPublic),
            salt: RFC8291Vector.bytes(RFC8291Vector.salt))
        #expect(Base64URLCoding.encode(keys.authenticatedKey) == RFC8291Vector.authenticatedKey)
        #expect(Base64URLCoding.encode(keys.inputKeyMaterial) == RFC8291Vector.inputKeyMaterial)
        #expect(Base64URLCoding.encode(keys.pseudorandomKey) == RFC8291Vector.pseudorandomKey)
        #expect(Base64URLCoding.encode(keys.contentEncryptionKey) == RFC8291Vector.contentEncryptionKey)
        #expect(Base64URLCoding.encode(keys.nonce) == RFC8291Vector.nonce)
    }

    @Test func keyInfoIsTheRFCs() throws {
        let info = WebPushKeySchedule.webPushInfo + RFC8291Vector.bytes(RFC8291Vector.userAgentPublic)
            + RFC8291Vector.bytes(RFC8291Vector.applicationServerPublic)
        #expect(Base64URLCoding.encode(info) == RFC8291Vector.keyInfo)
    }
}

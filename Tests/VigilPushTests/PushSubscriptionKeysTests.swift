import Testing
@testable import VigilPush

/// A subscription's keys from their JSON texts, and each way they can be wrong.
@Suite struct PushSubscriptionKeysTests {
    @Test func parsesTheRFCSubscription() throws {
        let keys = try RFC8291Vector.subscription()
        #expect(keys.p256dh.base64URL == RFC8291Vector.userAgentPublic)
        #expect(keys.authSecret == RFC8291Vector.bytes(RFC8291Vector.authSecret))
    }

    @Test func refusesBadKeysAndSecrets() {
        #expect(throws: WebPushError.wrongLength(what: "auth", expected: 16, actual: 12)) {
            try PushSubscriptionKeys(p256dh: RFC8291Vector.userAgentPublic, auth: "AAAAAAAAAAAAAAAA")
        }
        #expect(throws: WebPushError.notBase64URL(what: "auth")) { try PushSubscriptionKeys(p256dh: RFC8291Vector.userAgentPublic, auth: "BTBZMqHH6r4Tts7J/aSIgg") }
        #expect(throws: WebPushError.key(.notBase64URL(what: "P-256 public key"))) { try PushSubscriptionKeys(p256dh: "?", auth: RFC8291Vector.authSecret) }
        var offCurve = RFC8291Vector.bytes(RFC8291Vector.userAgentPublic)
        offCurve[64] ^= 1
        #expect(throws: WebPushError.key(.notOnCurve)) {
            try PushSubscriptionKeys(p256dh: Base64URLCoding.encode(offCurve), auth: RFC8291Vector.authSecret)
        }
    }
}

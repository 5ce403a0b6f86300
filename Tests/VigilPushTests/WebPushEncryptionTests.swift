import Testing
@testable import VigilPush

/// The encrypting side against RFC 8291 Appendix A byte for byte, its limits, and round trips
/// through the independent decrypting side with fresh keys.
@Suite struct WebPushEncryptionTests {
    @Test func reproducesTheRFC8291Body() throws {
        let ephemeral = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.applicationServerPrivate))
        #expect(ephemeral.publicKey.base64URL == RFC8291Vector.applicationServerPublic)
        let body = try WebPushEncryption.encrypt(RFC8291Vector.plaintext, for: RFC8291Vector.subscription(),
                                                 ephemeralKey: ephemeral, salt: RFC8291Vector.bytes(RFC8291Vector.salt))
        #expect(Base64URLCoding.encode(body) == RFC8291Vector.body)
        #expect(Array(body.prefix(WebPushEncryption.headerByteCount)) == RFC8291Vector.bytes(RFC8291Vector.header))
    }

    @Test func theRFCBodyDecryptsWithTheUserAgentKey() throws {
        let userAgent = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.userAgentPrivate))
        #expect(userAgent.publicKey.base64URL == RFC8291Vector.userAgentPublic)
        let plaintext = try WebPushDecryption.decrypt(RFC8291Vector.bytes(RFC8291Vector.body), privateKey: userAgent,
                                                      authSecret: RFC8291Vector.bytes(RFC8291Vector.authSecret))
        #expect(plaintext == RFC8291Vector.plaintext)
    }
}

extension WebPushEncryptionTests {
    @Test func freshKeysRoundTripAtEverySizeClass() throws {
        let agent = try P256PrivateKey.generate()
        let subscription = try PushSubscriptionKeys(p256dh: agent.publicKey, authSecret: [UInt8](repeating: 0x5A, count: 16))
        for count in [0, 1, 15, 16, 17, 100, 1000, WebPushEncryption.maxPlaintextByteCount] {
            let notice = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let body = try WebPushEncryption.encrypt(notice, for: subscription)
            #expect(body.count == 86 + count + 1 + 16)
            #expect(try WebPushDecryption.decrypt(body, privateKey: agent, authSecret: subscription.authSecret) == notice)
        }
    }

    @Test func eachMessageHasItsOwnKeyAndSalt() throws {
        let subscription = try RFC8291Vector.subscription()
        let a = try WebPushEncryption.encrypt(RFC8291Vector.plaintext, for: subscription)
        let b = try WebPushEncryption.encrypt(RFC8291Vector.plaintext, for: subscription)
        #expect(a.prefix(16) != b.prefix(16), "salt reused")
        #expect(a[21..<86] != b[21..<86], "ephemeral key reused")
        #expect(a[16..<21] == [0, 0, 0x10, 0, 65], "rs 4096, idlen 65")
    }

    @Test func theLargestNoticeFillsTheBodyLimitExactly() throws {
        let subscription = try RFC8291Vector.subscription()
        #expect(WebPushEncryption.maxPlaintextByteCount == 3993)
        let body = try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3993), for: subscription)
        #expect(body.count == WebPushEncryption.maxBodyByteCount)
        #expect(throws: WebPushError.plaintextTooLarge(count: 3994, limit: 3993)) {
            try WebPushEncryption.encrypt([UInt8](repeating: 0x41, count: 3994), for: subscription)
        }
        #expect(throws: WebPushError.plaintextTooLarge(count: 1 << 20, limit: 3993)) {
            try WebPushEncryption.encrypt([UInt8](repeating: 0, count: 1 << 20), for: subscription)
        }
    }

    @Test func paddingHidesTheLengthWithinTheLimit() throws {
        let agent = try P256PrivateKey.generate()
        let subscription = try PushSubscriptionKeys(p256dh: agent.publicKey, authSecret: [UInt8](repeating: 1, count: 16))
        let body = try WebPushEncryption.encrypt(Array("short".utf8), for: subscription, padding: 200)
        #expect(body.count == 86 + 5 + 1 + 200 + 16)
        #expect(try WebPushDecryption.decrypt(body, privateKey: agent, authSecret: subscription.authSecret) == Array("short".utf8))
        #expect(throws: WebPushError.paddingTooLarge(count: 3989, limit: 3988)) {
            try WebPushEncryption.encrypt(Array("short".utf8), for: subscription, padding: 3989)
        }
        #expect(throws: WebPushError.paddingTooLarge(count: -1, limit: 3988)) {
            try WebPushEncryption.encrypt(Array("short".utf8), for: subscription, padding: -1)
        }
    }

    @Test func aSaltOfAnotherLengthIsRefused() throws {
        let ephemeral = try P256PrivateKey.generate()
        #expect(throws: WebPushError.wrongLength(what: "salt", expected: 16, actual: 15)) {
            try WebPushEncryption.encrypt([1], for: RFC8291Vector.subscription(), ephemeralKey: ephemeral, salt: [UInt8](repeating: 0, count: 15))
        }
    }
}

import Testing
@testable import VigilPush

/// The receiving side refuses every hostile body with a typed error: cut at every length, any
/// byte changed, another key or auth secret, a key id that is not a key, more than one record,
/// a record without its delimiter.
@Suite struct WebPushDecryptionTests {
    let agent: P256PrivateKey
    let auth: [UInt8]
    let body: [UInt8]

    init() throws {
        agent = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.userAgentPrivate))
        auth = RFC8291Vector.bytes(RFC8291Vector.authSecret)
        body = RFC8291Vector.bytes(RFC8291Vector.body)
    }

    @Test func everyTruncationFails() {
        for count in 0..<body.count {
            #expect(throws: WebPushError.self) { try WebPushDecryption.decrypt(Array(body.prefix(count)), privateKey: agent, authSecret: auth) }
        }
    }

    @Test func everyAlteredByteFailsButTheRecordSize() throws {
        for index in body.indices {
            var altered = body
            altered[index] ^= 0x01
            if (16..<20).contains(index) {
                // RFC 8188 does not authenticate rs (no key is derived from it): while the one
                // record still fits, another rs reads the same notice.
                #expect(try WebPushDecryption.decrypt(altered, privateKey: agent, authSecret: auth) == RFC8291Vector.plaintext)
            } else {
                #expect(throws: WebPushError.self, "byte \(index)") { try WebPushDecryption.decrypt(altered, privateKey: agent, authSecret: auth) }
            }
        }
    }

    @Test func anotherKeyOrSecretFails() throws {
        #expect(throws: WebPushError.authenticationFailed) { try WebPushDecryption.decrypt(body, privateKey: P256PrivateKey.generate(), authSecret: auth) }
        var otherAuth = auth
        otherAuth[0] ^= 1
        #expect(throws: WebPushError.authenticationFailed) { try WebPushDecryption.decrypt(body, privateKey: agent, authSecret: otherAuth) }
        #expect(throws: WebPushError.wrongLength(what: "auth", expected: 16, actual: 15)) {
            try WebPushDecryption.decrypt(body, privateKey: agent, authSecret: Array(auth.prefix(15)))
        }
    }

    @Test func aKeyIDThatIsNotAKeyFails() {
        var shortID: [UInt8] = []
        ContentCodingHeader(salt: Array(body.prefix(16)), recordSize: 4096, keyID: Array(body[21..<85])).encode(into: &shortID)
        #expect(throws: WebPushError.badKeyID(length: 64)) { try WebPushDecryption.decrypt(shortID + body[86...], privateKey: agent, authSecret: auth) }
        var offCurve = body
        offCurve[50] ^= 0x10
        #expect(throws: WebPushError.key(.notOnCurve)) { try WebPushDecryption.decrypt(offCurve, privateKey: agent, authSecret: auth) }
    }

    @Test func moreThanOneRecordFails() {
        // rs 18: the 58-byte record of the example (41 + delimiter + tag) does not fit one record.
        var small = body
        small[16..<20] = [0, 0, 0, 18]
        #expect(throws: WebPushError.notOneRecord(count: 58, recordSize: 18)) { try WebPushDecryption.decrypt(small, privateKey: agent, authSecret: auth) }
    }

    @Test func aRecordWithoutItsDelimiterFails() throws {
        #expect(throws: WebPushError.badPadding) { try WebPushDecryption.removePadding(Array("no delimiter".utf8)) }
        #expect(throws: WebPushError.badPadding) { try WebPushDecryption.removePadding([0x41, 0x01, 0, 0]) }
        #expect(throws: WebPushError.badPadding) { try WebPushDecryption.removePadding([0, 0, 0]) }
        #expect(throws: WebPushError.badPadding) { try WebPushDecryption.removePadding([]) }
        #expect(try WebPushDecryption.removePadding([0x41, 0x02, 0, 0]) == [0x41])
        #expect(try WebPushDecryption.removePadding([0x02]) == [])
    }
}

import Testing
@testable import VigilPush

/// Key pairs from a scalar, from PEM in both formats OpenSSL writes, and freshly generated; every
/// unusable input refused with its reason.
@Suite struct P256PrivateKeyTests {
    @Test func scalarGivesItsPublicPoint() throws {
        #expect(try P256PrivateKey(scalar: TestKeys.sec1Scalar).publicKey.bytes == TestKeys.sec1Public)
        let rfc = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.applicationServerPrivate))
        #expect(rfc.publicKey.base64URL == RFC8291Vector.applicationServerPublic)
    }

    @Test func scalarsOutOfRangeAreRefused() throws {
        let zero = [UInt8](repeating: 0, count: 32)
        #expect(throws: PushKeyError.scalarOutOfRange) { try P256PrivateKey(scalar: zero) }
        #expect(throws: PushKeyError.scalarOutOfRange) { try P256PrivateKey(scalar: TestKeys.order) }
        #expect(throws: PushKeyError.scalarOutOfRange) { try P256PrivateKey(scalar: [UInt8](repeating: 0xFF, count: 32)) }
        var belowOrder = TestKeys.order
        belowOrder[31] -= 1
        _ = try P256PrivateKey(scalar: belowOrder)  // n − 1 is the largest valid scalar
        #expect(throws: PushKeyError.wrongLength(what: "P-256 private scalar", expected: 32, actual: 31)) {
            try P256PrivateKey(scalar: Array(TestKeys.sec1Scalar.prefix(31)))
        }
    }

    @Test func readsSEC1AndPKCS8() throws {
        #expect(try P256PrivateKey(pem: TestKeys.sec1).publicKey.bytes == TestKeys.sec1Public)
        // A file with the compressed point still yields the uncompressed form the Push API uses.
        #expect(try P256PrivateKey(pem: TestKeys.sec1Compressed).publicKey.bytes == TestKeys.sec1Public)
        let pkcs8 = try P256PrivateKey(pem: TestKeys.sec1).pemPKCS8()
        #expect(pkcs8.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(try P256PrivateKey(pem: pkcs8).publicKey.bytes == TestKeys.sec1Public)
    }

    @Test func refusesUnusablePEM() {
        #expect(throws: PushKeyError.unreadablePEM) { try P256PrivateKey(pem: TestKeys.encrypted) }
        #expect(throws: PushKeyError.unreadablePEM) { try P256PrivateKey(pem: "") }
        #expect(throws: PushKeyError.unreadablePEM) { try P256PrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
        #expect(throws: PushKeyError.notP256(found: "EC on secp384r1")) { try P256PrivateKey(pem: TestKeys.p384) }
        #expect(throws: PushKeyError.notP256(found: "ED25519")) { try P256PrivateKey(pem: TestKeys.ed25519) }
    }

    @Test func generatedKeysDiffer() throws {
        let a = try P256PrivateKey.generate(), b = try P256PrivateKey.generate()
        #expect(a.publicKey != b.publicKey)
        #expect(try P256PublicKey(bytes: a.publicKey.bytes) == a.publicKey)
    }
}

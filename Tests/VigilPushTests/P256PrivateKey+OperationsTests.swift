import Testing
@testable import VigilPush

/// ECDH against the RFC's published secret and symmetric between fresh keys; signatures that
/// OpenSSL's verifier accepts; the PEM text's round trip.
@Suite struct P256PrivateKeyOperationsTests {
    @Test func ecdhMatchesTheRFC() throws {
        let server = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.applicationServerPrivate))
        let agent = try P256PrivateKey(scalar: RFC8291Vector.bytes(RFC8291Vector.userAgentPrivate))
        #expect(Base64URLCoding.encode(try server.sharedSecret(with: agent.publicKey)) == RFC8291Vector.sharedSecret)
        #expect(Base64URLCoding.encode(try agent.sharedSecret(with: server.publicKey)) == RFC8291Vector.sharedSecret)
    }

    @Test func ecdhIsSymmetric() throws {
        for _ in 0..<20 {
            let a = try P256PrivateKey.generate(), b = try P256PrivateKey.generate()
            #expect(try a.sharedSecret(with: b.publicKey) == b.sharedSecret(with: a.publicKey))
        }
    }

    @Test func signaturesVerify() throws {
        let key = try P256PrivateKey.generate()
        let message = Array("eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.e30".utf8)
        let der = try key.signatureDER(of: message)
        #expect(try TestKeys.verifies(der: der, message: message, key: key.publicKey))
        #expect(try !TestKeys.verifies(der: der, message: message + [0x2E], key: key.publicKey))
        #expect(try !TestKeys.verifies(der: der, message: message, key: P256PrivateKey.generate().publicKey))
    }

    @Test func pemRoundTrip() throws {
        let key = try P256PrivateKey.generate()
        let pem = try key.pemPKCS8()
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        let again = try P256PrivateKey(pem: pem)
        #expect(again.publicKey == key.publicKey)
        let other = try P256PrivateKey.generate()
        #expect(try again.sharedSecret(with: other.publicKey) == key.sharedSecret(with: other.publicKey))
    }
}

import Testing
@testable import VigilPush

/// VAPID tokens as a push service reads them: three base64url parts, the exact header and claims,
/// a 64-byte signature that OpenSSL verifies against `k`; the header value's form; lifetimes.
@Suite struct VAPIDSignerTests {
    let signer: VAPIDSigner
    let endpoint: PushEndpoint

    init() throws {
        signer = VAPIDSigner(key: try P256PrivateKey.generate(), subject: try VAPIDSubject("mailto:ops@vigil.example"))
        endpoint = try PushEndpoint("https://push.example.net:8443/wpush/v2/abc")
    }

    /// The JWT's parts decoded: header, claims, raw signature; and the signing input.
    func parts(_ jwt: String) throws -> (header: String, claims: String, signature: [UInt8], input: [UInt8]) {
        let pieces = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(pieces.count == 3)
        let header = try #require(Base64URLCoding.decode(pieces[0]))
        let claims = try #require(Base64URLCoding.decode(pieces[1]))
        let signature = try #require(Base64URLCoding.decode(pieces[2]))
        return (String(decoding: header, as: UTF8.self), String(decoding: claims, as: UTF8.self), signature,
                Array((pieces[0] + "." + pieces[1]).utf8))
    }

    @Test func authorizationHeaderAsAPushServiceReadsIt() throws {
        let value = try signer.authorization(for: endpoint, now: 1_700_000_000)
        #expect(value.hasPrefix("vapid t="))
        let fields = value.dropFirst("vapid ".count).split(separator: ",").map { $0.drop { $0 == " " } }
        try #require(fields.count == 2 && fields[0].hasPrefix("t=") && fields[1].hasPrefix("k="))
        #expect(value.contains(", k="), "the fields are separated by a comma and one space")
        let k = String(fields[1].dropFirst(2))
        #expect(k == signer.applicationServerKey)
        #expect(k.utf8.count == 87)
        let key = try P256PublicKey(base64URL: k)
        let jwt = try parts(String(fields[0].dropFirst(2)))
        #expect(jwt.header == #"{"typ":"JWT","alg":"ES256"}"#)
        #expect(jwt.claims == #"{"aud":"https://push.example.net:8443","exp":1700043200,"sub":"mailto:ops@vigil.example"}"#)
        #expect(jwt.signature.count == 64)
        #expect(try TestKeys.verifies(der: ECDSASignature.der(raw: jwt.signature), message: jwt.input, key: key))
        // Another key does not verify it: the check can fail.
        #expect(try !TestKeys.verifies(der: ECDSASignature.der(raw: jwt.signature), message: jwt.input, key: P256PrivateKey.generate().publicKey))
    }

    @Test func manyTokensVerify() throws {
        for i in 0..<200 {
            let jwt = try parts(signer.token(VAPIDClaims(audience: "https://a.example", expiry: Int64(i), subject: signer.subject)))
            #expect(try TestKeys.verifies(der: ECDSASignature.der(raw: jwt.signature), message: jwt.input, key: signer.key.publicKey))
        }
    }

    @Test func lifetimes() throws {
        let day = try parts(String(signer.authorization(for: endpoint, now: 100, lifetime: 86_400).dropFirst(8).prefix { $0 != "," }))
        #expect(day.claims.contains(#""exp":86500,"#))
        #expect(throws: VAPIDError.badLifetime(86_401)) { try signer.authorization(for: endpoint, now: 100, lifetime: 86_401) }
        #expect(throws: VAPIDError.badLifetime(0)) { try signer.authorization(for: endpoint, now: 100, lifetime: 0) }
        #expect(throws: VAPIDError.badLifetime(-5)) { try signer.authorization(for: endpoint, now: 100, lifetime: -5) }
    }
}

import Testing
import VigilCore
@testable import VigilNATS

/// nkeys, `.creds` files, base64url, and what INFO and CONNECT carry for them. The expected
/// texts were made by an independent implementation (Python's base64.b32encode and
/// binascii.crc_hqx, Ed25519 from the `cryptography` package) from RFC 8032's first test key.
@Suite struct NKeyTests {
    /// RFC 8032, 7.1, TEST 1: the secret key and its public key.
    static let rfcSeed: [UInt8] = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    static let rfcPublic: [UInt8] = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    static let seedText = "SUAJ2YNRTXX72WTAXKCEV5ES5QWMIRCJYVUXWMTJDFYDXLADDSXH6YALCA"
    static let publicText = "UDLVVGABQKYQVN6VJP7NHSLEA45A5YLS6PNKMIZFV4BBU2HXA5IRUVAL"

    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    @Test func decodesAndEncodesASeedAndAPublicKey() throws {
        let seed = try NKey.decodeSeed(Self.seedText)
        #expect(seed.role == .user && seed.raw == Self.rfcSeed)
        #expect(NKey.encodeSeed(seed) == Self.seedText)
        #expect(try NKey.decodeSeed("  \(Self.seedText)\r\n") == seed)
        #expect(NKey.encodePublicKey(role: .user, raw: Self.rfcPublic) == Self.publicText)
        #expect(try NKey.decodePublicKey(Self.publicText, role: .user) == Self.rfcPublic)
        #expect(throws: NKeyError.unknownRole) { try NKey.decodePublicKey(Self.publicText, role: .account) }
        // Every role round-trips and starts with its letter.
        for role in NKey.Role.allCases {
            let text = NKey.encodeSeed(NKey.Seed(role: role, raw: Self.rfcSeed))
            #expect(text.hasPrefix("S\(role.letter)") && text.count == 58)
            #expect(try NKey.decodeSeed(text).role == role)
            #expect(NKey.encodePublicKey(role: role, raw: Self.rfcPublic).hasPrefix(String(role.letter)))
        }
    }

    @Test func refusesDamagedSeedsWithoutQuotingThem() throws {
        var changed = Array(Self.seedText)
        changed[30] = changed[30] == "Q" ? "R" : "Q"
        #expect(throws: NKeyError.badChecksum) { try NKey.decodeSeed(String(changed)) }
        #expect(throws: NKeyError.badLength(what: "seed", expected: 58, got: 57)) { try NKey.decodeSeed(Self.seedText.dropLast()) }
        #expect(throws: NKeyError.notBase32) { try NKey.decodeSeed(Self.seedText.lowercased()) }
        // A public key is no seed (56 characters), a seed with the wrong first bits is not a seed.
        #expect(throws: NKeyError.badLength(what: "seed", expected: 58, got: 56)) { try NKey.decodeSeed(Self.publicText) }
        var notSeed: [UInt8] = [NKey.Role.user.rawValue, 0] + Self.rfcSeed
        let crc = CRC16.xmodem(notSeed[...])
        notSeed += [UInt8(crc & 0xFF), UInt8(crc >> 8)]
        #expect(throws: NKeyError.notASeed) { try NKey.decodeSeed(Base32.encode(notSeed)) }
        for error in [NKeyError.badChecksum, .notBase32, .notASeed, .unknownRole] {
            #expect(!error.description.contains("SUAJ"))
        }
        // Printing a seed shows its role only.
        let seed = try NKey.decodeSeed(Self.seedText)
        #expect("\(seed)" == "<nkey seed, U role>" && !String(reflecting: seed).contains("157"))
    }

    @Test func base32AndCRC16MatchTheirReferences() {
        // RFC 4648, 10 (without padding); CRC-16/XMODEM's check value.
        #expect(Base32.encode(Array("foobar".utf8)) == "MZXW6YTBOI")
        #expect(Base32.decode(Array("MZXW6YTBOI".utf8)) == Array("foobar".utf8))
        #expect(Base32.decode(Array("MZXW6YTBOJ".utf8)) == nil)  // non-zero trailing bits
        #expect(Base32.decode(Array("M".utf8)) == nil)
        #expect(CRC16.xmodem(Array("123456789".utf8)[...]) == 0x31C3)
    }

    static let jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln"
    static let creds = """
        -----BEGIN NATS USER JWT-----
        \(jwt)
        ------END NATS USER JWT------

        ************************* IMPORTANT *************************
        NKEY Seed printed below can be used to sign and prove identity.
        NKEYs are sensitive and should be treated as secrets.

        -----BEGIN USER NKEY SEED-----
        \(seedText)
        ------END USER NKEY SEED------

        *************************************************************
        """

    @Test func parsesACredsFile() throws {
        let creds = try NATSCredentials.parse(Array(Self.creds.utf8))
        #expect(creds.jwt == Self.jwt && creds.seed.raw == Self.rfcSeed)
        // CRLF line ends, no trailing text.
        let crlf = Self.creds.split(separator: "\n", omittingEmptySubsequences: false).prefix(12).joined(separator: "\r\n")
        #expect(try NATSCredentials.parse(Array(crlf.utf8)) == creds)
    }

    @Test(arguments: [
        ("", NATSCredentialsError.missingBlock("the user JWT")),
        ("-----BEGIN NATS USER JWT-----\nabc.def.ghi\n------END NATS USER JWT------\n", .missingBlock("the nkey seed")),
        ("-----A-----\nabc.def\n-----B-----\n-----C-----\n\(seedText)\n-----D-----\n", .badJWT("not three base64url parts separated by dots")),
        ("-----A-----\na!c.def.ghi\n-----B-----\n-----C-----\n\(seedText)\n-----D-----\n", .badJWT("not three base64url parts separated by dots")),
        ("-----A-----\na.b.c\n-----B-----\n-----C-----\nSUAJ\n-----D-----\n", .badSeed(.badLength(what: "seed", expected: 58, got: 4))),
        ("-----A-----\na.b.c\n-----B-----\n-----C-----\n\(NKey.encodeSeed(NKey.Seed(role: .account, raw: rfcSeed)))\n-----D-----\n", .badSeed(.unknownRole)),
    ])
    func refusesABrokenCredsFile(_ text: String, _ expected: NATSCredentialsError) {
        #expect(throws: expected) { try NATSCredentials.parse(Array(text.utf8)) }
        do {
            _ = try NATSCredentials.parse(Array(text.utf8))
        } catch {
            #expect(!error.description.contains("SUAJ2"))
        }
    }

    @Test func boundsACredsFile() {
        let big = [UInt8](repeating: 45, count: NATSCredentials.maxBytes + 1)
        #expect(throws: NATSCredentialsError.tooLarge(limit: NATSCredentials.maxBytes)) { try NATSCredentials.parse(big) }
        let longJWT = "-----A-----\n" + String(repeating: "a", count: NATSCredentials.maxJWTBytes) + ".b.c\n-----B-----\n-----C-----\n\(Self.seedText)\n-----D-----\n"
        #expect(throws: NATSCredentialsError.badJWT("longer than \(NATSCredentials.maxJWTBytes) bytes")) { try NATSCredentials.parse(Array(longJWT.utf8)) }
    }

    @Test func connectCarriesTheKeyOrJWTAndTheSignature() throws {
        let seed = try NKey.decodeSeed(Self.seedText)
        func connect(_ credentials: NATSConnectOptions.Credentials, tls: Bool = false) throws -> JSONValue {
            var out: [UInt8] = []
            NATSConnectOptions(name: "n", credentials: credentials, tlsRequired: tls).encode(into: &out, signature: "c2ln")
            #expect(out.starts(with: Array("CONNECT ".utf8)) && out.suffix(2) == [13, 10])
            return try JSONParser.parse(Array(out.dropFirst(8).dropLast(2)), maxDepth: 4)
        }
        let nkey = try connect(.nkey(publicKey: Self.publicText, seed: seed), tls: true).object!
        #expect(nkey["nkey"]?.string == Self.publicText && nkey["sig"]?.string == "c2ln" && nkey["jwt"] == nil)
        #expect(nkey["tls_required"]?.bool == true)
        let jwt = try connect(.jwt(Self.jwt, seed: seed)).object!
        #expect(jwt["jwt"]?.string == Self.jwt && jwt["sig"]?.string == "c2ln" && jwt["nkey"] == nil)
        // The seed itself never goes out.
        var out: [UInt8] = []
        NATSConnectOptions(name: "n", credentials: .jwt(Self.jwt, seed: seed)).encode(into: &out, signature: "x")
        #expect(!String(decoding: out, as: UTF8.self).contains(Self.seedText))
        #expect(NATSConnectOptions.Credentials.jwt(Self.jwt, seed: seed).signingSeed == seed)
        #expect(NATSConnectOptions.Credentials.token("t").signingSeed == nil)
    }

    @Test func infoCarriesTheNonceAndTLSOffers() throws {
        let info = try NATSServerInfo.decode(Array(#"{"max_payload":1024,"nonce":"Xy-z_9","tls_available":true}"#.utf8)[...], payloadCap: 4096)
        #expect(info.nonce == "Xy-z_9" && info.tlsAvailable && !info.tlsRequired)
        #expect(try NATSServerInfo.decode(Array(#"{"max_payload":1}"#.utf8)[...], payloadCap: 4096).nonce == "")
        let long = String(repeating: "n", count: NATSServerInfo.maxNonceBytes + 1)
        #expect(throws: NATSProtocolError.self) { try NATSServerInfo.decode(Array(#"{"max_payload":1,"nonce":"\#(long)"}"#.utf8)[...], payloadCap: 4096) }
        #expect(throws: NATSProtocolError.self) { try NATSServerInfo.decode(Array(#"{"max_payload":1,"nonce":"a b"}"#.utf8)[...], payloadCap: 4096) }
    }

    @Test func urlsTakeTLSAndHostNames() throws {
        let tls = try NATSServerURL.parse("tls://nats-1.example.org:4443").get()
        #expect(tls == NATSServerURL(host: "nats-1.example.org", port: 4443, tls: true) && tls.description == "tls://nats-1.example.org:4443")
        #expect(try NATSServerURL.parse("TLS://[::1]").get().description == "tls://[::1]:4222")
        #expect(try NATSServerURL.parse("localhost:4222").get() == NATSServerURL(host: "localhost", port: 4222))
        #expect(try NATSServerURL.parse("nats://a.b.").get().host == "a.b.")
        for bad in ["nats://-a.example", "nats://a..b", "nats://a_b", "nats://" + String(repeating: "a", count: 64) + ".example", "nats://a b"] {
            #expect(throws: NATSURLError.self, "\(bad)") { try NATSServerURL.parse(bad).get() }
        }
        #expect(throws: NATSURLError.unsupported("scheme http:// (use nats:// or tls://)")) { try NATSServerURL.parse("http://a").get() }
    }
}

import COpenSSL
@testable import VigilPush

/// Key fixtures written by the `openssl` command (so not by the code under test), and an
/// independent ES256 verifier over OpenSSL's EVP interface for the signature tests.
enum TestKeys {
    /// `openssl ecparam -name prime256v1 -genkey -noout`: SEC1, uncompressed public point.
    static let sec1 = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIGOB6N+o5w4Sq9/aT+He7zUdrlK90RzTEl7oUqHp3C7RoAoGCCqGSM49
        AwEHoUQDQgAEAdtwxIp5g8o2OCsdZSV8EVBz0JKokbDIHuWDS0aTcmwyQz7RSyeI
        CboCIu5cTJ34CPYPzKQQRfAQ0NOP5wSS7A==
        -----END EC PRIVATE KEY-----
        """
    /// The same key after `openssl ec -conv_form compressed`: its file holds the compressed point.
    static let sec1Compressed = """
        -----BEGIN EC PRIVATE KEY-----
        MFcCAQEEIGOB6N+o5w4Sq9/aT+He7zUdrlK90RzTEl7oUqHp3C7RoAoGCCqGSM49
        AwEHoSQDIgACAdtwxIp5g8o2OCsdZSV8EVBz0JKokbDIHuWDS0aTcmw=
        -----END EC PRIVATE KEY-----
        """
    /// The key's scalar and public point as `openssl ec -text` prints them.
    static let sec1Scalar = hex("6381e8dfa8e70e12abdfda4fe1deef351dae52bdd11cd3125ee852a1e9dc2ed1")
    static let sec1Public = hex("0401db70c48a7983ca36382b1d65257c115073d092a891b0c81ee5834b4693726c32433ed14b278809ba0222ee5c4c9df808f60fcca41045f010d0d38fe70492ec")
    /// The same key, `openssl pkcs8 -topk8 -v2 aes-256-cbc` (password "secret").
    static let encrypted = """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAj43umRM4+kuAICCAAw
        DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEKbZjP/jbcOUEQYsDCEkVzwEgZCd
        nEyZErE9cNhuoqwPIHlSsPKJpRCzEuOQMvPpwWUl25nOWoIHVXr4wlyhJLo8f2mV
        7yW6YWL6aHfN50fsCCP+QgYe9Hm41Z74SJIwEzqsUsJCKu/agUFQJhVgbDLHEGdY
        pl/Wq0LpmnGNUrSpYXxi7DXupidVvuhlr0jU9t3OCANuuWD8L2R0CYaY1eDnsKw=
        -----END ENCRYPTED PRIVATE KEY-----
        """
    /// `openssl ecparam -name secp384r1 -genkey -noout`: EC, but not P-256.
    static let p384 = """
        -----BEGIN EC PRIVATE KEY-----
        MIGkAgEBBDCb2pFByxn7fF+RJbBs18d5qzyxrLa4wlqDKsMlNhh+qH1vN3yVRGDs
        hnAMQcUEeKugBwYFK4EEACKhZANiAARLInXdAxTtutF+1fSkAS2rOpORZMs0Yz4s
        mcX041vsFoZhek5BUHcvfNuQRxJqeH4VPYGvhRC0w3It739LdsK00rcVU4njeSXg
        uIcK6puhpu+xzuM4EuZJ920uja7F748=
        -----END EC PRIVATE KEY-----
        """
    /// `openssl genpkey -algorithm ed25519`: PKCS#8, not EC at all.
    static let ed25519 = """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VwBCIEIFA3GVewI3PKI62URvYM8TY1/LLbLReLUgSqSkAdsICs
        -----END PRIVATE KEY-----
        """

    /// The P-256 group order n.
    static let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")

    /// The bytes of hex `text`, by libcrypto's own hex reader (a fixture typo stops the test run).
    static func hex(_ text: String) -> [UInt8] {
        var length = 0
        guard let buffer = OPENSSL_hexstr2buf(text, &length) else { fatalError("TestKeys.hex: not hex: \(text)") }
        defer { CRYPTO_free(buffer, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    /// Whether `der` is a valid ES256 signature of `message` by `key`, checked by OpenSSL.
    static func verifies(der: [UInt8], message: [UInt8], key: P256PublicKey) throws -> Bool {
        try key.withKey { pkey in
            guard let context = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pkey) == 1 else { return false }
            let ok = EVP_DigestVerify(context, der, der.count, message, message.count) == 1
            ERR_clear_error()
            return ok
        }
    }
}

import COpenSSL

/// Builds OpenSSL keys of P-256 from raw bytes (OpenSSL 3's `EVP_PKEY_fromdata`, through the
/// shim's `vigil_p256_key_from_octets`), and reads their public point back.
///
/// Importing a public point makes OpenSSL decode it (`EC_POINT_oct2point`, which refuses a point
/// not on the curve), and `EVP_PKEY_public_check` then checks it again in full: a peer's key is
/// never used for ECDH before both have passed (an invalid-curve point would leak the private key).
enum P256KeyData {
    static let groupName = "prime256v1"

    /// An EVP_PKEY (owned by the caller: `EVP_PKEY_free`) for `publicKey` (65 bytes, uncompressed)
    /// and, for a key pair, its private scalar (32 bytes, big-endian).
    /// `fullCheck: false` skips `EVP_PKEY_public_check` for a point validated before (a
    /// `P256PublicKey`, which can only be made by validation); the import still decodes it.
    static func makeKey(publicKey: [UInt8], scalar: [UInt8]?, fullCheck: Bool = true) throws(PushKeyError) -> OpaquePointer {
        var key: OpaquePointer?
        let imported = publicKey.withUnsafeBufferPointer { point in
            if let scalar {
                return scalar.withUnsafeBufferPointer { vigil_p256_key_from_octets(point.baseAddress, point.count, $0.baseAddress, $0.count, &key) }
            }
            return vigil_p256_key_from_octets(point.baseAddress, point.count, nil, 0, &key)
        }
        guard imported == 1, let made = key else {
            // With a well-formed encoding, the only input that fails here is a point off the curve.
            OpenSSLFailure.discard()
            throw .notOnCurve
        }
        guard !fullCheck || publicCheck(made) else {
            EVP_PKEY_free(made)
            throw .notOnCurve
        }
        return made
    }

    /// Whether OpenSSL's full public-key check accepts `key`'s point.
    private static func publicCheck(_ key: OpaquePointer) -> Bool {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { return false }
        defer { EVP_PKEY_CTX_free(context) }
        let ok = EVP_PKEY_public_check(context) == 1
        if !ok { OpenSSLFailure.discard() }
        return ok
    }

    /// `key`'s public point, uncompressed (65 bytes). The form is asked for explicitly: a key read
    /// from a SEC1 file keeps the form its file used, and the Push API knows only this one.
    static func uncompressedPublicKey(of key: OpaquePointer) throws(PushKeyError) -> [UInt8] {
        guard EVP_PKEY_set_utf8_string_param(key, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed") == 1 else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_set_utf8_string_param(point-format)"))
        }
        var point = [UInt8](repeating: 0, count: P256PublicKey.byteCount)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &length) == 1,
              length == P256PublicKey.byteCount, point[0] == 0x04
        else { throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_get_octet_string_param(pub)")) }
        return point
    }

    /// The public point of private `scalar`: scalar × G on P-256. Refuses 0 and anything not below
    /// the group order (OpenSSL would reduce it, and the key would not be the one given).
    static func publicKey(ofScalar scalar: [UInt8]) throws(PushKeyError) -> [UInt8] {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw .openSSL(call: OpenSSLFailure.describe("EC_GROUP_new_by_curve_name"))
        }
        defer { EC_GROUP_free(group) }
        guard let number = BN_secure_new() else { throw .openSSL(call: OpenSSLFailure.describe("BN_secure_new")) }
        defer { BN_clear_free(number) }
        guard BN_bin2bn(scalar, Int32(scalar.count), number) != nil else { throw .openSSL(call: OpenSSLFailure.describe("BN_bin2bn")) }
        guard BN_is_zero(number) == 0, let order = EC_GROUP_get0_order(group), BN_cmp(number, order) < 0 else {
            throw .scalarOutOfRange
        }
        guard let point = EC_POINT_new(group) else { throw .openSSL(call: OpenSSLFailure.describe("EC_POINT_new")) }
        defer { EC_POINT_free(point) }
        guard EC_POINT_mul(group, point, number, nil, nil, nil) == 1 else { throw .openSSL(call: OpenSSLFailure.describe("EC_POINT_mul")) }
        var encoded = [UInt8](repeating: 0, count: P256PublicKey.byteCount)
        guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &encoded, encoded.count, nil) == encoded.count else {
            throw .openSSL(call: OpenSSLFailure.describe("EC_POINT_point2oct"))
        }
        return encoded
    }
}

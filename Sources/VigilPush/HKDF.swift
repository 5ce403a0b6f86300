import COpenSSL

/// HKDF with SHA-256 (RFC 5869) over OpenSSL's `EVP_PKEY_HKDF`, its two steps apart: RFC 8291 and
/// RFC 8188 chain them (one extract, then several expands from the same PRK), and the RFC's
/// worked example publishes each step's output.
enum HKDF {
    /// HKDF-Extract(salt, ikm): the 32-byte pseudorandom key.
    static func extract(salt: [UInt8], inputKeyMaterial ikm: [UInt8]) throws(WebPushError) -> [UInt8] {
        try derive(mode: VIGIL_HKDF_MODE_EXTRACT_ONLY, salt: salt, key: ikm, info: [], length: 32)
    }

    /// HKDF-Expand(prk, info, length), `length` at most 32 here (one HMAC block is all Web Push needs).
    static func expand(pseudorandomKey prk: [UInt8], info: [UInt8], length: Int) throws(WebPushError) -> [UInt8] {
        precondition(length > 0 && length <= 32, "HKDF.expand: Web Push derives at most one SHA-256 block")
        return try derive(mode: VIGIL_HKDF_MODE_EXPAND_ONLY, salt: nil, key: prk, info: info, length: length)
    }

    private static func derive(mode: Int32, salt: [UInt8]?, key: [UInt8], info: [UInt8], length: Int) throws(WebPushError) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_CTX_new_id(HKDF)"))
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1,
              EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1,
              EVP_PKEY_CTX_set_hkdf_mode(context, mode) == 1,
              salt.map({ EVP_PKEY_CTX_set1_hkdf_salt(context, $0, Int32($0.count)) == 1 }) ?? true,
              EVP_PKEY_CTX_set1_hkdf_key(context, key, Int32(key.count)) == 1,
              info.isEmpty || EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1
        else { throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_CTX_set_hkdf")) }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        guard EVP_PKEY_derive(context, &out, &outLength) == 1, outLength == length else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_derive(HKDF)"))
        }
        return out
    }
}

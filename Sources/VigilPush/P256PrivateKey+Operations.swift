import COpenSSL

/// What a P-256 key pair is used for: ECDH with a subscription's key (RFC 8291 §3.1), ES256
/// signatures (RFC 7518 §3.4) and its PKCS#8 PEM text. Each call makes and frees its own OpenSSL
/// context, so calls on one key from several threads do not meet.
extension P256PrivateKey {
    /// The ECDH shared secret with `peer`: the X coordinate of the shared point (32 bytes), as
    /// RFC 8291 §3.1 uses it. The peer is a `P256PublicKey`, checked in full when it was made
    /// (an invalid-curve point never gets this far), so it is not validated a third time here.
    public func sharedSecret(with peer: P256PublicKey) throws(PushKeyError) -> [UInt8] {
        try peer.withKey { peerKey throws(PushKeyError) in
            guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
                throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_CTX_new_from_pkey"))
            }
            defer { EVP_PKEY_CTX_free(context) }
            guard EVP_PKEY_derive_init(context) == 1 else { throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_derive_init")) }
            guard EVP_PKEY_derive_set_peer_ex(context, peerKey, 0) == 1 else {
                OpenSSLFailure.discard()
                throw .notOnCurve
            }
            var secret = [UInt8](repeating: 0, count: 32)
            var length = secret.count
            guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else {
                throw .openSSL(call: OpenSSLFailure.describe("EVP_PKEY_derive"))
            }
            return secret
        }
    }

    /// The ECDSA P-256 / SHA-256 signature of `message` as OpenSSL writes it: DER
    /// `ECDSA-Sig-Value` (RFC 3279 §2.2.3). A JWT wants the raw form: `ECDSASignature.raw(der:)`.
    public func signatureDER(of message: [UInt8]) throws(PushKeyError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .openSSL(call: OpenSSLFailure.describe("EVP_MD_CTX_new")) }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_DigestSignInit(SHA-256)"))
        }
        // 72 bytes is the largest DER signature of P-256: two 33-byte INTEGERs and three headers.
        var signature = [UInt8](repeating: 0, count: 72)
        var length = signature.count
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw .openSSL(call: OpenSSLFailure.describe("EVP_DigestSign"))
        }
        return Array(signature[..<length])
    }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`), what `VAPIDKeyFile` writes.
    public func pemPKCS8() throws(PushKeyError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL(call: OpenSSLFailure.describe("BIO_new")) }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else {
            throw .openSSL(call: OpenSSLFailure.describe("PEM_write_bio_PrivateKey"))
        }
        var data: UnsafeMutablePointer<CChar>?
        let count = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)  // BIO_get_mem_data, a macro
        guard count > 0, let data else { throw .openSSL(call: OpenSSLFailure.describe("BIO_get_mem_data")) }
        let text = String(decoding: UnsafeRawBufferPointer(start: data, count: count), as: UTF8.self)
        // The memory BIO's buffer held the private key: clear it before BIO_free releases it.
        OPENSSL_cleanse(data, count)
        return text
    }
}

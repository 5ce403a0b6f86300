import COpenSSL

/// AES-128-GCM (the `aes128gcm` content coding's cipher, RFC 8188 §2) over OpenSSL's EVP cipher
/// interface: a 16-byte key, a 12-byte nonce, no associated data, the 16-byte tag appended.
enum AES128GCM {
    static let keyByteCount = 16
    static let nonceByteCount = 12
    static let tagByteCount = 16

    /// `plaintext` encrypted, followed by its tag.
    static func seal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8]) throws(WebPushError) -> [UInt8] {
        precondition(key.count == keyByteCount && nonce.count == nonceByteCount, "AES128GCM.seal: key or nonce size")
        guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL(call: OpenSSLFailure.describe("EVP_CIPHER_CTX_new")) }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                  EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1,
                  EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1,
                  EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1,
                  Int(written + final) == plaintext.count
            else { return false }
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), base + plaintext.count) == 1
        }
        guard ok else { throw .openSSL(call: OpenSSLFailure.describe("EVP_Encrypt(aes-128-gcm)")) }
        return out
    }

    /// The plaintext of `sealed` (ciphertext ‖ tag); `.authenticationFailed` when the tag does not
    /// match, which is all GCM can say about a wrong key or a changed byte.
    static func open(key: [UInt8], nonce: [UInt8], sealed: ArraySlice<UInt8>) throws(WebPushError) -> [UInt8] {
        precondition(key.count == keyByteCount && nonce.count == nonceByteCount, "AES128GCM.open: key or nonce size")
        guard sealed.count >= tagByteCount else { throw .authenticationFailed }
        guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL(call: OpenSSLFailure.describe("EVP_CIPHER_CTX_new")) }
        defer { EVP_CIPHER_CTX_free(context) }
        let ciphertext = Array(sealed.dropLast(tagByteCount))
        var tag = Array(sealed.suffix(tagByteCount))
        var out = [UInt8](repeating: 0, count: ciphertext.count)
        var written: Int32 = 0
        var final: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1,
              out.withUnsafeMutableBufferPointer({ EVP_DecryptUpdate(context, $0.baseAddress, &written, ciphertext, Int32(ciphertext.count)) }) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tag) == 1
        else { throw .openSSL(call: OpenSSLFailure.describe("EVP_Decrypt(aes-128-gcm)")) }
        // The tag is checked here, at the end: nothing decrypted is returned before it has passed.
        let verified = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context, $0.baseAddress.map { $0 + Int(written) }, &final) } == 1
        guard verified else {
            OpenSSLFailure.discard()
            throw .authenticationFailed
        }
        return out
    }
}

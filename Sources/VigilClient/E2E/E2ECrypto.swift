// The two primitives e2e streams need, AES-256-GCM and HKDF-SHA256, behind one small internal
// protocol: CryptoKit on Apple platforms, libcrypto's EVP calls through COpenSSL on Linux (which
// the Linux transport links already, so no new package dependency). Nothing else in E2E/ knows
// which one runs; both are checked against clients/e2e-vectors/vectors.json.

#if canImport(CryptoKit)
import CryptoKit
import Foundation
#elseif canImport(COpenSSL)
import COpenSSL
#endif

/// AES-256-GCM (12-byte nonce, 16-byte tag) and HKDF-SHA256.
protocol E2EPrimitives: Sendable {
    /// ciphertext ‖ tag; `nil` only if the library fails.
    func sealAESGCM(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) -> [UInt8]?
    /// The plaintext of ciphertext ‖ tag, or `nil` when the tag does not verify.
    func openAESGCM(key: [UInt8], nonce: [UInt8], ciphertextAndTag: [UInt8], aad: [UInt8]) -> [UInt8]?
    /// HKDF-SHA256 (RFC 5869), `length` bytes; `nil` only if the library fails.
    func hkdfSHA256(inputKeyMaterial: [UInt8], salt: [UInt8], info: [UInt8], length: Int) -> [UInt8]?
}

enum E2ECrypto {
    static let tagBytes = 16
    static let nonceBytes = 12

    #if canImport(CryptoKit)
    static let primitives: any E2EPrimitives = CryptoKitPrimitives()
    #elseif canImport(COpenSSL)
    static let primitives: any E2EPrimitives = LibcryptoPrimitives()
    #endif

    /// `count` bytes from the system's CSPRNG (`SystemRandomNumberGenerator`: getrandom(2) on
    /// Linux, arc4random on Apple platforms, both cryptographically secure).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

#if canImport(CryptoKit)
struct CryptoKitPrimitives: E2EPrimitives {
    func sealAESGCM(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard let n = try? AES.GCM.Nonce(data: nonce),
              let box = try? AES.GCM.seal(plaintext, using: SymmetricKey(data: key), nonce: n, authenticating: aad)
        else { return nil }
        return Array(box.ciphertext) + Array(box.tag)
    }

    func openAESGCM(key: [UInt8], nonce: [UInt8], ciphertextAndTag: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard ciphertextAndTag.count >= E2ECrypto.tagBytes, let n = try? AES.GCM.Nonce(data: nonce),
              let box = try? AES.GCM.SealedBox(nonce: n, ciphertext: ciphertextAndTag.dropLast(E2ECrypto.tagBytes),
                                               tag: ciphertextAndTag.suffix(E2ECrypto.tagBytes)),
              let plaintext = try? AES.GCM.open(box, using: SymmetricKey(data: key), authenticating: aad)
        else { return nil }
        return Array(plaintext)
    }

    func hkdfSHA256(inputKeyMaterial: [UInt8], salt: [UInt8], info: [UInt8], length: Int) -> [UInt8]? {
        let derived = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: inputKeyMaterial), salt: salt,
                                             info: info, outputByteCount: length)
        return derived.withUnsafeBytes { Array($0) }
    }
}
#elseif canImport(COpenSSL)
struct LibcryptoPrimitives: E2EPrimitives {
    func sealAESGCM(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce.count == E2ECrypto.nonceBytes, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + E2ECrypto.tagBytes)
        var written: Int32 = 0, final: Int32 = 0, aadWritten: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                  EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
                  EVP_EncryptUpdate(context, nil, &aadWritten, aad, Int32(aad.count)) == 1,
                  EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1,
                  EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1,
                  Int(written + final) == plaintext.count
            else { return false }
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(E2ECrypto.tagBytes), base + plaintext.count) == 1
        }
        if !ok { ERR_clear_error() }
        return ok ? out : nil
    }

    func openAESGCM(key: [UInt8], nonce: [UInt8], ciphertextAndTag: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard ciphertextAndTag.count >= E2ECrypto.tagBytes, key.count == 32, nonce.count == E2ECrypto.nonceBytes,
              let context = EVP_CIPHER_CTX_new()
        else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let ciphertext = Array(ciphertextAndTag.dropLast(E2ECrypto.tagBytes))
        var tag = Array(ciphertextAndTag.suffix(E2ECrypto.tagBytes))
        var out = [UInt8](repeating: 0, count: max(ciphertext.count, 1))
        var written: Int32 = 0, final: Int32 = 0, aadWritten: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              EVP_DecryptUpdate(context, nil, &aadWritten, aad, Int32(aad.count)) == 1,
              out.withUnsafeMutableBufferPointer({ EVP_DecryptUpdate(context, $0.baseAddress, &written, ciphertext, Int32(ciphertext.count)) }) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(E2ECrypto.tagBytes), &tag) == 1
        else { ERR_clear_error(); return nil }
        // The tag is checked here: nothing decrypted is returned before it has passed.
        let verified = out.withUnsafeMutableBufferPointer {
            EVP_DecryptFinal_ex(context, $0.baseAddress.map { $0 + Int(written) }, &final)
        } == 1
        guard verified else { ERR_clear_error(); return nil }
        return Array(out.prefix(ciphertext.count))
    }

    func hkdfSHA256(inputKeyMaterial: [UInt8], salt: [UInt8], info: [UInt8], length: Int) -> [UInt8]? {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        // Extract-and-expand (RFC 5869's whole HKDF), the mode a context starts in.
        guard EVP_PKEY_derive_init(context) == 1,
              EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1,
              salt.isEmpty || EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)) == 1,
              EVP_PKEY_CTX_set1_hkdf_key(context, inputKeyMaterial, Int32(inputKeyMaterial.count)) == 1,
              info.isEmpty || EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1
        else { ERR_clear_error(); return nil }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        guard EVP_PKEY_derive(context, &out, &outLength) == 1, outLength == length else { ERR_clear_error(); return nil }
        return out
    }
}
#endif

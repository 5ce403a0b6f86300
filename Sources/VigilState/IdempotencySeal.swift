import COpenSSL
import VigilCore

/// The cryptography of kept answers (docs/PROTOCOL.md, "Writes that are safe to retry"): every
/// value the server keeps for an idempotency key is derived from the key, which only the client
/// holds, so memory, journal and snapshots keep no readable answer (and so no token an answer
/// carried):
///
///     lookup         SHA-256("vigil idem id" ‖ key)
///     request digest SHA-256("vigil idem request" ‖ key ‖ canonical request)
///     sealed         AES-256-GCM under SHA-256("vigil idem key" ‖ key), a fresh random 12-byte
///                    nonce, the lookup as associated data: nonce ‖ ciphertext ‖ tag 16
///
/// Pure over bytes (the nonce is the caller's, so tests are deterministic). Keys are random with
/// at least 96 bits (the protocol asks for 128), so the digests cannot be searched.
public enum IdempotencySeal {
    public static let nonceBytes = 12
    public static let tagBytes = 16

    public static func lookup(key: String) -> [UInt8] { sha256(Array("vigil idem id".utf8) + Array(key.utf8)) }

    public static func requestDigest(_ claim: IdempotencyClaim) -> [UInt8] {
        sha256(Array("vigil idem request".utf8) + Array(claim.key.utf8) + claim.canonical)
    }

    static func cipherKey(key: String) -> [UInt8] { sha256(Array("vigil idem key".utf8) + Array(key.utf8)) }

    /// The kept answer for `members` (a reply's members, `Reply.keptMembers`), given at `now`.
    public static func keep(_ members: [UInt8], claim: IdempotencyClaim, nonce: [UInt8], now: Int64) -> KeptAnswer? {
        let lookup = lookup(key: claim.key)
        guard let sealed = seal(members, key: cipherKey(key: claim.key), nonce: nonce, aad: lookup) else { return nil }
        return KeptAnswer(lookup: lookup, requestDigest: requestDigest(claim), createdAt: now, sealed: nonce + sealed)
    }

    /// The members `answer` holds, opened with the client's `key`; nil if they do not open (a
    /// different key, or damage).
    public static func open(_ answer: KeptAnswer, key: String) -> [UInt8]? {
        guard answer.sealed.count >= nonceBytes + tagBytes else { return nil }
        let nonce = Array(answer.sealed.prefix(nonceBytes))
        let body = Array(answer.sealed.dropFirst(nonceBytes))
        return open(body, key: cipherKey(key: key), nonce: nonce, aad: answer.lookup)
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { vigil_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return out
    }

    /// AES-256-GCM: ciphertext ‖ tag, or nil if libcrypto fails.
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8]? {
        precondition(key.count == 32 && nonce.count == nonceBytes, "IdempotencySeal.seal: key or nonce size")
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        var written: Int32 = 0, final: Int32 = 0, aadWritten: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                  EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
                  EVP_EncryptUpdate(context, nil, &aadWritten, aad, Int32(aad.count)) == 1,
                  EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1,
                  EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1,
                  Int(written + final) == plaintext.count
            else { return false }
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagBytes), base + plaintext.count) == 1
        }
        return ok ? out : nil
    }

    /// The plaintext of ciphertext ‖ tag, or nil when the tag does not verify.
    static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) -> [UInt8]? {
        guard sealed.count >= tagBytes, key.count == 32, nonce.count == nonceBytes else { return nil }
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let ciphertext = Array(sealed.dropLast(tagBytes))
        var tag = Array(sealed.suffix(tagBytes))
        var out = [UInt8](repeating: 0, count: max(ciphertext.count, 1))
        var written: Int32 = 0, final: Int32 = 0, aadWritten: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1,
              EVP_DecryptUpdate(context, nil, &aadWritten, aad, Int32(aad.count)) == 1,
              out.withUnsafeMutableBufferPointer({ EVP_DecryptUpdate(context, $0.baseAddress, &written, ciphertext, Int32(ciphertext.count)) }) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagBytes), &tag) == 1
        else { ERR_clear_error(); return nil }
        // The tag is checked here: nothing decrypted is returned before it has passed.
        let verified = out.withUnsafeMutableBufferPointer { EVP_DecryptFinal_ex(context, $0.baseAddress.map { $0 + Int(written) }, &final) } == 1
        guard verified else { ERR_clear_error(); return nil }
        return Array(out.prefix(ciphertext.count))
    }
}

/// Why a push message could not be encrypted (RFC 8291) or, on the receiving side, read. The
/// encrypting side meets only the first group; the second is what a hostile or corrupted body
/// makes the decrypting side (the tests' user agent, the fuzzer) say.
public enum WebPushError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key was unusable: a subscription's `p256dh`, the ephemeral key, a receiver's key.
    case key(PushKeyError)
    /// A field of fixed size had another (`auth` is 16 bytes, RFC 8291 §3.2; a salt 16, RFC 8188 §2.1).
    case wrongLength(what: String, expected: Int, actual: Int)
    /// Text that is not canonical base64url (a subscription's `auth`).
    case notBase64URL(what: String)
    /// The notice would not fit one record of a push body a push service must accept (RFC 8291 §4:
    /// 4096 bytes in all). Nothing is cut: the caller shortens the notice.
    case plaintextTooLarge(count: Int, limit: Int)
    /// Padding that is negative or would take the body over the limit.
    case paddingTooLarge(count: Int, limit: Int)

    /// The body ends before its RFC 8188 header does.
    case truncatedHeader(count: Int)
    /// A record size below RFC 8188's minimum of 18 (§2.1), or one RFC 8291's single record does not fit.
    case badRecordSize(UInt32)
    /// A key id that is not an application server's public key (RFC 8291 §4: 65 bytes).
    case badKeyID(length: Int)
    /// More bytes than one record: RFC 8291 §4 allows a single record.
    case notOneRecord(count: Int, recordSize: UInt32)
    /// AES-GCM refused the record: another key, another auth secret, or changed bytes.
    case authenticationFailed
    /// The decrypted record does not end in the last-record delimiter (0x02) followed by zeros.
    case badPadding
    /// An OpenSSL call failed where valid input cannot make it fail.
    case openSSL(call: String)

    public var description: String {
        switch self {
        case .key(let error): return error.description
        case .wrongLength(let what, let expected, let actual): return "\(what) is \(actual) bytes, not \(expected)"
        case .notBase64URL(let what): return "\(what) is not base64url"
        case .plaintextTooLarge(let count, let limit): return "the notice is \(count) bytes; a push message holds at most \(limit)"
        case .paddingTooLarge(let count, let limit): return "\(count) bytes of padding; at most \(limit) fit"
        case .truncatedHeader(let count): return "the body (\(count) bytes) ends inside its aes128gcm header"
        case .badRecordSize(let size): return "record size \(size) is not usable"
        case .badKeyID(let length): return "the key id is \(length) bytes, not a 65-byte P-256 public key"
        case .notOneRecord(let count, let size): return "\(count) bytes of records do not fit one record of \(size)"
        case .authenticationFailed: return "the record does not decrypt (wrong key or altered bytes)"
        case .badPadding: return "the record has no last-record delimiter"
        case .openSSL(let call): return "OpenSSL: \(call) failed"
        }
    }
}

/// Why a P-256 key (a subscription's `p256dh`, the application server's VAPID key, an ephemeral
/// key) could not be used. Bytes from a browser or a file are hostile input: every way they can be
/// wrong is a case here, never a trap.
public enum PushKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A field of fixed size had another (`what` names it: "p256dh", "private scalar"...).
    case wrongLength(what: String, expected: Int, actual: Int)
    /// Text that is not canonical base64url.
    case notBase64URL(what: String)
    /// A public key not in the uncompressed form (0x04 ‖ X ‖ Y) that the Push API hands out.
    case notUncompressedPoint
    /// 65 bytes that are not a point of P-256: an invalid-curve attack, or a corrupted key.
    case notOnCurve
    /// A private scalar of 0 or not below the group order.
    case scalarOutOfRange
    /// PEM text that holds no unencrypted private key OpenSSL can read.
    case unreadablePEM
    /// A readable private key that is not an EC key on P-256 (`found` says what it is).
    case notP256(found: String)
    /// An OpenSSL call failed where valid input cannot make it fail; `call` names it, with
    /// OpenSSL's reason when it gave one.
    case openSSL(call: String)

    public var description: String {
        switch self {
        case .wrongLength(let what, let expected, let actual): return "\(what) is \(actual) bytes, not \(expected)"
        case .notBase64URL(let what): return "\(what) is not base64url"
        case .notUncompressedPoint: return "the public key is not an uncompressed P-256 point (65 bytes starting 0x04)"
        case .notOnCurve: return "the public key is not a point on P-256"
        case .scalarOutOfRange: return "the private key is not a valid P-256 scalar"
        case .unreadablePEM: return "no unencrypted private key in the PEM text (PKCS#8 or SEC1 \"EC PRIVATE KEY\")"
        case .notP256(let found): return "the private key is not a P-256 EC key (found \(found))"
        case .openSSL(let call): return "OpenSSL: \(call) failed"
        }
    }
}

import Glibc

/// Why a VAPID token (RFC 8292) could not be made, or its key file not read or written.
public enum VAPIDError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A contact that is not a `mailto:` or `https:` URI (RFC 8292 §2.1).
    case badSubject(String)
    /// A token lifetime outside 1 s ... 24 h (RFC 8292 §2: a push service refuses `exp` further away).
    case badLifetime(Int64)
    /// The key could not sign, or the file's key is not usable.
    case key(PushKeyError)
    /// OpenSSL's signature is not a P-256 ECDSA signature (never expected: a bug if seen).
    case signature(ECDSASignatureError)
    /// A file operation failed: `operation` names the call and the path, `errno` says why.
    case file(operation: String, errno: Int32)
    /// The key file exists already: generating over it would orphan every subscription made for
    /// its public key.
    case fileExists(String)
    /// The key file is open to every user of the machine, or not a regular file.
    case notPrivate(path: String, why: String)

    public var description: String {
        switch self {
        case .badSubject(let subject): return "VAPID subject \"\(subject)\" is not a mailto: or https: URI"
        case .badLifetime(let seconds): return "VAPID token lifetime \(seconds) s is not within 1 s ... 24 h"
        case .key(let error): return "VAPID key: \(error)"
        case .signature(let error): return "VAPID signature: \(error)"
        case .file(let operation, let code): return "\(operation): \(errnoText(code)) (errno \(code))"
        case .fileExists(let path): return "\(path) exists already; a new key would orphan every subscription made for the old one"
        case .notPrivate(let path, let why): return "\(path): \(why); it holds a private key: chmod 600 (or 640 for a service group)"
        }
    }

    private func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }
}

/// The claims of a VAPID token (RFC 8292 §2): `aud`, the push service's origin; `exp`, when it
/// expires (seconds since the epoch, at most 24 hours ahead); `sub`, the operator's contact. And
/// the JWT's fixed header (RFC 7515 §4, RFC 7518 §3.4), `{"typ":"JWT","alg":"ES256"}`.
///
/// The JSON is written here by hand, in one fixed key order: three fields do not need a JSON
/// library, and the tests compare the exact bytes.
public struct VAPIDClaims: Equatable, Sendable {
    public let audience: String
    public let expiry: Int64
    public let subject: VAPIDSubject

    public init(audience: String, expiry: Int64, subject: VAPIDSubject) {
        self.audience = audience
        self.expiry = expiry
        self.subject = subject
    }

    /// The JWT header's JSON.
    public static let headerJSON = Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8)

    /// The claims' JSON.
    public var json: [UInt8] {
        Array(#"{"aud":\#(Self.quoted(audience)),"exp":\#(expiry),"sub":\#(Self.quoted(subject.uri))}"#.utf8)
    }

    /// `text` as a JSON string (RFC 8259 §7): quote, backslash and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{00}"..."\u{1F}":
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

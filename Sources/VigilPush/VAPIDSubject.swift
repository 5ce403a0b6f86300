/// The contact of the application server's operator, the JWT's `sub` claim (RFC 8292 §2.1): a
/// `mailto:` or an `https:` URI, from the config. A push service that sees abuse or trouble from
/// the key writes there; some (Apple's) refuse a token without one.
public struct VAPIDSubject: Hashable, Sendable {
    /// A contact is short; the bound keeps the token's size reasonable.
    public static let maxByteCount = 256

    public let uri: String

    /// Refuses anything but `mailto:` + an address or `https://` + a host, in visible ASCII.
    public init(_ uri: String) throws(VAPIDError) {
        let bytes = Array(uri.utf8)
        let lower = uri.lowercased()
        let rest: Substring
        if lower.hasPrefix("mailto:") {
            rest = lower.dropFirst(7)
            guard rest.contains("@"), rest.first != "@", rest.last != "@" else { throw .badSubject(uri) }
        } else if lower.hasPrefix("https://") {
            rest = lower.dropFirst(8)
            guard let first = rest.first, first != "/" else { throw .badSubject(uri) }
        } else {
            throw .badSubject(uri)
        }
        guard bytes.count <= Self.maxByteCount, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .badSubject(uri) }
        self.uri = uri
    }
}

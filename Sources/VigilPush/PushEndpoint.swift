/// A subscription's endpoint URL, parsed and checked once: where a push message is POSTed
/// (RFC 8030 §5), and the origin its VAPID token must name as `aud` (RFC 8292 §2).
///
/// Only `https` is accepted; `http` only to a loopback host and only when the caller says so (the
/// tests' push service). The host is lowercased; the port is the URL's or the scheme's default;
/// the origin is serialized as RFC 6454 §6.2 does, the default port left out.
public struct PushEndpoint: Hashable, Sendable {
    /// Real endpoints are a few hundred bytes; a bound keeps a hostile one from costing more.
    public static let maxByteCount = 2048

    /// The URL as given.
    public let url: String
    /// `https` (true) or loopback `http`.
    public let usesTLS: Bool
    /// The host to connect to and to name in SNI: a lowercase name, an IPv4 address, or an IPv6
    /// address without its brackets.
    public let host: String
    /// The port to connect to (443 or 80 when the URL names none).
    public let port: UInt16
    /// Path and query, what the request line carries: "/" when the URL has no path.
    public let requestTarget: String

    /// `scheme://host[:port]`, the value of the JWT's `aud`.
    public var origin: String { (usesTLS ? "https://" : "http://") + hostHeader }

    /// `host[:port]` as an origin and an HTTP/1.1 `Host` header write it (RFC 6454 §6.2,
    /// RFC 9110 §7.2): IPv6 in brackets, the port only when it is not the scheme's default.
    public var hostHeader: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        return port == (usesTLS ? 443 : 80) ? hostText : "\(hostText):\(port)"
    }

    public init(_ url: String, allowLoopbackHTTP: Bool = false) throws(PushEndpointError) {
        let bytes = Array(url.utf8)
        guard bytes.count <= Self.maxByteCount else { throw .tooLong(bytes.count) }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .malformed("a space, a control or a non-ASCII character") }
        guard !bytes.contains(UInt8(ascii: "#")) else { throw .malformed("a fragment") }
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { throw .malformed("no scheme") }
        let scheme = url[..<colon].lowercased()
        let rest = url[colon...].dropFirst(3)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let target = rest[authorityEnd...]
        guard !authority.contains("@") else { throw .userInfo }
        let (host, portText) = try Self.splitAuthority(authority)
        let tls: Bool
        switch scheme {
        case "https": tls = true
        case "http" where allowLoopbackHTTP && Self.isLoopback(host): tls = false
        default: throw .schemeNotAllowed(scheme)
        }
        let port: UInt16
        if let portText {
            guard (1...5).contains(portText.count), portText.allSatisfy({ $0.isASCIIDigit }), let number = UInt16(portText), number > 0 else {
                throw .badPort(String(portText))
            }
            port = number
        } else {
            port = tls ? 443 : 80
        }
        self.url = url
        self.usesTLS = tls
        self.host = host
        self.port = port
        self.requestTarget = target.isEmpty ? "/" : (target.first == "?" ? "/" + target : String(target))
    }

    /// The host (lowercased, IPv6 without brackets) and the port's text, if any.
    private static func splitAuthority(_ authority: Substring) throws(PushEndpointError) -> (String, Substring?) {
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { throw .badHost(String(authority)) }
            let address = authority[authority.index(after: authority.startIndex)..<close].lowercased()
            guard !address.isEmpty, address.contains(":"), address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw .badHost(address)
            }
            let after = authority[authority.index(after: close)...]
            if after.isEmpty { return (address, nil) }
            guard after.first == ":" else { throw .badHost(String(authority)) }
            return (address, after.dropFirst())
        }
        let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let host = parts[0].lowercased()
        // A DNS name or an IPv4 address: letters, digits, hyphens and dots, labels not empty.
        guard !host.isEmpty, host.utf8.count <= 253,
              host.allSatisfy({ $0.isASCIILetterOrDigit || $0 == "-" || $0 == "." }),
              !host.split(separator: ".", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0.count > 63 })
        else { throw .badHost(host) }
        return (host, parts.count == 2 ? parts[1] : nil)
    }

    /// localhost, 127.0.0.0/8 and ::1: the only hosts plain http may reach.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
    fileprivate var isASCIILetterOrDigit: Bool { isASCIIDigit || ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}

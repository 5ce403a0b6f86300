/// An `https://host[:port]/path?query` URL taken apart for a request: its origin (where to
/// connect) and its target (the request line's origin-form, RFC 9112 §3.2.1).
///
/// Strict on purpose, since the URLs come from outside (a browser's push subscription, an
/// operator's webhook config) and decide where vigild connects:
/// - the scheme is `https`, or `http` for a loopback host only (`HTTPOrigin.isLoopback`);
/// - no userinfo (`user:pass@`: credentials in a URL would end up in logs), no fragment;
/// - the host is a DNS name (letters, digits, `-`, labels of 1-63 characters, 253 in all; an
///   international name in its `xn--` form), a dotted IPv4 address, or an IPv6 address in
///   brackets without a zone; anything else that looks numeric is refused, not guessed at;
/// - the port, when given, is 1-65535 in at most five digits (an empty port is refused);
/// - the path and query use RFC 3986's characters only, `%` followed by two hex digits.
/// Each refusal's `description` names the part, never the URL's text: it may be logged.
public struct OutgoingURL: Equatable, Sendable {
    public let origin: HTTPOrigin
    /// Path and query, starting with `/` (`/` when the URL has no path).
    public let target: String

    /// The longest URL taken (push services' endpoints are a few hundred bytes).
    public static let maxLength = 4096

    /// Why a URL was refused.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case tooLong, scheme, userinfo, fragment, host, port, path
        /// `http://` to a host that is not loopback: only TLS leaves the machine.
        case plainHTTPNotLoopback

        public var description: String {
            switch self {
            case .tooLong: return "URL longer than \(OutgoingURL.maxLength) bytes"
            case .scheme: return "URL scheme is not https (or http on loopback)"
            case .userinfo: return "URL carries user information (user@ or user:password@)"
            case .fragment: return "URL carries a fragment (#)"
            case .host: return "URL host is not a DNS name, an IPv4 address or a bracketed IPv6 address"
            case .port: return "URL port is not a number from 1 to 65535"
            case .path: return "URL path or query has a character outside RFC 3986's set"
            case .plainHTTPNotLoopback: return "http:// is allowed only for a loopback host (use https)"
            }
        }
    }

    public init(parsing text: String) throws(Problem) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maxLength else { throw .tooLong }
        if bytes.contains(UInt8(ascii: "#")) { throw .fragment }
        // The scheme, case-insensitively.
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: "://".utf8) else { throw .scheme }
        let schemeText = String(decoding: bytes[..<colon].map(HTTPHeaderSearch.lowerASCII), as: UTF8.self)
        guard let scheme = HTTPOrigin.Scheme(rawValue: schemeText) else { throw .scheme }
        let authorityStart = colon + 3
        let authorityEnd = bytes[authorityStart...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? bytes.count
        let authority = bytes[authorityStart..<authorityEnd]
        if authority.contains(UInt8(ascii: "@")) { throw .userinfo }
        let (host, port) = try Self.parseAuthority(authority, scheme: scheme)
        let origin = HTTPOrigin(scheme: scheme, host: host, port: port)
        if scheme == .http && !origin.isLoopback { throw .plainHTTPNotLoopback }
        let rest = bytes[authorityEnd...]
        guard Self.isValidTarget(rest) else { throw .path }
        self.origin = origin
        if rest.isEmpty {
            target = "/"
        } else if rest.first == UInt8(ascii: "?") {
            target = "/" + String(decoding: rest, as: UTF8.self)
        } else {
            target = String(decoding: rest, as: UTF8.self)
        }
    }

    /// `host [":" port]`, the host a name, an IPv4 address or `[IPv6]`.
    private static func parseAuthority(_ authority: ArraySlice<UInt8>, scheme: HTTPOrigin.Scheme) throws(Problem) -> (String, UInt16) {
        var hostPart: ArraySlice<UInt8>
        var portPart: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .host }
            hostPart = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { throw .host }
                portPart = after.dropFirst()
            }
            // A zone (%25eth0) names an interface of this machine: not a push service's address.
            let text = String(decoding: hostPart.map(HTTPHeaderSearch.lowerASCII), as: UTF8.self)
            guard !hostPart.contains(UInt8(ascii: "%")), HTTPOrigin.isIPv6(text) else { throw .host }
            return (text, try parsePort(portPart, scheme: scheme))
        }
        if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostPart = authority[..<colon]
            portPart = authority[(colon + 1)...]
        } else {
            hostPart = authority
        }
        let host = String(decoding: hostPart.map(HTTPHeaderSearch.lowerASCII), as: UTF8.self)
        guard isValidHost(host) else { throw .host }
        return (host, try parsePort(portPart, scheme: scheme))
    }

    private static func parsePort(_ digits: ArraySlice<UInt8>?, scheme: HTTPOrigin.Scheme) throws(Problem) -> UInt16 {
        guard let digits else { return scheme.defaultPort }
        guard (1...5).contains(digits.count), digits.allSatisfy({ HTTPSyntax.digit($0) != nil }) else { throw .port }
        let value = digits.reduce(0) { $0 * 10 + HTTPSyntax.digit($1)! }
        guard (1...65_535).contains(value) else { throw .port }
        return UInt16(value)
    }

    /// A DNS name of LDH labels, or a dotted IPv4 address. A name whose last label is all digits
    /// (`1.2.3`, `999.1.1.1`) is neither: some parsers read it as an address, so it is refused.
    static func isValidHost(_ host: String) -> Bool {
        let bytes = Array(host.utf8)
        guard !bytes.isEmpty, bytes.count <= 253 else { return false }
        let labels = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        for label in labels {
            guard (1...63).contains(label.count) else { return false }
            for c in label {
                let ok = (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || HTTPSyntax.digit(c) != nil || c == UInt8(ascii: "-")
                guard ok else { return false }
            }
            guard label.first != UInt8(ascii: "-"), label.last != UInt8(ascii: "-") else { return false }
        }
        if let last = labels.last, last.allSatisfy({ HTTPSyntax.digit($0) != nil }) {
            return HTTPOrigin.isIPv4(host)
        }
        return true
    }

    /// Empty, or `/` or `?` then RFC 3986's path and query characters (unreserved, sub-delims,
    /// `:`, `@`, `/`, `?`) and percent-encodings.
    static func isValidTarget(_ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, HTTPSyntax.hexValue(bytes[i + 1]) != nil, HTTPSyntax.hexValue(bytes[i + 2]) != nil else { return false }
                i += 3
                continue
            }
            guard isTargetChar(c) else { return false }
            i += 1
        }
        return true
    }

    private static func isTargetChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~!$&'()*+,;=:@/?".utf8.contains(c)
        }
    }
}

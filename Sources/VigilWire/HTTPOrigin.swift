import Glibc

/// Where an outgoing request goes: scheme, host and port (RFC 6454's origin). The HTTP client
/// keeps one pool of keep-alive connections per origin, so two URLs of one push service share
/// connections and two services never do.
///
/// Made by `OutgoingURL(parsing:)`, which checks every part: `host` is a lowercased DNS name, a
/// dotted IPv4 address or an IPv6 address (without its brackets), `port` is never 0, and `http`
/// is only ever a loopback host's (a test server, a local relay): anything that leaves the machine
/// is `https`. The host name is the least secret part of a push endpoint; `description` holds it
/// and may appear in debug logs, never with a path.
public struct HTTPOrigin: Hashable, Sendable, CustomStringConvertible {
    /// The two schemes the client speaks.
    public enum Scheme: String, Sendable {
        case https, http

        /// The port a URL without one means (RFC 9110 §4.2).
        public var defaultPort: UInt16 { self == .https ? 443 : 80 }
    }

    public let scheme: Scheme
    public let host: String
    public let port: UInt16

    init(scheme: Scheme, host: String, port: UInt16) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    public var usesTLS: Bool { scheme == .https }

    /// Whether `host` is an IP address (no lookup; the certificate is checked against its IP entries).
    public var hostIsAddress: Bool { Self.isIPv6(host) || Self.isIPv4(host) }

    /// The `Host` header's value (RFC 9110 §7.2): the host, in brackets when IPv6, and the port
    /// unless it is the scheme's default.
    public var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == scheme.defaultPort ? name : "\(name):\(port)"
    }

    public var description: String { "\(scheme.rawValue)://\(authority)" }

    /// `localhost`, 127.0.0.0/8 or ::1: the hosts a plain `http://` URL may name.
    public var isLoopback: Bool { Self.isLoopback(host) }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return false }
        return UInt32(bigEndian: address.s_addr) >> 24 == 127
    }

    static func isIPv4(_ host: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, host, &address) == 1
    }

    static func isIPv6(_ host: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, host, &address) == 1
    }
}

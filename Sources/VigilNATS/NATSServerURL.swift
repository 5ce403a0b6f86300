/// One server of a cluster's URL list: `nats://host:port`, `tls://host:port`, `host:port`,
/// `[v6]:port`, or a bare host (port 4222). The host is a numeric address or a DNS name (resolved
/// off the loop, `NameResolver`). `tls://` asks for TLS with that server (a `cluster.tls` section
/// asks it for all). Credentials inside the URL are refused (they belong in the `cluster:`
/// section, where they are not logged), as are other schemes, with the reason.
public struct NATSServerURL: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    /// `tls://`: the connection must be upgraded to TLS (never used in plaintext).
    public var tls: Bool

    public init(host: String, port: UInt16, tls: Bool = false) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    public static let defaultPort: UInt16 = 4222

    /// Parses `text`; the error says what is wrong with it.
    public static func parse(_ text: String) -> Result<NATSServerURL, NATSURLError> {
        var rest = Substring(text)
        var tls = false
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let name = rest[..<colon].lowercased()
            switch name {
            case "nats": break
            case "tls": tls = true
            default: return .failure(.unsupported("scheme \(name):// (use nats:// or tls://)"))
            }
            rest = rest[rest.index(colon, offsetBy: 3)...]
        }
        if rest.contains("@") { return .failure(.unsupported("credentials in the URL (use cluster.user/password or cluster.token)")) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("?") { return .failure(.malformed("a path or query after the address")) }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return .failure(.malformed("'[' without ']'")) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return .failure(.malformed("junk after ']'")) }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
            if portText!.contains(":") { return .failure(.malformed("an IPv6 address needs brackets")) }
        } else {
            host = rest
        }
        guard !host.isEmpty else { return .failure(.malformed("no host")) }
        if !host.contains(":") && !isHostName(host) {
            return .failure(.malformed("the host is neither an IP address nor a DNS name (letters, digits, '-', '.'; at most 253)"))
        }
        var port = defaultPort
        if let portText {
            guard let p = UInt16(portText), p > 0 else { return .failure(.malformed("port '\(portText.prefix(8))' is not 1-65535")) }
            port = p
        }
        return .success(NATSServerURL(host: String(host), port: port, tls: tls))
    }

    /// A DNS name (RFC 1123 labels: 1-63 of letters, digits and '-', not at either end; 253 at
    /// most in all; a final dot allowed) or a dotted IPv4 address, which has the same characters.
    public static func isHostName(_ host: Substring) -> Bool {
        var name = host
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            label.utf8.count >= 1 && label.utf8.count <= 63 && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 45 }
        }
    }

    public var description: String {
        let scheme = tls ? "tls" : "nats"
        return host.contains(":") ? "\(scheme)://[\(host)]:\(port)" : "\(scheme)://\(host):\(port)"
    }
}

public enum NATSURLError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    case unsupported(String)

    public var description: String {
        switch self {
        case .malformed(let why): return "malformed NATS URL: \(why)"
        case .unsupported(let what): return "not supported: \(what)"
        }
    }
}

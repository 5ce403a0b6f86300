/// One server of a cluster's URL list: `nats://host:port`, `host:port`, `[v6]:port`, or a bare
/// host (port 4222). What Vigil does not support yet is refused with the reason, not ignored:
/// `tls://` (the loop's TLS starts at the first byte, NATS upgrades after its plaintext INFO) and
/// credentials inside the URL (they belong in the `cluster:` section, where they are not logged).
public struct NATSServerURL: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    public static let defaultPort: UInt16 = 4222

    /// Parses `text`; the error says what is wrong with it.
    public static func parse(_ text: String) -> Result<NATSServerURL, NATSURLError> {
        var rest = Substring(text)
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let name = rest[..<colon].lowercased()
            switch name {
            case "nats": break
            case "tls": return .failure(.unsupported("tls:// (TLS to NATS is not supported yet)"))
            default: return .failure(.unsupported("scheme \(name):// (use nats://)"))
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
        var port = defaultPort
        if let portText {
            guard let p = UInt16(portText), p > 0 else { return .failure(.malformed("port '\(portText.prefix(8))' is not 1-65535")) }
            port = p
        }
        return .success(NATSServerURL(host: String(host), port: port))
    }

    public var description: String {
        host.contains(":") ? "nats://[\(host)]:\(port)" : "nats://\(host):\(port)"
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

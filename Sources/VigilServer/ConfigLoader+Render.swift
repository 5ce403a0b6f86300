import VigilReplication

/// The config written back as YAML (`vigild --print-config`): what an operator reads to see the
/// values in force after the file, the environment and the flags.
///
/// It walks `ConfigLoader.schema`, the same table the loader reads with, so a key added there is
/// printed without a change here; the output loads back to the same config (`ConfigLoaderRenderTests`),
/// but for the secrets: `cluster.password` and `cluster.token` are printed as `"(set, not shown)"`
/// when set, so the output can be pasted into an issue.
extension ConfigLoader {
    /// Keys whose values are never printed.
    static let secretKeys: Set<String> = ["cluster.password", "cluster.token"]

    public static func yaml(_ config: ServerConfig) -> String {
        var lines: [String] = []
        for (section, keys) in schema {
            // Without a `cluster:` section the node runs alone: printing the section would turn clustering on.
            if section == "cluster" && !config.replication.enabled { continue }
            lines.append("\(section):")
            for (key, kind) in keys {
                if case .natsTLS = kind {
                    lines += natsTLSLines(config.replication)
                } else if let value = value(kind, config) {
                    let hidden = secretKeys.contains("\(section).\(key)") && value != quoted("")
                    lines.append("  \(key): \(hidden ? quoted("(set, not shown)") : value)")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// One key's value as YAML text; nil for what has no value of its own (`unsupported`, `natsTLS`).
    static func value(_ kind: Kind, _ c: ServerConfig) -> String? {
        switch kind {
        case .integer(_, let path): "\(c[keyPath: path])"
        case .integer64(_, let path): "\(c[keyPath: path])"
        case .boolean(let path): c[keyPath: path] ? "true" : "false"
        case .address(let path): quoted(c[keyPath: path].description)
        case .optionalAddress(let path): c[keyPath: path].map { quoted($0.description) } ?? "off"
        case .text(let path), .path(let path), .choice(_, let path), .name(let path), .replicationName(let path):
            quoted(c[keyPath: path])
        case .prefixes(let path), .names(_, let path), .natsURLs(let path):
            "[" + c[keyPath: path].map(quoted).joined(separator: ", ") + "]"
        case .coordinate(let latitude, let longitude): "[\(c[keyPath: latitude]), \(c[keyPath: longitude])]"
        case .escalation(let path):
            "[" + c[keyPath: path].map { "{after_s: \($0.afterSeconds), channels: [\($0.channels.joined(separator: ", "))]}" }
                .joined(separator: ", ") + "]"
        case .natsTLS, .unsupported: nil
        }
    }

    /// `cluster.tls` as set: absent when TLS is not asked for, each file or name only when given.
    static func natsTLSLines(_ replication: ReplicationSettings) -> [String] {
        guard replication.tlsEnabled else { return [] }
        var lines = ["  tls:"]
        for (key, value) in [("ca_file", replication.tlsCAFile), ("cert_file", replication.tlsCertFile),
                             ("key_file", replication.tlsKeyFile), ("server_name", replication.tlsServerName)] where !value.isEmpty {
            lines.append("    \(key): \(quoted(value))")
        }
        lines.append("    handshake_first: \(replication.tlsHandshakeFirst)")
        return lines
    }

    /// A YAML double-quoted scalar: backslash, quote and control characters escaped, the rest as it is.
    static func quoted(_ text: String) -> String {
        doubleQuoted(text) { code in
            let hex = String(code, radix: 16)
            return "\\x" + (hex.count < 2 ? "0" + hex : hex)
        }
    }
}

import VigilReplication
import VigilLoop
import VigilNATS
import Yams

/// The `cluster:` section's own checks: `cluster.tls` key by key, the NATS URLs, the rules between
/// its keys, and the credential and TLS files read when the config is loaded.
extension ConfigLoader {
    /// The keys of `cluster.tls`.
    static let natsTLSKeys = ["ca_file", "cert_file", "key_file", "server_name", "handshake_first"]

    /// `cluster.tls`: a mapping (even empty: TLS with the system's CAs) of `natsTLSKeys`.
    static func applyNATSTLS(_ node: Node, to config: inout ServerConfig) -> [ConfigIssue] {
        config.replication.tlsEnabled = true
        if case .scalar(let s) = node, s.string.isEmpty || s.string == "~" || s.string == "null" { return [] }
        guard let entries = node.mapping else {
            return [ConfigIssue(key: "cluster.tls", message: "must be a mapping of \(natsTLSKeys.joined(separator: ", "))", line: line(node))]
        }
        var issues: [ConfigIssue] = []
        for (keyNode, valueNode) in entries {
            let key = keyNode.scalar?.string ?? "?"
            let name = "cluster.tls.\(key)"
            guard let text = valueNode.scalar?.string else {
                issues.append(ConfigIssue(key: name, message: "must be a single value", line: line(valueNode)))
                continue
            }
            let pathMessage = "must be a file system path of at most 4096 bytes"
            let isPath = text.utf8.count <= 4096 && !text.isEmpty && !text.utf8.contains(0)
            switch key {
            case "ca_file", "cert_file", "key_file":
                guard isPath else {
                    issues.append(ConfigIssue(key: name, message: pathMessage, line: line(valueNode)))
                    continue
                }
                if key == "ca_file" { config.replication.tlsCAFile = text }
                if key == "cert_file" { config.replication.tlsCertFile = text }
                if key == "key_file" { config.replication.tlsKeyFile = text }
            case "server_name":
                guard NATSServerURL.isHostName(Substring(text)) || SocketAddress(host: text, port: 1) != nil else {
                    issues.append(ConfigIssue(key: name, message: "must be a DNS name or an IP address, got \"\(text.prefix(64))\"", line: line(valueNode)))
                    continue
                }
                config.replication.tlsServerName = text
            case "handshake_first":
                switch text.lowercased() {
                case "true", "yes", "on": config.replication.tlsHandshakeFirst = true
                case "false", "no", "off": config.replication.tlsHandshakeFirst = false
                default: issues.append(ConfigIssue(key: name, message: "must be true or false, got \"\(text.prefix(16))\"", line: line(valueNode)))
                }
            default:
                issues.append(ConfigIssue(key: name, message: "unknown key (known in cluster.tls: \(natsTLSKeys.joined(separator: ", ")))", line: line(keyNode)))
            }
        }
        return issues
    }

    /// Reads the cluster's credential file and builds its TLS context once, to report now what
    /// would otherwise stop the node at its first connection.
    static func loadReplicationFiles(_ replication: inout ReplicationSettings) -> [ConfigIssue] {
        var issues: [ConfigIssue] = []
        do {
            try replication.loadCredentialFiles()
        } catch {
            issues.append(ConfigIssue(key: error.key, message: error.message))
        }
        do {
            _ = try replication.makeTLS()
        } catch {
            let key = error.what.contains("CA file") ? "cluster.tls.ca_file"
                : error.what.contains("client key") ? "cluster.tls.key_file" : "cluster.tls.cert_file"
            issues.append(ConfigIssue(key: key, message: error.description))
        }
        return issues
    }

    /// `cluster.urls`: every entry a NATS URL (`nats://` or `tls://`; a host name is resolved off
    /// the loop at every connection attempt).
    static func applyNATSURLs(_ node: Node, to config: inout ServerConfig, _ path: Path<[String]>) -> String? {
        guard let items = node.sequence else { return "must be a list of NATS URLs such as nats://127.0.0.1:4222" }
        var urls: [String] = []
        for item in items {
            guard let text = item.scalar?.string else { return "each entry must be a URL, not a list or mapping" }
            switch NATSServerURL.parse(text) {
            case .failure(let error):
                return "\"\(text.prefix(64))\": \(error)"
            case .success:
                break
            }
            urls.append(text)
        }
        guard (1...32).contains(urls.count) else { return "must list 1 to 32 NATS servers" }
        config[keyPath: path] = urls
        return nil
    }

    static func crossCheckReplication(_ c: ReplicationSettings) -> [ConfigIssue] {
        guard c.enabled else { return [] }
        var issues: [ConfigIssue] = []
        if c.urls.isEmpty {
            issues.append(ConfigIssue(key: "cluster.urls", message: "must list at least one NATS server (nats://HOST:PORT)"))
        }
        if c.nodeID.isEmpty {
            issues.append(ConfigIssue(key: "cluster.node_id", message: "must name this node (1 to 32 characters a-z, 0-9, '_' or '-'), unique in the cluster"))
        }
        if !c.token.isEmpty && (!c.user.isEmpty || !c.password.isEmpty) {
            issues.append(ConfigIssue(key: "cluster.token", message: "must not be set together with cluster.user/password: choose one"))
        }
        if c.user.isEmpty != c.password.isEmpty {
            issues.append(ConfigIssue(key: c.user.isEmpty ? "cluster.user" : "cluster.password", message: "cluster.user and cluster.password go together"))
        }
        if !c.nkeySeedFile.isEmpty && !c.credsFile.isEmpty {
            issues.append(ConfigIssue(key: "cluster.creds_file", message: "must not be set together with cluster.nkey_seed_file: a .creds file carries its own nkey seed; choose one"))
        }
        if (!c.nkeySeedFile.isEmpty || !c.credsFile.isEmpty) && (!c.token.isEmpty || !c.user.isEmpty) {
            let key = c.nkeySeedFile.isEmpty ? "cluster.creds_file" : "cluster.nkey_seed_file"
            issues.append(ConfigIssue(key: key, message: "must not be set together with cluster.user/password or cluster.token: choose one way to authenticate"))
        }
        if c.tlsCertFile.isEmpty != c.tlsKeyFile.isEmpty {
            issues.append(ConfigIssue(key: c.tlsCertFile.isEmpty ? "cluster.tls.cert_file" : "cluster.tls.key_file",
                                      message: "cluster.tls.cert_file and cluster.tls.key_file go together (the client certificate and its key)"))
        }
        return issues
    }
}

import VigilNATS

/// The `cluster:` section of vigild's config: which NATS servers, as whom, under which name.
///
/// Without the section (`enabled` false) vigild runs alone, exactly as without this code. The
/// cluster's `name` is both the JetStream stream's name and the first token of its subjects
/// (`<name>.pins.…`, `<name>.panic.…`); `nodeID` names this node in the stream's records and in
/// NATS's monitoring. Credentials are a user and password or a token; nkeys and `.creds` files
/// are refused by the config loader as not supported yet, as is TLS to NATS.
public struct ClusterSettings: Equatable, Sendable, CustomStringConvertible {
    /// A `cluster:` section was given.
    public var enabled = false
    /// The servers as written (`nats://HOST:PORT`), checked by the config loader.
    public var urls: [String] = []
    public var name = "VIGIL"
    public var nodeID = ""
    public var user = ""
    public var password = ""
    public var token = ""
    /// Copies of the stream JetStream keeps (1, or 3 and 5 on a NATS cluster of that many servers).
    public var replicas = 1
    /// The stream's bounds: records older or beyond these go first (snapshots cover them).
    public var maxAgeSeconds = 7 * 86_400
    public var maxBytes: Int64 = 1 << 30
    /// How long a JetStream call or a publish's acknowledgement may take.
    public var requestTimeoutMs = 5_000
    /// How often a node with a state directory publishes its snapshot to the cluster's snapshot
    /// store (after a local snapshot, at most this often), for nodes that join after the
    /// stream's retention dropped its start.
    public var snapshotPublishIntervalSeconds = 300
    /// The largest snapshot a node publishes or downloads.
    public var maxSnapshotBytes = 256 * 1_048_576

    public init() {}

    public var serverURLs: [NATSServerURL] { urls.compactMap { try? NATSServerURL.parse($0).get() } }

    public var credentials: NATSConnectOptions.Credentials {
        if !token.isEmpty { return .token(token) }
        if !user.isEmpty { return .userPassword(user: user, password: password) }
        return .none
    }

    public var connectOptions: NATSConnectOptions {
        NATSConnectOptions(name: "vigild-\(nodeID)", credentials: credentials, version: "1")
    }

    /// The stream every node writes to and reads from.
    public var streamConfig: JSStreamConfig {
        JSStreamConfig(name: name, subjects: ["\(name).>"], storage: .file, replicas: replicas,
                       maxAgeSeconds: Int64(maxAgeSeconds), maxBytes: maxBytes)
    }

    /// Whether `name` may name the stream and lead its subjects: 1 to 32 of A-Z, a-z, 0-9, '_', '-'.
    public static func isClusterName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 32 && name.utf8.allSatisfy {
            ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45
        }
    }

    /// Without the secrets: safe to log.
    public var description: String {
        let auth = !token.isEmpty ? "token" : !user.isEmpty ? "user/password" : "none"
        return "cluster \(name), node \(nodeID), \(urls.count) NATS server(s), auth \(auth), \(replicas) replica(s)"
    }
}

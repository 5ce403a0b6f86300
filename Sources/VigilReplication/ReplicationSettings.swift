import Glibc
import VigilLoop
import VigilNATS

/// The `cluster:` section of vigild's config: which NATS servers, as whom, under which name.
///
/// Without the section (`enabled` false) vigild runs alone, exactly as without this code. The
/// cluster's `name` is both the JetStream stream's name and the first token of its subjects
/// (`<name>.pins.…`, `<name>.panic.…`); `nodeID` names this node in the stream's records and in
/// NATS's monitoring. Credentials are one of: a user and password, a token, an nkey seed file, a
/// `.creds` file (user JWT + nkey seed). TLS is asked for by `tls://` URLs or a `cluster.tls`
/// section (then with every server); the server's certificate is always verified.
public struct ReplicationSettings: Equatable, Sendable, CustomStringConvertible {
    /// A `cluster:` section was given.
    public var enabled = false
    /// The servers as written (`nats://HOST:PORT`), checked by the config loader.
    public var urls: [String] = []
    public var name = "VIGIL"
    public var nodeID = ""
    public var user = ""
    public var password = ""
    public var token = ""
    /// A file holding a user nkey seed (`SU...`), and a `.creds` file: paths as written; what they
    /// hold is read by `loadCredentialFiles` into `fileCredentials`.
    public var nkeySeedFile = ""
    public var credsFile = ""
    /// The nkey or JWT credentials read from those files (`.none` until loaded, or without them).
    public var fileCredentials: NATSConnectOptions.Credentials = .none
    /// A `cluster.tls` section was given: TLS with every server of the list.
    public var tlsEnabled = false
    /// PEM files: the CA that signed the servers' certificates (empty: the system's CAs), and
    /// this node's certificate and key for servers that ask for one (`verify: true`).
    public var tlsCAFile = ""
    public var tlsCertFile = ""
    public var tlsKeyFile = ""
    /// The name every server's certificate must carry (empty: each URL's host).
    public var tlsServerName = ""
    /// TLS from the first byte (nats-server's `handshake_first`) instead of after INFO.
    public var tlsHandshakeFirst = false
    /// Copies of the stream JetStream keeps (1, or 3 and 5 on a NATS cluster of that many servers).
    public var replicas = 1
    /// The stream's bounds: records older or beyond these go first (snapshots cover them).
    public var maxAgeSeconds = 7 * 86_400
    public var maxBytes: Int64 = 1 << 30
    /// How long a JetStream call or a publish's acknowledgement may take.
    public var requestTimeoutMs = 5_000
    /// Failover (docs/CLUSTER.md "Failover"): H, the ordered consumer's idle heartbeat (lost
    /// after 3 × H of silence); A, how long one publish, consumer creation or leader probe waits
    /// for its answer; W, how long a held write waits for the stream before it is answered
    /// `unavailable`; p, the NATS ping interval (a silent server is dropped after 3 × p).
    public var consumerHeartbeatMs = 1_000
    public var ackTimeoutMs = 500
    public var writeDeadlineMs = 10_000
    public var pingIntervalMs = 2_000
    /// How often a node with a state directory publishes its snapshot to the cluster's snapshot
    /// store (after a local snapshot, at most this often), for nodes that join after the
    /// stream's retention dropped its start.
    public var snapshotPublishIntervalSeconds = 300
    /// The largest snapshot a node publishes or downloads.
    public var maxSnapshotBytes = 256 * 1_048_576

    public init() {}

    public var serverURLs: [NATSServerURL] { urls.compactMap { try? NATSServerURL.parse($0).get() } }

    public var credentials: NATSConnectOptions.Credentials {
        if fileCredentials != .none { return fileCredentials }
        if !token.isEmpty { return .token(token) }
        if !user.isEmpty { return .userPassword(user: user, password: password) }
        return .none
    }

    /// `tlsRequired` when the config asks for TLS: a client made from these options without a
    /// TLS setup refuses to connect rather than speak plaintext (`makeClient` gives it one).
    public var connectOptions: NATSConnectOptions {
        NATSConnectOptions(name: "vigild-\(nodeID)", credentials: credentials, tlsRequired: usesTLS, version: "1")
    }

    /// Whether any connection is TLS (a `tls://` URL or the `cluster.tls` section).
    public var usesTLS: Bool { tlsEnabled || serverURLs.contains { $0.tls } }

    /// The TLS setup for the client (nil without TLS): the CA file (or the system's CAs), the
    /// client certificate when configured. Fails with OpenSSL's reason and the file's name.
    public func makeTLS() throws(TLSError) -> NATSTLS? {
        guard usesTLS else { return nil }
        let context = try TLSContext.verifyingClient(
            caFile: tlsCAFile.isEmpty ? nil : tlsCAFile,
            certificateChain: tlsCertFile.isEmpty ? nil : tlsCertFile,
            privateKey: tlsKeyFile.isEmpty ? nil : tlsKeyFile)
        return NATSTLS(context: context, serverName: tlsServerName.isEmpty ? nil : tlsServerName,
                       everyServer: tlsEnabled, handshakeFirst: tlsHandshakeFirst)
    }

    /// The client this config describes, on `loop` (not started). The credential files must have
    /// been loaded (`loadCredentialFiles`, which the config loader does).
    public func makeClient(settings: NATSClientSettings = NATSClientSettings(), loop: EventLoop) throws(TLSError) -> NATSClient {
        NATSClient(urls: serverURLs, options: connectOptions, settings: settings, tls: try makeTLS(), loop: loop)
    }

    /// Reads `nkeySeedFile` or `credsFile` into `fileCredentials`. A file readable by every user
    /// of the machine is refused (it holds a private key: mode 600, or 640 for a service group),
    /// as is a file that is missing, not a regular file, larger than 64 KiB or malformed; the
    /// error names the file and what is wrong, never its content.
    public mutating func loadCredentialFiles() throws(SecretFileError) {
        fileCredentials = .none
        if !nkeySeedFile.isEmpty {
            let bytes = try Self.readSecretFile(nkeySeedFile, key: "cluster.nkey_seed_file")
            let seed: NKey.Seed
            do {
                seed = try NKey.decodeSeed(String(decoding: bytes, as: UTF8.self))
            } catch {
                throw SecretFileError(key: "cluster.nkey_seed_file", message: "\(nkeySeedFile): not an nkey seed: \(error)")
            }
            guard seed.role == .user else {
                throw SecretFileError(key: "cluster.nkey_seed_file", message: "\(nkeySeedFile): the seed is not a user's (SU...): its role is \(seed.role.letter)")
            }
            do {
                fileCredentials = .nkey(publicKey: try NATSNKeySigner.publicKey(of: seed), seed: seed)
            } catch {
                throw SecretFileError(key: "cluster.nkey_seed_file", message: "\(nkeySeedFile): \(error)")
            }
        } else if !credsFile.isEmpty {
            let bytes = try Self.readSecretFile(credsFile, key: "cluster.creds_file")
            do {
                let creds = try NATSCredentials.parse(bytes)
                fileCredentials = .jwt(creds.jwt, seed: creds.seed)
            } catch {
                throw SecretFileError(key: "cluster.creds_file", message: "\(credsFile): \(error)")
            }
        }
    }

    /// A small private file's bytes (see `loadCredentialFiles` for what is refused); errors name
    /// the config `key`. Also the `push:` section's relay secret.
    public static func readSecretFile(_ path: String, key: String) throws(SecretFileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SecretFileError(key: key, message: "\(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SecretFileError(key: key, message: "\(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw SecretFileError(key: key, message: "\(path): not a regular file") }
        guard info.st_mode & S_IROTH == 0 && info.st_mode & S_IWOTH == 0 else {
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw SecretFileError(key: key, message: "\(path): readable or writable by every user of this machine (mode \(mode)); it holds a private key: chmod 600 (or 640 for a service group)")
        }
        guard info.st_size <= 65_536 else { throw SecretFileError(key: key, message: "\(path): larger than 64 KiB") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size) + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw SecretFileError(key: key, message: "\(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            count += n
        }
        guard count <= 65_536 else { throw SecretFileError(key: key, message: "\(path): larger than 64 KiB") }
        return Array(bytes[..<count])
    }

    /// The stream every node writes to and reads from.
    public var streamConfig: JSStreamConfig {
        JSStreamConfig(name: name, subjects: ["\(name).>"], storage: .file, replicas: replicas,
                       maxAgeSeconds: Int64(maxAgeSeconds), maxBytes: maxBytes)
    }

    /// Whether `name` may name the stream and lead its subjects: 1 to 32 of A-Z, a-z, 0-9, '_', '-'.
    public static func isReplicationName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 32 && name.utf8.allSatisfy {
            ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 || $0 == 45
        }
    }

    /// Without the secrets: safe to log.
    public var description: String {
        let auth = !nkeySeedFile.isEmpty ? "nkey" : !credsFile.isEmpty ? "creds" : credentials.kind
        let tls = usesTLS ? (tlsCertFile.isEmpty ? ", TLS" : ", TLS with a client certificate") : ""
        return "cluster \(name), node \(nodeID), \(urls.count) NATS server(s), auth \(auth)\(tls), \(replicas) replica(s) configured (the stream's own: the \"stream ready\" line)"
    }
}

/// A credential file of the `cluster:` section could not be used: the config key and why.
public struct SecretFileError: Error, Equatable, Sendable, CustomStringConvertible {
    public let key: String
    public let message: String

    public init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    public var description: String { "\(key): \(message)" }
}

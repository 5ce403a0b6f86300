import Foundation
import Testing
import VigilReplication
import VigilNATS
@testable import VigilServer

/// The `cluster:` section (issue 16): read in full, refused with a reason per key.
@Suite struct ReplicationConfigTests {
    private func issues(_ yaml: String) -> [String] {
        do {
            _ = try ConfigLoader.load(yaml: yaml)
            return []
        } catch let error as ConfigError {
            return error.issues.map { "\($0.key): \($0.message)" }
        } catch {
            return ["\(error)"]
        }
    }

    @Test func withoutTheSectionNothingChanges() throws {
        #expect(try ConfigLoader.load(yaml: "log:\n  level: info\n").replication == ReplicationSettings())
        #expect(ServerConfig().replication.enabled == false)
    }

    @Test func everyKeyIsRead() throws {
        let c = try ConfigLoader.load(yaml: """
            cluster:
              urls: [nats://10.0.0.1:4222, "[::1]:4223", 10.0.0.3]
              name: city-1
              node_id: n_2
              user: vigil
              password: "p w"
              replicas: 3
              max_age_s: 3600
              max_bytes: 2_000_000
              request_timeout_ms: 900
            """).replication
        #expect(c.enabled && c.name == "city-1" && c.nodeID == "n_2" && c.replicas == 3)
        #expect(c.serverURLs.map(\.description) == ["nats://10.0.0.1:4222", "nats://[::1]:4223", "nats://10.0.0.3:4222"])
        #expect(c.credentials == .userPassword(user: "vigil", password: "p w"))
        #expect(c.streamConfig.subjects == ["city-1.>"] && c.streamConfig.maxAgeSeconds == 3600 && c.streamConfig.maxBytes == 2_000_000)
        #expect(c.requestTimeoutMs == 900)
        // The description is what may be logged: no secret in it.
        #expect(!c.description.contains("p w") && c.description.contains("user/password"))
    }

    @Test func anEmptySectionSaysWhatIsMissing() {
        #expect(issues("cluster:\n") == [
            "cluster.urls: must list at least one NATS server (nats://HOST:PORT)",
            "cluster.node_id: must name this node (1 to 32 characters a-z, 0-9, '_' or '-'), unique in the cluster",
        ])
    }

    @Test(arguments: [
        ("urls: [ws://10.0.0.1:4222]", "cluster.urls: \"ws://10.0.0.1:4222\": not supported: scheme ws:// (use nats:// or tls://)"),
        ("urls: [nats://u:p@10.0.0.1]", "cluster.urls: \"nats://u:p@10.0.0.1\": not supported: credentials in the URL (use cluster.user/password or cluster.token)"),
        ("urls: [nats://nats_1.example:4222]", "cluster.urls: \"nats://nats_1.example:4222\": malformed NATS URL: the host is neither an IP address nor a DNS name (letters, digits, '-', '.'; at most 253)"),
        ("urls: [nats://10.0.0.1:0]", "cluster.urls: \"nats://10.0.0.1:0\": malformed NATS URL: port '0' is not 1-65535"),
        ("urls: nats://10.0.0.1", "cluster.urls: must be a list of NATS URLs such as nats://127.0.0.1:4222"),
        ("name: a.b", "cluster.name: must be 1 to 32 characters A-Z, a-z, 0-9, '_' or '-' (it names the JetStream stream and leads its subjects)"),
        ("node_id: N1", "cluster.node_id: must be 1 to 32 characters a-z, 0-9, '_' or '-', got \"N1\""),
        ("nkey_seed_file: /nonexistent/vigil.nk", "cluster.nkey_seed_file: /nonexistent/vigil.nk: No such file or directory"),
        ("creds_file: /nonexistent/x.creds", "cluster.creds_file: /nonexistent/x.creds: No such file or directory"),
        ("creds_file: /a.creds\n  nkey_seed_file: /a.nk", "cluster.creds_file: must not be set together with cluster.nkey_seed_file: a .creds file carries its own nkey seed; choose one"),
        ("creds_file: /a.creds\n  token: t", "cluster.creds_file: must not be set together with cluster.user/password or cluster.token: choose one way to authenticate"),
        ("tls:\n    cert_file: /a.pem", "cluster.tls.key_file: cluster.tls.cert_file and cluster.tls.key_file go together (the client certificate and its key)"),
        ("tls:\n    verify: true", "cluster.tls.verify: unknown key (known in cluster.tls: ca_file, cert_file, key_file, server_name, handshake_first)"),
        ("tls:\n    server_name: \"a b\"", "cluster.tls.server_name: must be a DNS name or an IP address, got \"a b\""),
        ("tls:\n    handshake_first: maybe", "cluster.tls.handshake_first: must be true or false, got \"maybe\""),
        ("tls: [a]", "cluster.tls: must be a mapping of ca_file, cert_file, key_file, server_name, handshake_first"),
        ("replicas: 7", "cluster.replicas: must be between 1 and 5, got 7"),
        ("snapshot_publish_interval_s: 0", "cluster.snapshot_publish_interval_s: must be between 1 and 86400, got 0"),
        ("snapshot_publish_interval_s: 86401", "cluster.snapshot_publish_interval_s: must be between 1 and 86400, got 86401"),
        ("max_snapshot_bytes: 1048575", "cluster.max_snapshot_bytes: must be between 1048576 and 17179869184, got 1048575"),
        ("max_snapshot_bytes: 17179869185", "cluster.max_snapshot_bytes: must be between 1048576 and 17179869184, got 17179869185"),
        ("token: t\n  user: u\n  password: p", "cluster.token: must not be set together with cluster.user/password: choose one"),
        ("user: u", "cluster.password: cluster.user and cluster.password go together"),
    ])
    func refusesWithAReason(_ line: String, _ expected: String) {
        // The required keys, unless the line under test is one of them.
        var yaml = "cluster:\n  " + line + "\n"
        if !line.hasPrefix("urls") { yaml += "  urls: [nats://127.0.0.1:4222]\n" }
        if !line.hasPrefix("node_id") { yaml += "  node_id: n1\n" }
        let found = issues(yaml).filter { !(line.hasPrefix("urls") && $0.hasPrefix("cluster.urls: must list")) }
        #expect(found == [expected])
    }

    @Test func theSnapshotKeysTakeTheirBounds() throws {
        let base = "cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n"
        for (interval, bytes) in [(1, 1_048_576), (86_400, 1 << 34)] {
            let c = try ConfigLoader.load(yaml: base + "  snapshot_publish_interval_s: \(interval)\n  max_snapshot_bytes: \(bytes)\n").replication
            #expect(c.snapshotPublishIntervalSeconds == interval && c.maxSnapshotBytes == bytes)
        }
    }

    /// config/vigild.yaml shows the section commented out, with the defaults: uncommented, it
    /// gives exactly the built-in settings (but for the required keys, which have none).
    @Test func theShippedConfigShowsTheBuiltInDefaults() throws {
        // Tests run from the package root.
        let lines = try String(contentsOfFile: "config/vigild.yaml", encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex(of: "# cluster:"))
        let section = lines[start...].prefix { $0.hasPrefix("#") }.map { $0.dropFirst(2) }
        let c = try ConfigLoader.load(yaml: section.joined(separator: "\n") + "\n").replication
        #expect(c.snapshotPublishIntervalSeconds == 300 && c.maxSnapshotBytes == 256 << 20)
        var expected = ReplicationSettings()
        expected.enabled = true
        expected.urls = c.urls
        expected.nodeID = c.nodeID
        #expect(c == expected)
    }

    /// A private file in a fresh temporary directory, with `mode`.
    private func secretFile(_ name: String, _ text: String, mode: Int) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vigil-cluster-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    private let seed = NKey.Seed(role: .user, raw: (0..<32).map { UInt8($0 * 7 & 0xFF) })

    @Test func readsAnNkeySeedFileAtLoad() throws {
        let path = try secretFile("vigil.nk", NKey.encodeSeed(seed) + "\n", mode: 0o600)
        let c = try ConfigLoader.load(yaml: "cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  nkey_seed_file: \(path)\n").replication
        #expect(c.credentials == .nkey(publicKey: try NATSNKeySigner.publicKey(of: seed), seed: seed))
        // Neither the description nor an interpolation of the settings shows the seed.
        #expect(c.description.contains("auth nkey") && !c.description.contains(NKey.encodeSeed(seed)))
        #expect(!"\(c)".contains(NKey.encodeSeed(seed)) && !String(reflecting: c.credentials).contains("\(seed.raw)"))
    }

    @Test func refusesAWorldReadableOrMalformedSecretFile() throws {
        let open = try secretFile("open.nk", NKey.encodeSeed(seed), mode: 0o644)
        #expect(issues("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  nkey_seed_file: \(open)\n") == [
            "cluster.nkey_seed_file: \(open): readable or writable by every user of this machine (mode 644); it holds a private key: chmod 600 (or 640 for a service group)",
        ])
        var damaged = Array(NKey.encodeSeed(seed))
        damaged[20] = damaged[20] == "A" ? "B" : "A"
        let bad = try secretFile("bad.nk", String(damaged), mode: 0o640)
        #expect(issues("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  nkey_seed_file: \(bad)\n") == [
            "cluster.nkey_seed_file: \(bad): not an nkey seed: its checksum does not match (a character was changed or lost)",
        ])
        let account = try secretFile("acct.nk", NKey.encodeSeed(NKey.Seed(role: .account, raw: seed.raw)), mode: 0o600)
        #expect(issues("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  nkey_seed_file: \(account)\n") == [
            "cluster.nkey_seed_file: \(account): the seed is not a user's (SU...): its role is A",
        ])
    }

    @Test func readsACredsFileAtLoad() throws {
        let jwt = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln"
        let text = """
            -----BEGIN NATS USER JWT-----
            \(jwt)
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.

            -----BEGIN USER NKEY SEED-----
            \(NKey.encodeSeed(seed))
            ------END USER NKEY SEED------
            """
        let path = try secretFile("vigil.creds", text, mode: 0o600)
        let c = try ConfigLoader.load(yaml: "cluster:\n  urls: [tls://nats.example:4222]\n  node_id: n1\n  creds_file: \(path)\n").replication
        #expect(c.credentials == .jwt(jwt, seed: seed))
        #expect(c.usesTLS && !c.description.contains(jwt) && c.description.contains("auth creds, TLS"))
        let truncated = try secretFile("short.creds", String(text.prefix(150)), mode: 0o600)
        #expect(issues("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  creds_file: \(truncated)\n") == [
            "cluster.creds_file: \(truncated): the nkey seed is missing (a .creds file holds the user JWT, then the nkey seed, each between ----- marker lines)",
        ])
    }

    @Test func readsTheTLSSectionAndHostNames() throws {
        let c = try ConfigLoader.load(yaml: """
            cluster:
              urls: [nats://nats-1.example.org:4222, tls://10.0.0.2]
              node_id: n1
              tls:
                server_name: nats.internal
                handshake_first: true
            """).replication
        #expect(c.serverURLs.map(\.description) == ["nats://nats-1.example.org:4222", "tls://10.0.0.2:4222"])
        #expect(c.tlsEnabled && c.tlsServerName == "nats.internal" && c.tlsHandshakeFirst && c.tlsCAFile.isEmpty)
        // An empty section: TLS with every server, verified against the system's CAs.
        let empty = try ConfigLoader.load(yaml: "cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  tls:\n").replication
        #expect(empty.tlsEnabled && empty.usesTLS)
        let missingCA = issues("cluster:\n  urls: [nats://127.0.0.1:4222]\n  node_id: n1\n  tls:\n    ca_file: /nonexistent/ca.pem\n")
        #expect(missingCA.count == 1 && missingCA[0].hasPrefix("cluster.tls.ca_file: cannot load the CA file /nonexistent/ca.pem"), "\(missingCA)")
    }
}

import Testing
import VigilCluster
@testable import VigilServer

/// The `cluster:` section (issue 16): read in full, refused with a reason per key.
@Suite struct ClusterConfigTests {
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
        #expect(try ConfigLoader.load(yaml: "log:\n  level: info\n").cluster == ClusterSettings())
        #expect(ServerConfig().cluster.enabled == false)
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
            """).cluster
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
        ("urls: [tls://10.0.0.1:4222]", "cluster.urls: \"tls://10.0.0.1:4222\": not supported: tls:// (TLS to NATS is not supported yet)"),
        ("urls: [nats://u:p@10.0.0.1]", "cluster.urls: \"nats://u:p@10.0.0.1\": not supported: credentials in the URL (use cluster.user/password or cluster.token)"),
        ("urls: [nats://nats.example.org:4222]", "cluster.urls: \"nats://nats.example.org:4222\": the host must be a numeric IPv4 or bracketed IPv6 address (names are not resolved)"),
        ("urls: [nats://10.0.0.1:0]", "cluster.urls: \"nats://10.0.0.1:0\": malformed NATS URL: port '0' is not 1-65535"),
        ("urls: nats://10.0.0.1", "cluster.urls: must be a list of NATS URLs such as nats://127.0.0.1:4222"),
        ("name: a.b", "cluster.name: must be 1 to 32 characters A-Z, a-z, 0-9, '_' or '-' (it names the JetStream stream and leads its subjects)"),
        ("node_id: N1", "cluster.node_id: must be 1 to 32 characters a-z, 0-9, '_' or '-', got \"N1\""),
        ("nkey_file: /etc/vigil/nkey", "cluster.nkey_file: NATS nkey authentication is not supported yet: use user/password or token"),
        ("creds_file: /etc/vigil/x.creds", "cluster.creds_file: NATS .creds files are not supported yet: use user/password or token"),
        ("replicas: 7", "cluster.replicas: must be between 1 and 5, got 7"),
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
}

import Testing
import VigilLoop
@testable import VigilServer

/// `ConfigLoader.yaml` (`vigild --print-config`): what it prints loads back to the same config.
@Suite struct ConfigLoaderRenderTests {
    @Test func theBuiltInDefaultsLoadBackUnchanged() throws {
        #expect(try ConfigLoader.load(yaml: ConfigLoader.yaml(ServerConfig())) == ServerConfig())
    }

    @Test func everyKeyIsPrintedAndLoadsBack() throws {
        let c = try ConfigLoader.load(yaml: """
        server:
          listen: "[::1]:9001"
          trusted_proxies: ["10.0.0.0/8", "::1"]
        admin:
          listen: off
        websocket:
          echo: true
        pins:
          categories: [general, odd-one]
        panic:
          abandon_after_ms: 7200000
          max_timer_s: 3600
        state:
          directory: "/var/lib/vigil test"
          fsync: always
        web:
          tile_attribution: "© \\"quoted\\" and a back\\\\slash\\tand a tab\\x01 and a bell\\a"
        cluster:
          urls: [nats://127.0.0.1:4222, tls://nats.example.org:4222]
          node_id: n2
          max_bytes: 2147483648
        """)
        let text = ConfigLoader.yaml(c)
        #expect(try ConfigLoader.load(yaml: text) == c)
        for (section, keys) in ConfigLoader.schema {
            for (key, kind) in keys {
                if case .unsupported = kind { continue }
                if case .natsTLS = kind { continue }  // only when TLS to NATS is asked for (below)
                #expect(text.contains("\n  \(key): ") && text.contains("\(section):\n"), "\(section).\(key) not printed")
            }
        }
    }

    @Test func aNodeAloneGetsNoClusterSection() {
        #expect(!ConfigLoader.yaml(ServerConfig()).contains("cluster:"))
    }

    @Test func secretsAreNotShown() {
        var c = ServerConfig()
        c.replication.enabled = true
        c.replication.urls = ["nats://127.0.0.1:4222"]
        c.replication.nodeID = "n1"
        c.replication.token = "s3cret-token"
        c.replication.user = "vigil"
        c.replication.password = "s3cret-password"
        let text = ConfigLoader.yaml(c)
        #expect(!text.contains("s3cret"))
        #expect(text.contains("  token: \"(set, not shown)\"\n") && text.contains("  password: \"(set, not shown)\"\n"))
        #expect(text.contains("  user: \"vigil\"\n"))
    }

    @Test func natsTLSIsPrintedAsSet() {
        var c = ServerConfig()
        c.replication.enabled = true
        #expect(!ConfigLoader.yaml(c).contains("  tls:"))
        c.replication.tlsEnabled = true
        c.replication.tlsCAFile = "/etc/vigil/ca.pem"
        c.replication.tlsServerName = "nats.internal"
        #expect(ConfigLoader.yaml(c).contains("""
          tls:
            ca_file: "/etc/vigil/ca.pem"
            server_name: "nats.internal"
            handshake_first: false
          replicas: 1
        """))
    }
}

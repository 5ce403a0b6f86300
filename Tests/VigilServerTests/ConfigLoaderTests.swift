import Foundation
import Testing
import VigilLoop
@testable import VigilServer

@Suite struct ConfigLoaderTests {
    @Test func anEmptyFileGivesTheBuiltInDefaults() throws {
        #expect(try ConfigLoader.load(yaml: "") == ServerConfig())
        #expect(try ConfigLoader.load(yaml: "# only a comment\n") == ServerConfig())
    }

    @Test func everyKeyIsRead() throws {
        let yaml = """
        server:
          listen: "[::1]:9001"
          backlog: 64
          max_connections: 500
          shutdown_grace_ms: 100
        http:
          handshake_timeout_ms: 700
          max_request_head_bytes: 4096
        websocket:
          max_message_bytes: 16_777_216
          ping_interval_ms: 300
          pong_timeout_ms: 400
          close_timeout_ms: 500
          max_output_buffer_bytes: 33554432
          echo: true
        log:
          level: debug
        """
        let c = try ConfigLoader.load(yaml: yaml)
        #expect(c.listen == ListenAddress(host: "::1", port: 9001))
        #expect(c.backlog == 64 && c.maxConnections == 500 && c.shutdownGraceMs == 100)
        #expect(c.handshakeTimeoutMs == 700 && c.maxRequestHeadBytes == 4096)
        #expect(c.maxMessageBytes == 16_777_216 && c.pingIntervalMs == 300 && c.pongTimeoutMs == 400)
        #expect(c.closeTimeoutMs == 500 && c.maxOutputBufferBytes == 33_554_432 && c.echoEnabled)
        #expect(c.logLevel == "debug")
    }

    @Test func theTLSSectionIsReadAndThePlainListenerCanBeTurnedOff() throws {
        let c = try ConfigLoader.load(yaml: """
        server:
          listen: off
        tls:
          listen: "[::]:8443"
          certificate: /etc/vigil/chain.pem
          private_key: /etc/vigil/key.pem
          min_version: "1.3"
          ciphers: "ECDHE-RSA-AES128-GCM-SHA256"
          ciphersuites: "TLS_AES_128_GCM_SHA256"
        """)
        #expect(c.listen == nil)
        #expect(c.tlsListen == ListenAddress(host: "::", port: 8443))
        #expect(c.tlsCertificate == "/etc/vigil/chain.pem" && c.tlsPrivateKey == "/etc/vigil/key.pem")
        #expect(c.tlsMinVersion == "1.3" && c.tlsCiphers == "ECDHE-RSA-AES128-GCM-SHA256" && c.tlsCiphersuites == "TLS_AES_128_GCM_SHA256")
    }

    @Test func aConfigWithoutAnyListenerOrWithATLSListenerWithoutItsFilesIsRefused() {
        for (yaml, key) in [("server:\n  listen: off\n", "server.listen"),
                            ("tls:\n  listen: \"127.0.0.1:8443\"\n  certificate: /c.pem\n", "tls.listen"),
                            ("tls:\n  min_version: \"1.1\"\n", "tls.min_version")] {
            do {
                _ = try ConfigLoader.load(yaml: yaml)
                Issue.record("accepted: \(yaml)")
            } catch let error as ConfigError {
                #expect(error.issues.map(\.key) == [key], "\(yaml)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test func everyInvalidValueIsReportedByName() {
        let yaml = """
        server:
          listen: "localhost:80"
          backlog: 0
          colour: blue
        websocket:
          max_message_bytes: lots
          echo: maybe
        log:
          level: loud
        mystery:
          x: 1
        """
        do {
            _ = try ConfigLoader.load(yaml: yaml)
            Issue.record("invalid config accepted")
        } catch let error as ConfigError {
            let keys = Set(error.issues.map(\.key))
            #expect(keys == ["server.listen", "server.backlog", "server.colour", "websocket.max_message_bytes", "websocket.echo", "log.level", "mystery"])
            #expect(error.issues.allSatisfy { $0.line != nil })
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func brokenYAMLIsAClearError() {
        #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: "server: [unclosed\n") }
        #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: "- a list\n- at the top\n") }
    }

    @Test func pinAndPanicSections() throws {
        let c = try ConfigLoader.load(yaml: """
        session: {messages_per_second: 5, message_burst: 10}
        pins: {categories: [general, lost-pet], min_ttl_s: 1, vote_flag_threshold: 3, cover_cell_budget: 64}
        panic: {history_events: 5, stale_after_ms: 1000, ended_grace_ms: 2000, max_watch_tokens: 4, max_watchers_on_start: 2}
        """)
        #expect(c.messagesPerSecond == 5 && c.messageBurst == 10)
        #expect(c.pins.categories == ["general", "lost-pet"] && c.pins.minTTLSeconds == 1 && c.pins.voteFlagThreshold == 3)
        #expect(c.panic.historyEvents == 5 && c.panic.staleAfterMs == 1000 && c.panic.endedGraceMs == 2000)
        #expect(c.panic.maxWatchTokens == 4 && c.panic.maxWatchersOnStart == 2)
        #expect(try ConfigLoader.load(yaml: "pins: {max_range_m: 20000000}").pins.maxRangeMeters == 20_000_000)
        for bad in ["pins: {categories: [hazard]}", "pins: {categories: [General]}", "pins: {categories: [a, a, general]}",
                    "panic: {stale_after_ms: 5}", "panic: {max_watch_tokens: 2, max_watchers_on_start: 3}",
                    "pins: {min_ttl_s: 100, default_ttl_s: 50}", "pins: {cell_precision_min: 3}",
                    "pins: {cluster_precision_min: 2, cluster_cell_budget: 512}", "pins: {cluster_precision_min: 2, cluster_precision_max: 1}",
                    "pins: {cluster_interval_ms: 50}", "pins: {cluster_cell_budget: 5000}",
                    "pins: {max_range_m: 0}", "pins: {max_range_m: 20000001}", "pins: {max_range_m: 1.5}"] {
            #expect(throws: ConfigError.self, "\(bad)") { try ConfigLoader.load(yaml: bad) }
        }
    }

    @Test func theShippedConfigsAreValid() throws {
        // Tests run from the package root.
        for path in ["config/vigild.yaml", "config/test.yaml"] {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            _ = try ConfigLoader.load(yaml: text)
        }
        // The production file restates every default except one: it names systemd's StateDirectory,
        // where the built-in default (for a first run by hand) keeps state in memory only.
        var expected = ServerConfig()
        expected.stateDirectory = "/var/lib/vigil"
        #expect(try ConfigLoader.load(yaml: String(contentsOfFile: "config/vigild.yaml", encoding: .utf8)) == expected,
                "config/vigild.yaml restates the built-in defaults")
    }

    @Test func stateSection() throws {
        let c = try ConfigLoader.load(yaml: "state:\n  directory: /tmp/v\n  snapshot_interval_s: 5\n  fsync: always\n  fsync_interval_ms: 50\n")
        #expect(c.stateDirectory == "/tmp/v" && c.snapshotIntervalSeconds == 5 && c.fsyncPolicy == "always" && c.fsyncIntervalMs == 50)
        #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: "state:\n  fsync: sometimes\n") }
        #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: "state:\n  snapshot_interval_s: 0\n") }
        #expect(ServerConfig().stateDirectory.isEmpty, "the built-in default keeps state in memory (a first run needs no directory)")
    }

    @Test func crossKeyRules() {
        #expect(throws: ConfigError.self) {
            try ConfigLoader.load(yaml: "websocket:\n  max_message_bytes: 1000000\n  max_output_buffer_bytes: 20000\n")
        }
    }

    @Test func aSafetyTimerMustComeDueBeforeItsStreamCanBeAbandoned() throws {
        let tooLong = "panic:\n  abandon_after_ms: 3600000\n  max_timer_s: 3600\n"
        do {
            _ = try ConfigLoader.load(yaml: tooLong)
            Issue.record("accepted a timer as long as the abandonment time")
        } catch let error as ConfigError {
            #expect(error.issues.map(\.key) == ["panic.max_timer_s"])
        }
        let config = try ConfigLoader.load(yaml: "panic:\n  abandon_after_ms: 3600000\n  max_timer_s: 3599\n")
        #expect(config.panic.maxTimerSeconds == 3599)
    }

    @Test func homeSafeMustLapseBeforeItsCircleCanBeIdle() throws {
        do {
            _ = try ConfigLoader.load(yaml: "checkin:\n  idle_lifetime_s: 3600\n  max_home_s: 3600\n")
            Issue.record("accepted a home safe as long as the idle lifetime")
        } catch let error as ConfigError {
            #expect(error.issues.map(\.key) == ["checkin.max_home_s"])
        }
        let config = try ConfigLoader.load(yaml: "checkin:\n  idle_lifetime_s: 3600\n  max_home_s: 3599\n  requests_per_minute: 2\n")
        #expect(config.checkin.maxHomeMs == 3_599_000 && config.checkin.idleLifetimeMs == 3_600_000 && config.checkin.requestsPerMinute == 2)
        #expect(throws: ConfigError.self) { try ConfigLoader.load(yaml: "checkin:\n  max_members: 0\n") }
    }

    @Test func whereTheMapOpensIsReadAndChecked() throws {
        let c = try ConfigLoader.load(yaml: "web:\n  map_center: [48.8566, -2.3522]\n  map_zoom: 0\n")
        #expect(c.webMapLatitude == 48.8566 && c.webMapLongitude == -2.3522 && c.webMapZoom == 0)
        #expect(try ConfigLoader.load(yaml: "web:\n  map_center: [-90, 180]\n  map_zoom: 19\n").webMapZoom == 19)
        for (value, says) in [("52.5", "must be [latitude, longitude] in degrees, such as [52.52, 13.405], got \"52.5\""),
                              ("[52.5]", "must be [latitude, longitude] in degrees, such as [52.52, 13.405]: two numbers, got 1"),
                              ("[52.5, 13.4, 12]", "must be [latitude, longitude] in degrees, such as [52.52, 13.405]: two numbers, got 3"),
                              ("[north, 13.4]", "must be [latitude, longitude] in degrees, such as [52.52, 13.405]: two numbers, got [\"north\", \"13.4\"]"),
                              ("[.nan, 13.4]", "must be [latitude, longitude] in degrees, such as [52.52, 13.405]: two numbers, got [\".nan\", \"13.4\"]"),
                              ("{lat: 1, lon: 2}", "must be [latitude, longitude] in degrees, such as [52.52, 13.405], got a list or mapping"),
                              ("[90.5, 13.4]", "the latitude must be between -90 and 90, got 90.5"),
                              ("[52.5, -180.01]", "the longitude must be between -180 and 180, got -180.01")] {
            do {
                _ = try ConfigLoader.load(yaml: "web:\n  map_center: \(value)\n")
                Issue.record("map_center \(value) accepted")
            } catch let error as ConfigError {
                #expect(error.issues.map { "\($0.key): \($0.message)" } == ["web.map_center: \(says)"])
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        for zoom in ["-1", "20", "near"] {
            #expect(throws: ConfigError.self, "\(zoom)") { try ConfigLoader.load(yaml: "web:\n  map_zoom: \(zoom)\n") }
        }
    }

    @Test func listenAddressForms() {
        #expect(ListenAddress(parsing: "127.0.0.1:8080") == ListenAddress(host: "127.0.0.1", port: 8080))
        #expect(ListenAddress(parsing: ":8080") == ListenAddress(host: "0.0.0.0", port: 8080))
        #expect(ListenAddress(parsing: "[::]:0") == ListenAddress(host: "::", port: 0))
        for bad in ["", "8080", "::1:80", "host:80", "1.2.3.4:", "1.2.3.4:70000", "[::1]80", "1.2.3.4:-1"] {
            #expect(ListenAddress(parsing: bad) == nil, "\(bad) should be rejected")
        }
    }
}

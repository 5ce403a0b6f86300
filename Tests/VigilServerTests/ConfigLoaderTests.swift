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

    @Test func crossKeyRules() {
        #expect(throws: ConfigError.self) {
            try ConfigLoader.load(yaml: "websocket:\n  max_message_bytes: 1000000\n  max_output_buffer_bytes: 20000\n")
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

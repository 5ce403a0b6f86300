import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import VigilLoop
import VigilServer
import VigilState

/// `vigild`: the daemon's command line.
@main
struct Vigild: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vigild",
        abstract: "Vigil: a realtime WebSocket pub/sub daemon for live map pins and panic-location streams.",
        discussion: """
        With no --config, vigild runs on its built-in defaults (listen 127.0.0.1:8080, production limits).
        Environment: VIGIL_CONFIG (config file), VIGIL_LISTEN (listen address), VIGIL_ADMIN_LISTEN (admin
        listener, or "off"); flags win over both. Under systemd (Type=notify) it reports readiness, status
        and watchdog pings on $NOTIFY_SOCKET.
        `vigild state inspect DIR` prints a state directory's snapshots and journal as JSON lines.
        `vigild cluster check FILE` connects to the config's NATS servers and reports its stream.
        `vigild push keygen FILE` makes the Web Push (VAPID) key and prints its public key.
        """,
        version: BuildInfo.description,
        subcommands: [StateCommand.self, ReplicationCommand.self, PushCommand.self]
    )

    @Option(name: .long, help: ArgumentHelp("YAML config file (see config/vigild.yaml).", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Listen address, HOST:PORT or [IPV6]:PORT; overrides the file and VIGIL_LISTEN.", valueName: "address"))
    var listen: String?

    @Option(name: .customLong("admin-listen"), help: ArgumentHelp("Admin listener (/metrics, /stats, /healthz), HOST:PORT or off; overrides the file and VIGIL_ADMIN_LISTEN.", valueName: "address"))
    var adminListen: String?

    @Option(name: .customLong("check-config"), help: ArgumentHelp("Check a config file, report every invalid value by name, and exit (0 valid, 1 invalid).", valueName: "file"))
    var checkConfig: String?

    @Option(name: .customLong("log-level"), help: "Overrides log.level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String?

    @Flag(name: .customLong("print-config"), help: "Print the config vigild would run on (the file or the built-in defaults, with the environment and the flags applied) as YAML, and exit. Passwords and tokens are not shown.")
    var printConfig = false

    func run() throws {
        if let path = checkConfig {
            do {
                let config = try Self.loadConfig(path: path)
                if config.tlsListen != nil {
                    // The files are part of the config: a key that does not match its certificate
                    // is an invalid config, found before the restart that would fail on it.
                    do {
                        _ = try TLSContext.server(certificateChain: config.tlsCertificate, privateKey: config.tlsPrivateKey)
                    } catch {
                        throw ConfigError(issues: [ConfigIssue(key: "tls.certificate", message: "\(error)")])
                    }
                }
                if config.webEnabled {
                    do {
                        _ = try StaticSiteLoader.load(config)
                    } catch {
                        throw ConfigError(issues: [ConfigIssue(key: "web.root", message: "\(error)")])
                    }
                }
                print("\(path): ok")
                return
            } catch {
                FileHandle.standardError.write(Data("\(path): invalid\n\(Self.indent(error))\n".utf8))
                throw ExitCode(1)
            }
        }

        let settings = try effectiveConfig()
        if printConfig {
            print(ConfigLoader.yaml(settings), terminator: "")
            return
        }

        let level = Logger.Level(rawValue: settings.logLevel) ?? .info
        LoggingSystem.bootstrap { _ in LogfmtHandler(level: level) }
        let logger = Logger(label: "vigild")
        // One registry for /metrics: vigild's own series, and anything reporting through swift-metrics.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        guard Connection.checkHandshakeDigest() else {
            logger.critical("cannot run: libcrypto's SHA-1 does not give RFC 6455's handshake value")
            throw ExitCode(1)
        }
        do {
            let server = try Server(config: settings, logger: logger, registry: registry)
            try server.run()
        } catch {
            logger.critical("cannot run", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
    }

    /// The config to run on: the file (--config, else VIGIL_CONFIG) or the built-in defaults, then
    /// VIGIL_LISTEN / --listen, VIGIL_ADMIN_LISTEN / --admin-listen and --log-level over it.
    func effectiveConfig() throws -> ServerConfig {
        let env = ProcessInfo.processInfo.environment
        var settings: ServerConfig
        do {
            if let path = config ?? env["VIGIL_CONFIG"] {
                settings = try Self.loadConfig(path: path)
            } else {
                settings = ServerConfig()
            }
            if let text = listen ?? env["VIGIL_LISTEN"] {
                guard let address = ListenAddress(parsing: text) else {
                    throw ValidationError("listen address \"\(text)\" is not HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080)")
                }
                settings.listen = address
            }
            if let text = adminListen ?? env["VIGIL_ADMIN_LISTEN"] {
                if text == "off" {
                    settings.adminListen = nil
                } else {
                    guard let address = ListenAddress(parsing: text) else {
                        throw ValidationError("admin listen address \"\(text)\" is not HOST:PORT (e.g. 127.0.0.1:8081) or off")
                    }
                    settings.adminListen = address
                }
            }
            if let level = logLevel {
                guard Logger.Level(rawValue: level) != nil else {
                    throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
                }
                settings.logLevel = level
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            FileHandle.standardError.write(Data("vigild: cannot use the config: \n\(Self.indent(error))\n".utf8))
            throw ExitCode(1)
        }
        return settings
    }

    static func loadConfig(path: String) throws -> ServerConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError(issues: [ConfigIssue(key: "(file)", message: "cannot read \(path)")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigError(issues: [ConfigIssue(key: "(file)", message: "\(path) is not UTF-8 text")])
        }
        let directory = (path as NSString).deletingLastPathComponent
        return try ConfigLoader.load(yaml: text).resolvingWebPaths(relativeTo: directory.isEmpty ? "." : directory)
    }

    static func indent(_ error: Error) -> String {
        "\(error)".split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
    }
}

/// `vigild state ...`: tools for the state directory.
struct StateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state", abstract: "Tools for the state directory (snapshots and journal).",
        subcommands: [Inspect.self])

    struct Inspect: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect",
            abstract: "Print a state directory's snapshots and journal segments (or one file) as JSON lines.",
            discussion: "One line per file (kind, segment, size, valid or torn), then one per pin, stream or journal record: ids, times, counts, sizes and shortened token digests (tokens themselves are never stored). Coordinates, notes and pin texts are left out unless --show-content is given. For a directory, a last line {\"type\":\"state\",\"digest\":…} gives the state it restores to and its digest, the one a daemon restored from it reports at /state/digest.")

        @Argument(help: "A state directory, or one snapshot-*.vgs / journal-*.vgj file in it.")
        var path: String

        @Flag(name: .customLong("files-only"), help: "Only the line describing each file.")
        var filesOnly = false

        @Flag(name: .customLong("show-content"), help: "Also print coordinates, notes, and pin titles and descriptions (personal data: mind where the output goes).")
        var showContent = false

        @Option(name: .long, help: ArgumentHelp("For a directory's last line (the state it restores to, with its digest): the config whose panic.ended_grace_ms and checkin.idle_lifetime_s apply (default: the built-in defaults).", valueName: "file"))
        var config: String?

        @Option(name: .long, help: ArgumentHelp("For that line: the time the digest is taken at, unix ms (default: now); what has expired by then is left out.", valueName: "ms"))
        var at: Int64?

        func run() throws {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("vigild state inspect: \(path): no such file or directory\n".utf8))
                throw ExitCode(1)
            }
            let rules = try StateDigestRules.rules(config: config, at: at)
            do throws(StateError) {
                if isDirectory.boolValue {
                    try StateInspector.inspect(path: path, entries: !filesOnly, content: showContent, state: rules) { print($0) }
                } else {
                    try StateInspector.inspectFile(path, entries: !filesOnly, content: showContent) { print($0) }
                }
            } catch {
                FileHandle.standardError.write(Data("vigild state inspect: \(error)\n".utf8))
                throw ExitCode(1)
            }
        }
    }
}

import VigilReplication
import VigilCore
import VigilLoop

/// Everything vigild can be told, with the built-in defaults it runs on when given no file.
///
/// The defaults are deliberately the production values, but for `stateDirectory` (empty: in memory,
/// so a first run needs no directory); `config/vigild.yaml` restates each one with its explanation
/// (and sets the directory), and `ConfigLoader` is the only place that reads a file into this struct.
public struct ServerConfig: Equatable, Sendable {
    // server
    /// The plain (ws://) listener; nil ("off") when only the TLS listener is wanted.
    public var listen: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 8080)
    public var backlog = 1024
    public var maxConnections = 100_000
    public var shutdownGraceMs = 5_000
    /// Reverse proxies (addresses or prefixes) whose `X-Forwarded-For` is believed for per-address budgets.
    public var trustedProxies: [String] = []
    // admin
    /// The operator's listener (`/metrics`, `/stats`, `/healthz` with detail); nil ("off") for none.
    /// Loopback by default: its figures are for the operator, not the internet.
    public var adminListen: ListenAddress? = ListenAddress(host: "127.0.0.1", port: 8081)
    // tls
    /// The TLS (wss://) listener; nil (the default) for none.
    public var tlsListen: ListenAddress?
    /// PEM files: the certificate chain (leaf first) and its private key.
    public var tlsCertificate = ""
    public var tlsPrivateKey = ""
    /// "1.2" or "1.3": the lowest TLS version accepted.
    public var tlsMinVersion = "1.2"
    /// OpenSSL cipher strings for TLS 1.2 and the TLS 1.3 suites.
    public var tlsCiphers = TLSContext.defaultCiphers
    public var tlsCiphersuites = TLSContext.defaultCiphersuites
    // http
    public var handshakeTimeoutMs = 10_000
    public var maxRequestHeadBytes = 8_192
    // websocket
    public var maxMessageBytes = 65_536
    public var pingIntervalMs = 30_000
    public var pongTimeoutMs = 10_000
    public var closeTimeoutMs = 2_000
    public var maxOutputBufferBytes = 4 * 1024 * 1024
    /// Unsent bytes of all connections together; past it each connection may hold only 64 KiB.
    public var maxTotalOutputBytes = 1024 * 1024 * 1024
    public var echoEnabled = false
    // compression (permessage-deflate, RFC 7692)
    public var compressionEnabled = true
    public var compressionServerMaxWindowBits = 15
    public var compressionClientMaxWindowBits = 15
    public var compressionMemoryLevel = 4
    public var compressionLevel = 6
    public var compressionMinMessageBytes = 64
    // session
    public var messagesPerSecond = 50
    public var messageBurst = 100
    /// Subscribes per connection (a map that pans re-subscribes about once a second).
    public var subscribesPerSecond = 10
    public var subscribeBurst = 20
    // limits: per-address budgets that a reconnect does not reset
    public var addressBudgets = AddressBudgetSettings()
    // idempotency: answers kept for writes' `idem` keys
    public var idempotency = IdempotencySettings()
    // pins
    public var pins = PinSettings()
    // panic
    public var panic = PanicSettings()
    /// A panic watcher's unsent locations of a stream are replaced by the newest past this.
    public var conflateAboveBytes = 65_536
    // check-in circles
    public var checkin = CheckinSettings()
    // push (issue 24): Web Push and the webhook relay, each off until configured
    public var push = PushConfig()
    // state
    /// Where snapshots and the journal live; empty = in memory only (said loudly at start-up).
    public var stateDirectory = ""
    public var snapshotIntervalSeconds = 300
    /// `always`, `interval` or `off`: when the journal is fsynced (docs/DURABILITY.md says what each can lose).
    public var fsyncPolicy = "interval"
    public var fsyncIntervalMs = 200
    // web
    /// The pages (`/watch`, `/map`, `/panic`) and their assets on the plain and TLS listeners.
    public var webEnabled = false
    /// The pages' folder; a relative path in a config file is taken from the file's folder.
    public var webRoot = "/usr/share/vigil/web"
    /// Leaflet's folder (Debian's libjs-leaflet), served at /vendor/leaflet/; empty or absent: maps without Leaflet.
    public var webLeaflet = "/usr/share/javascript/leaflet"
    /// The map tiles (`{z}`, `{x}`, `{y}`, optionally `{s}`), empty for none: a plain background.
    public var webTileURL = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
    public var webTileAttribution = "© OpenStreetMap contributors"
    /// Where /map opens when its URL names no place (`#at=`): the centre in degrees and Leaflet's
    /// zoom (0 the world ... 19 a street); Berlin's centre at 13 shows a few streets around it.
    public var webMapLatitude = 52.52
    public var webMapLongitude = 13.405
    public var webMapZoom = 13
    // cluster (issue 16): NATS JetStream; `enabled` only with a `cluster:` section
    public var replication = ReplicationSettings()
    // log
    public var logLevel = "info"
    /// Seconds between the summary lines at info level (0: none).
    public var summaryIntervalSeconds = 60

    public init() {}
}

extension ServerConfig {
    /// The config with `web.root` and `web.leaflet` taken from `directory` when they are relative
    /// (a config file's folder: the test config names the repository's `web/`).
    public func resolvingWebPaths(relativeTo directory: String) -> ServerConfig {
        var c = self
        for path in [\ServerConfig.webRoot, \ServerConfig.webLeaflet] where !c[keyPath: path].isEmpty && !c[keyPath: path].hasPrefix("/") {
            c[keyPath: path] = directory + "/" + c[keyPath: path]
        }
        return c
    }

    /// The CSP source of a tile URL template (`https://tile.openstreetmap.org`, `https://*.tile.example.org:8443`),
    /// or nil when it is not an http(s) URL whose host is a name (an `{s}` only as its first label).
    public static func tileSource(_ template: String) -> String? {
        let scheme: String
        if template.hasPrefix("https://") { scheme = "https://" } else if template.hasPrefix("http://") { scheme = "http://" } else { return nil }
        let rest = template.dropFirst(scheme.count)
        let authority = rest.prefix { $0 != "/" }
        guard !authority.isEmpty, authority.count < rest.count else { return nil }
        var host = String(authority)
        if host.hasPrefix("{s}.") { host = "*." + host.dropFirst(4) }
        let allowed = host.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 46 || $0 == 58 || $0 == 42 }
        guard allowed, !host.dropFirst(host.hasPrefix("*.") ? 2 : 0).contains("*") else { return nil }
        let path = rest.dropFirst(authority.count)
        guard path.contains("{z}"), path.contains("{x}"), path.contains("{y}"),
              !path.contains(where: { $0 == " " || $0 == "\"" || $0 == "'" || $0 == ";" || $0 == "," || $0 == "\\" || $0.asciiValue.map { $0 < 32 } ?? false })
        else { return nil }
        return scheme + host
    }
}

extension PanicSettings {
    /// `reservedShare` as a whole percentage, for the config file (`panic.reserved_percent`).
    var reservedPercent: Int {
        get { Int((reservedShare * 100).rounded()) }
        set { reservedShare = Double(newValue) / 100 }
    }

    /// `maxTimerMs` in whole seconds, for the config file (`panic.max_timer_s`).
    var maxTimerSeconds: Int {
        get { Int(maxTimerMs / 1000) }
        set { maxTimerMs = Int64(newValue) * 1000 }
    }
}

extension CheckinSettings {
    /// `idleLifetimeMs` and `maxHomeMs` in whole seconds, for the config file.
    var idleLifetimeSeconds: Int {
        get { Int(idleLifetimeMs / 1000) }
        set { idleLifetimeMs = Int64(newValue) * 1000 }
    }

    var maxHomeSeconds: Int {
        get { Int(maxHomeMs / 1000) }
        set { maxHomeMs = Int64(newValue) * 1000 }
    }
}

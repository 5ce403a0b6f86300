import VigilCore
import VigilLoop

/// Everything vigild can be told, with the built-in defaults it runs on when given no file.
///
/// The defaults are deliberately the production values; `config/vigild.yaml` restates each one with
/// its explanation, and `ConfigLoader` is the only place that reads a file into this struct.
public struct ServerConfig: Equatable, Sendable {
    // server
    public var listen = ListenAddress(host: "127.0.0.1", port: 8080)
    public var backlog = 1024
    public var maxConnections = 100_000
    public var shutdownGraceMs = 5_000
    // http
    public var handshakeTimeoutMs = 10_000
    public var maxRequestHeadBytes = 8_192
    // websocket
    public var maxMessageBytes = 65_536
    public var pingIntervalMs = 30_000
    public var pongTimeoutMs = 10_000
    public var closeTimeoutMs = 2_000
    public var maxOutputBufferBytes = 4 * 1024 * 1024
    public var echoEnabled = false
    // session
    public var messagesPerSecond = 50
    public var messageBurst = 100
    // pins
    public var pins = PinSettings()
    // panic
    public var panic = PanicSettings()
    // state
    /// Where snapshots and the journal live; empty = in memory only (said loudly at start-up).
    public var stateDirectory = ""
    public var snapshotIntervalSeconds = 300
    /// `always`, `interval` or `off`: when the journal is fsynced (docs/DURABILITY.md says what each can lose).
    public var fsyncPolicy = "interval"
    public var fsyncIntervalMs = 200
    // log
    public var logLevel = "info"

    public init() {}
}

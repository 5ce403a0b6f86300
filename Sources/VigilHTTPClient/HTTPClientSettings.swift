import VigilWire

/// The HTTP client's bounds and timeouts (per origin and in all), and where its trust comes from.
///
/// The defaults suit a daemon that sends push notifications and webhooks to a handful of
/// services: a few keep-alive connections each, queues long enough for a burst of notices, idle
/// connections let go well before the services' own idle timeouts (60-75 s for the large push
/// services and for nginx), so that a request rarely meets a connection the server is closing.
public struct HTTPClientSettings: Equatable, Sendable {
    /// Connections to one origin at most (one request in flight on each: no pipelining).
    public var maxConnectionsPerOrigin = 4
    /// Requests waiting for a connection of one origin; past it `send` answers `queueFull(.origin)`.
    public var maxQueuedPerOrigin = 256
    /// Connections to all origins at most; an idle connection of another origin is closed to
    /// make room before a new one waits for it.
    public var maxConnections = 64
    /// Requests waiting in all, and their encoded bytes; past either, `queueFull(.total)`.
    public var maxQueued = 4096
    public var maxQueuedBytes = 16 * 1_048_576
    /// An idle keep-alive connection is closed after this long unused.
    public var keepAliveIdleMs: Int64 = 30_000
    /// Resolving, connecting and the TLS handshake of one connection, together.
    public var connectTimeoutMs: Int64 = 10_000
    /// Lookups of host names at once (each on a thread of its own, off the loop).
    public var resolverThreads = 2
    /// The clock's resolution: deadlines fire within one tick after they pass.
    public var tickMs: Int64 = 50
    /// The CA certificates (PEM) that servers' chains must lead to; nil: the system's store.
    public var caFile: String?
    /// What a response may hold (head, body, trailers), and how much of its body is kept.
    public var response = HTTPResponseReader.Limits()
    /// Which addresses may be connected to (checked after resolution); `.any` by default.
    public var destinations = DestinationPolicy.any

    public init() {}
}

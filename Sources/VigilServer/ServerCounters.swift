/// Running counts the server keeps on the loop thread (plain integers: no locks, no atomics on
/// the hot path). The operator's metrics read them at each scrape, and the minute's summary log
/// line reports their change.
struct ServerCounters {
    /// Connections closed for falling behind, by the traffic class whose send overflowed.
    var slowConsumerCloses = [Int](repeating: 0, count: TrafficClass.allCases.count)
    /// Sends that took back older unsent messages of the same stream (slow panic watchers).
    var conflations = 0
    var accepted = 0
    /// Data messages received, on every endpoint.
    var messagesIn = 0
    /// Data frames queued (replies, events, echoes).
    var framesOut = 0
    /// Close frames sent and received, by code.
    var closesSent: [UInt16: Int] = [:]
    var closesReceived: [UInt16: Int] = [:]
    /// Why connections ended.
    var ended = [Int](repeating: 0, count: ConnectionEnd.allCases.count)
    /// Plain HTTP responses (not upgrades), by status.
    var httpResponses: [Int: Int] = [:]
}

/// Why a connection ended (the metrics' `reason` label and the debug log's).
enum ConnectionEnd: Int, CaseIterable, Sendable {
    /// A completed WebSocket close handshake, then EOF.
    case closed
    /// A plain HTTP response (health check, error), then EOF.
    case httpDone
    /// The peer vanished without a close handshake (EOF or reset).
    case peerGone
    /// A read, write or TLS failure.
    case ioError
    /// No request head (or TLS handshake) in time.
    case handshakeTimeout
    /// No answer to a ping in time.
    case pingTimeout
    /// The peer did not finish a close handshake in time.
    case closeTimeout
    /// Dropped at once for falling behind.
    case slowConsumer
    /// The shutdown grace ran out.
    case shutdown

    var label: String {
        switch self {
        case .closed: return "closed"
        case .httpDone: return "http_done"
        case .peerGone: return "peer_gone"
        case .ioError: return "io_error"
        case .handshakeTimeout: return "handshake_timeout"
        case .pingTimeout: return "ping_timeout"
        case .closeTimeout: return "close_timeout"
        case .slowConsumer: return "slow_consumer"
        case .shutdown: return "shutdown"
        }
    }
}

import Glibc
import VigilLoop

/// The server's figures at one moment: what `/metrics`, `/stats`, the admin `/healthz` and the
/// minute's summary log line report. Built on the loop thread by `Server.figures()` (a walk of the
/// connection table: O(connections), done per scrape, never per message).
struct ServerFigures {
    /// Connections by phase (`ConnectionPhase`) and transport (0 plain, 1 TLS), admin ones apart.
    var connections = [[Int]](repeating: [0, 0], count: ConnectionPhase.allCases.count)
    var adminConnections = 0
    var webSockets = 0
    var queuedBytes = 0
    var pins = 0
    var channels = 0
    var subscriptions = 0
    var streamsActive = 0
    var streamsEnded = 0
    var watchers = 0
    var circles = 0
    var trackedAddresses = 0
    var uptimeSeconds = 0
    var bytesRead = 0
    var bytesWritten = 0
    /// Refused at accept: `max_connections` held or shutdown begun, and out of descriptors.
    var refusedAtCapacity = 0
    var refusedOutOfDescriptors = 0
    var counters = ServerCounters()
    var v1 = V1Stats()
    var phase = ServicePhase.serving
    var stateMode = StateMode.memoryOnly

    var totalConnections: Int { connections.reduce(0) { $0 + $1[0] + $1[1] } }
}

/// A connection's phase, as the metrics name it.
enum ConnectionPhase: Int, CaseIterable {
    /// Accepted; the TLS handshake or the request head is not complete.
    case handshake
    /// An open WebSocket.
    case open
    /// A close handshake or an HTTP response under way.
    case closing

    var label: String {
        switch self {
        case .handshake: return "handshake"
        case .open: return "open"
        case .closing: return "closing"
        }
    }
}

/// Where the whole service is in its life.
enum ServicePhase: String {
    case serving
    case shuttingDown = "shutting_down"
}

/// Whether changes are recorded on disk.
enum StateMode: String {
    /// No state directory: pins and streams are lost at a restart.
    case memoryOnly = "memory_only"
    /// Every acknowledged change is journaled.
    case writable
    /// The journal cannot be written (a full disk, an I/O error): writes are refused with
    /// `unavailable`; reads and live events go on.
    case unavailable
    /// A cluster node: changes go through the replicated stream; the state directory, if any,
    /// holds snapshots only (`snapshots` on `/healthz`).
    case replicated
}

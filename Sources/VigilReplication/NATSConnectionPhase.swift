import VigilNATS

/// A `NATSClient`'s connection life as a value: which phase it is in, which server and address
/// come next, the liveness and reconnect bookkeeping, and what the client must do about each
/// event. It does no I/O and reads no clock; `NATSClient` owns the sockets, the parsing and the
/// subscriptions, and carries the actions out. No other code changes the phase.
///
/// Phases: `waiting` (until a time: the next attempt) → `handshaking` (a lookup, the TCP connect,
/// INFO, maybe TLS, CONNECT and the PING after it; given up at its deadline) → `up` (the PONG to
/// that PING came) → back to `waiting` when the connection or the attempt is lost; `closed` is
/// terminal, every event after it returns `.none`.
///
/// - A lost attempt whose server name resolved to several addresses tries the next address at
///   once; otherwise the next server of the list at once, and after a whole pass over the list
///   failed, a backoff with jitter (`NATSReconnectBackoff`).
/// - A connection that came up starts a fresh pass; one that lived `stableAfterMs` or more also
///   resets the backoff. One that died sooner does not, so a server that accepts and drops
///   cannot make the client spin.
/// - Liveness: while up, a PING every `pingIntervalMs`; at a PING's time with
///   `maxPingsOutstanding` still unanswered, the connection is dropped. Any PONG answers them all.
struct NATSConnectionPhase {
    enum Phase: Equatable {
        case waiting(untilMs: Int64)
        /// Given up at the deadline unless it comes up first.
        case handshaking(deadlineMs: Int64)
        case up
        case closed
    }

    /// Why the client must drop the connection (or the attempt) now.
    enum DropCause: Equatable {
        /// The handshake did not finish by its deadline.
        case handshakeTimedOut
        /// This many PINGs went unanswered.
        case pingsUnanswered(Int)
    }

    /// What the client must do after an event.
    enum Action: Equatable {
        case none
        /// Start an attempt at `urls[server]`: to `address` when one of its name's addresses is
        /// left, otherwise to the URL's host (looked up first unless it is an address already).
        case connect(server: Int, address: String?)
        case sendPing
        /// Drop the connection, then report the loss (`connectionLost`).
        case drop(DropCause)
        /// The connection is up: the client says so.
        case becameUp
        /// The loss is taken: the client closes the socket, fails what waited on the connection
        /// and says it is disconnected. `tick` returns the next `.connect` from this time on.
        case retry(atMs: Int64)
    }

    /// How long a connection must have lived for its loss to reset the backoff.
    static let stableAfterMs: Int64 = 1_000

    private(set) var phase = Phase.waiting(untilMs: 0)
    /// The server (index in the URL list) of the current or next attempt.
    private(set) var server = 0
    /// Addresses of the current server's name not yet tried in this attempt.
    private var addressQueue: [String] = []
    /// CONNECT went out on this connection: only a PONG after it ends the handshake.
    private var connectIsOut = false
    private var failuresThisPass = 0
    private(set) var backoff: NATSReconnectBackoff
    private var connectedAtMs: Int64 = 0
    private(set) var pingsOutstanding = 0
    private var nextPingAtMs: Int64 = 0

    private let serverCount: Int
    private let connectTimeoutMs: Int64
    private let pingIntervalMs: Int64
    private let maxPingsOutstanding: Int

    /// A client not started yet, for `serverCount` servers.
    init(serverCount: Int, settings: NATSClientSettings) {
        precondition(serverCount > 0, "a NATS client needs at least one server")
        self.serverCount = serverCount
        connectTimeoutMs = settings.connectTimeoutMs
        pingIntervalMs = settings.pingIntervalMs
        maxPingsOutstanding = settings.maxPingsOutstanding
        backoff = NATSReconnectBackoff(baseMs: settings.reconnectBaseMs, maxMs: settings.reconnectMaxMs)
    }

    var isUp: Bool { phase == .up }
    var isHandshaking: Bool { if case .handshaking = phase { return true } else { return false } }
    var isClosed: Bool { phase == .closed }

    // MARK: events

    /// The client started: its first attempt.
    mutating func start(nowMs: Int64) -> Action {
        guard case .waiting = phase else { return .none }
        return attempt(nowMs: nowMs)
    }

    /// The client's clock: the next attempt when the wait is over, the handshake's deadline, the
    /// PING due.
    mutating func tick(nowMs: Int64) -> Action {
        switch phase {
        case .waiting(let until) where nowMs >= until:
            return attempt(nowMs: nowMs)
        case .handshaking(let deadline) where nowMs >= deadline:
            return .drop(.handshakeTimedOut)
        case .up where nowMs >= nextPingAtMs:
            if pingsOutstanding >= maxPingsOutstanding { return .drop(.pingsUnanswered(pingsOutstanding)) }
            pingsOutstanding += 1
            nextPingAtMs = nowMs + pingIntervalMs
            return .sendPing
        default:
            return .none
        }
    }

    private mutating func attempt(nowMs: Int64) -> Action {
        phase = .handshaking(deadlineMs: nowMs + connectTimeoutMs)
        return .connect(server: server, address: addressQueue.isEmpty ? nil : addressQueue.removeFirst())
    }

    /// The current server's name resolved to `addresses` (never empty): the first is tried now,
    /// the others when it fails.
    mutating func resolved(_ addresses: [String]) -> Action {
        guard isHandshaking, let first = addresses.first else { return .none }
        addressQueue = Array(addresses.dropFirst())
        return .connect(server: server, address: first)
    }

    /// CONNECT and the PING after it went out.
    mutating func connectSent() {
        guard isHandshaking else { return }
        connectIsOut = true
    }

    /// A PONG answers every PING outstanding; the first one after CONNECT brings the connection up.
    mutating func pongReceived(nowMs: Int64) -> Action {
        pingsOutstanding = 0
        guard isHandshaking, connectIsOut else { return .none }
        phase = .up
        connectedAtMs = nowMs
        nextPingAtMs = nowMs + pingIntervalMs
        failuresThisPass = 0
        return .becameUp
    }

    /// The connection or the attempt is lost (whatever the cause: the socket, the server, a
    /// `.drop`): the next address of the same name at once, else the next server, after a
    /// backoff drawn from `random` when that ends a failed pass.
    mutating func connectionLost(nowMs: Int64, using random: inout some RandomNumberGenerator) -> Action {
        let wasUp: Bool
        switch phase {
        case .closed: return .none
        case .up: wasUp = true
        case .waiting, .handshaking: wasUp = false
        }
        pingsOutstanding = 0
        connectIsOut = false
        if !wasUp && !addressQueue.isEmpty {
            phase = .waiting(untilMs: nowMs)
            return .retry(atMs: nowMs)
        }
        addressQueue = []
        if wasUp && nowMs - connectedAtMs >= Self.stableAfterMs {
            backoff.succeeded()
            failuresThisPass = 0
        }
        failuresThisPass += 1
        server = (server + 1) % serverCount
        var delay: Int64 = 0
        if failuresThisPass >= serverCount {
            failuresThisPass = 0
            delay = backoff.nextDelayMs(using: &random)
        }
        phase = .waiting(untilMs: nowMs + delay)
        return .retry(atMs: nowMs + delay)
    }

    /// For good: no more attempts, and every later event returns `.none`.
    mutating func close() {
        phase = .closed
        addressQueue = []
    }
}

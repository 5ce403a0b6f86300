/// One outgoing connection's life as a value: which phase it is in, what each event does to it,
/// and what the client must do about it (`HTTPClient+Connections` carries the actions out; no
/// other code changes the phase).
///
/// Phases: `resolving` (the host name, off the loop) → `connecting` (TCP, then TLS when the
/// origin is https; each resolved address in turn until one answers) → `idle` ⇄ `busy` (one
/// request at a time: sent, then its whole response read) → `closed`. One deadline per
/// connection, armed as `.armTimer`: the connect timeout while it comes up (all addresses
/// together), the keep-alive timeout while idle; none while busy, where the request's own
/// deadline rules (`deadlinePassed`).
///
/// A connection is reused only when the response said so and nothing followed it (the client
/// sends one request at a time, so bytes past a response are the server's error); any failure
/// while busy ends the connection, since where the next response would start is then unknown.
public struct HTTPConnectionLifecycle: Equatable, Sendable {
    public enum Phase: Equatable, Sendable {
        case resolving, connecting, idle
        case busy(request: Int32)
        case closed
    }

    /// One thing the client must do, in order.
    public enum Action: Equatable, Sendable {
        /// Look the host name up (off the loop); `resolved` or `resolveFailed` follows.
        case resolve
        /// Open a socket to this numeric address (the previous one, if any, is closed first).
        case connect(address: String)
        /// Replace the connection's deadline: `timerFired` is due then.
        case armTimer(atMs: Int64)
        case cancelTimer
        /// Write the request's bytes and start reading its response.
        case send(request: Int32)
        /// Hand the response just read to the request.
        case respond(request: Int32)
        case fail(request: Int32, HTTPClientFailure)
        /// The connection is idle and may take the next request.
        case ready
        /// Close the socket (the connection's timer goes with `release`).
        case closeSocket
        /// The connection is over; `attemptFailure` says why when it never came up.
        case release(attemptFailure: HTTPClientFailure?)
    }

    public struct Timeouts: Equatable, Sendable {
        public var connectMs: Int64
        public var keepAliveIdleMs: Int64

        public init(connectMs: Int64, keepAliveIdleMs: Int64) {
            self.connectMs = connectMs
            self.keepAliveIdleMs = keepAliveIdleMs
        }
    }

    public private(set) var phase: Phase
    /// Addresses of the host not yet tried in this attempt.
    private var untried: [String] = []
    /// Responses the connection has delivered: a request sent when it is above 0 reuses it.
    public private(set) var served = 0

    private init(phase: Phase) {
        self.phase = phase
    }

    /// A new connection to `host`: resolved first unless it is an address already.
    public static func opening(host: String, isAddress: Bool, nowMs: Int64, _ t: Timeouts) -> (HTTPConnectionLifecycle, [Action]) {
        let deadline = Action.armTimer(atMs: nowMs + t.connectMs)
        if isAddress { return (HTTPConnectionLifecycle(phase: .connecting), [deadline, .connect(address: host)]) }
        return (HTTPConnectionLifecycle(phase: .resolving), [deadline, .resolve])
    }

    // MARK: coming up

    public mutating func resolved(_ addresses: [String]) -> [Action] {
        guard phase == .resolving else { return [] }
        guard let first = addresses.first else { return giveUp(.dns("no usable address")) }
        phase = .connecting
        untried = Array(addresses.dropFirst())
        return [.connect(address: first)]
    }

    public mutating func resolveFailed(_ reason: String) -> [Action] {
        guard phase == .resolving else { return [] }
        return giveUp(.dns(reason))
    }

    /// TCP connected and, for https, the TLS handshake verified the server.
    public mutating func connected(nowMs: Int64, _ t: Timeouts) -> [Action] {
        guard phase == .connecting else { return [] }
        phase = .idle
        untried = []
        return [.armTimer(atMs: nowMs + t.keepAliveIdleMs), .ready]
    }

    // MARK: requests

    /// The pool gave this idle connection a request.
    public mutating func assigned(_ request: Int32) -> [Action] {
        guard phase == .idle else { return [.fail(request: request, .closedEarly)] }
        phase = .busy(request: request)
        return [.cancelTimer, .send(request: request)]
    }

    /// The whole response arrived; `keepAlive`: it allows reuse and nothing followed it.
    public mutating func responded(keepAlive: Bool, nowMs: Int64, _ t: Timeouts) -> [Action] {
        guard case .busy(let request) = phase else { return [] }
        served += 1
        if keepAlive {
            phase = .idle
            return [.respond(request: request), .armTimer(atMs: nowMs + t.keepAliveIdleMs), .ready]
        }
        phase = .closed
        return [.respond(request: request), .closeSocket, .release(attemptFailure: nil)]
    }

    /// The in-flight request's deadline passed: the connection goes with it (the late response
    /// would otherwise be read as the next request's).
    public mutating func deadlinePassed() -> [Action] {
        guard case .busy(let request) = phase else { return [] }
        phase = .closed
        return [.fail(request: request, .timeout(.awaitingResponse)), .closeSocket, .release(attemptFailure: nil)]
    }

    // MARK: endings

    /// The socket failed or the server closed it (the response's own end, if it was one, is
    /// reported as `responded` instead). Connecting: the next address, or the attempt fails.
    /// Idle: a keep-alive connection the server let go. Busy: the request fails.
    public mutating func lost(_ failure: HTTPClientFailure) -> [Action] {
        switch phase {
        case .connecting:
            guard !untried.isEmpty else { return giveUp(failure) }
            return [.closeSocket, .connect(address: untried.removeFirst())]
        case .resolving:
            return giveUp(failure)
        case .idle:
            phase = .closed
            return [.closeSocket, .release(attemptFailure: nil)]
        case .busy(let request):
            phase = .closed
            return [.fail(request: request, failure), .closeSocket, .release(attemptFailure: nil)]
        case .closed:
            return []
        }
    }

    /// Bytes arrived with no request in flight: the server is confused (or says goodbye with a
    /// 408); the connection cannot be trusted with the next request.
    public mutating func unexpectedInput() -> [Action] {
        guard phase == .idle else { return [] }
        phase = .closed
        return [.closeSocket, .release(attemptFailure: nil)]
    }

    /// The connection's deadline: the connect timeout, or the keep-alive timeout.
    public mutating func timerFired() -> [Action] {
        switch phase {
        case .resolving, .connecting:
            return giveUp(.timeout(.connecting))
        case .idle:
            phase = .closed
            return [.closeSocket, .release(attemptFailure: nil)]
        case .busy, .closed:
            return []
        }
    }

    /// The client closes the connection (room for another origin, or the client's own close).
    public mutating func close() -> [Action] {
        switch phase {
        case .busy(let request):
            phase = .closed
            return [.fail(request: request, .shutDown), .closeSocket, .release(attemptFailure: nil)]
        case .closed:
            return []
        case .resolving, .connecting, .idle:
            phase = .closed
            return [.closeSocket, .release(attemptFailure: nil)]
        }
    }

    private mutating func giveUp(_ failure: HTTPClientFailure) -> [Action] {
        phase = .closed
        untried = []
        return [.closeSocket, .release(attemptFailure: failure)]
    }
}

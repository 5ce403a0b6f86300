import CLinux
import Glibc
import Logging
import VigilLoop
import VigilWire

/// The daemon's core on one loop thread: listener, connections, timers, shutdown.
///
/// It owns every connection in a table indexed by fd and a single timer wheel whose ids are those
/// fds; each connection has at most one deadline at a time, chosen by its phase (handshake
/// deadline, next keep-alive check, close timeout). Output queued during a loop turn is flushed
/// at the end of the turn, one `writev` per connection.
public final class Server {
    public let config: ServerConfig
    public let loop: EventLoop
    let pool = ChunkPool()
    let logger: Logger
    private var listener: Listener?
    private var connections: ContiguousArray<Connection?> = []
    private var wheel: TimerWheel
    private var flushList: [Connection] = []
    private var due: [Int32] = []
    private var tickHooks: [() -> Void] = []
    private var beforeFlushHooks: [() -> Void] = []
    private var stopHooks: [() -> Void] = []
    private let iovecs: UnsafeMutablePointer<iovec>
    private let maxIovecs = 64
    private var applications: [String: WebSocketApplication] = [:]
    private var signals: SignalSource?
    private var ticker: PeriodicTimer?
    private var shutdownDeadlineMs: Int64?
    private let startedMs = monotonicMilliseconds()
    /// Connections accepted and not yet closed, in any phase.
    public private(set) var connectionCount = 0
    /// Open WebSocket connections.
    public private(set) var webSocketCount = 0
    /// The address actually bound (with the real port when the config asked for port 0).
    public private(set) var boundAddress: ListenAddress?
    /// Stops reading a connection whose unsent output passes this, until it drains.
    private let readPauseBytes: Int

    static let tickMs: Int64 = 50

    public init(config: ServerConfig, logger: Logger) throws {
        self.config = config
        self.logger = logger
        self.loop = try EventLoop()
        self.wheel = TimerWheel(tickMs: Self.tickMs, slots: 1024, nowMs: monotonicMilliseconds())
        self.iovecs = .allocate(capacity: maxIovecs)
        self.readPauseBytes = min(config.maxOutputBufferBytes / 2, 1 << 20)
        if config.echoEnabled { applications["/echo"] = EchoApplication() }
        loop.addEndOfTurnHook { [unowned self] in self.flushAll() }
        let v1 = V1Application(server: self, settings: config.pins, panic: config.panic, secrets: OpenSSLSecrets())
        applications["/v1"] = v1
        if config.stateDirectory.isEmpty {
            logger.warning("state.directory is not set: pins and panic streams live in memory only and are lost when vigild stops")
        } else {
            try v1.attach(Persistence(
                path: config.stateDirectory, policy: FsyncPolicy(config.fsyncPolicy, intervalMs: config.fsyncIntervalMs),
                snapshotIntervalSeconds: config.snapshotIntervalSeconds, pinSettings: config.pins,
                panicSettings: config.panic, logger: logger))
        }
    }

    /// Runs `hook` at the end of every loop turn before any output is flushed (the journal's group
    /// commit: replies leave only after the records they acknowledge are written).
    public func addBeforeFlushHook(_ hook: @escaping () -> Void) {
        beforeFlushHooks.append(hook)
    }

    /// Runs `hook` once after the loop has stopped (graceful shutdown), before `run` returns.
    public func addStopHook(_ hook: @escaping () -> Void) {
        stopHooks.append(hook)
    }

    /// Runs `hook` on every timer tick (every `tickMs`), after the connection timers.
    public func addTickHook(_ hook: @escaping () -> Void) {
        tickHooks.append(hook)
    }

    /// The open connection on `fd`, if any.
    public func connection(fd: Int32) -> Connection? {
        Int(fd) < connections.count ? connections[Int(fd)] : nil
    }

    deinit { iovecs.deallocate() }

    /// Replaces the application behind a WebSocket path (later issues mount theirs on `/v1`).
    public func mount(_ path: String, _ application: WebSocketApplication) {
        applications[path] = application
    }

    /// Binds, installs signal handling and the timer tick, then runs until shutdown completes.
    public func run() throws {
        ProcessLimits.ignoreSIGPIPE()
        let limit = try ProcessLimits.raiseFileDescriptorLimit()
        logger.info("file descriptor limit raised", metadata: ["nofile": "\(limit)"])
        signals = try SignalSource(signals: [SIGTERM, SIGINT], loop: loop) { [unowned self] signal in
            self.beginShutdown(reason: signal == SIGTERM ? "SIGTERM" : "SIGINT")
        }
        ticker = try PeriodicTimer(intervalMs: Int(Self.tickMs), loop: loop) { [unowned self] in self.tick() }
        let listener = try Listener(address: config.listen, backlog: Int32(config.backlog), server: self)
        self.listener = listener
        boundAddress = ListenAddress(host: config.listen.host, port: Socket.localPort(listener.fd) ?? config.listen.port)
        logger.info("listening on \(boundAddress!)", metadata: ["echo": "\(config.echoEnabled)", "max_connections": "\(config.maxConnections)"])
        try loop.run()
        for hook in stopHooks { hook() }
        logger.info("stopped", metadata: ["connections_left": "\(connectionCount)"])
    }

    // MARK: accepting

    func accepted(fd: Int32) {
        if connectionCount >= config.maxConnections || shutdownDeadlineMs != nil {
            close(fd)
            listener?.refused += 1
            return
        }
        Socket.setNoDelay(fd)
        let now = monotonicMilliseconds()
        let connection = Connection(fd: fd, server: self, now: now)
        do {
            try loop.register(fd: fd, events: connection.interest, handler: connection)
        } catch {
            logger.warning("cannot watch a new connection", metadata: ["error": "\(error)"])
            close(fd)
            return
        }
        let index = Int(fd)
        if index >= connections.count {
            connections.append(contentsOf: repeatElement(nil, count: max(index + 1 - connections.count, connections.count / 2 + 64)))
        }
        connections[index] = connection
        connectionCount += 1
        wheel.schedule(fd, atMs: now + Int64(config.handshakeTimeoutMs))
    }

    // MARK: routing

    enum Route {
        case respond(HTTPResponse)
        case upgrade(UpgradeRequest, WebSocketApplication)
    }

    func route(_ head: HTTPRequestHead) -> Route {
        let path = head.path
        if path == "/healthz" {
            guard head.method == "GET" || head.method == "HEAD" else {
                return .respond(HTTPResponse(status: .methodNotAllowed, headers: [("Allow", "GET, HEAD")], body: Array("use GET\n".utf8), contentType: "text/plain; charset=utf-8"))
            }
            let uptime = (monotonicMilliseconds() - startedMs) / 1000
            let body = #"{"status":"ok","connections":\#(webSocketCount),"uptime_s":\#(uptime)}"# + "\n"
            return .respond(HTTPResponse(status: .ok, body: head.method == "HEAD" ? [] : Array(body.utf8), contentType: "application/json"))
        }
        guard let application = applications[path] else {
            return .respond(HTTPResponse(status: .notFound, body: Array("no such endpoint: try /v1 (WebSocket) or /healthz\n".utf8), contentType: "text/plain; charset=utf-8"))
        }
        switch Handshake.validate(head, supportedSubprotocols: path == "/v1" ? ["vigil.v1"] : []) {
        case .success(let upgrade): return .upgrade(upgrade, application)
        case .failure(let error): return .respond(error.response())
        }
    }

    func upgraded(_ connection: Connection) {
        webSocketCount += 1
        scheduleKeepAlive(connection, from: monotonicMilliseconds())
    }

    func releasedApplication(_ connection: Connection) {
        guard let app = connection.app else { return }
        connection.app = nil
        webSocketCount -= 1
        app.closed(connection)
    }

    // MARK: output

    func scheduleFlush(_ connection: Connection) {
        guard !connection.queuedForFlush else { return }
        connection.queuedForFlush = true
        flushList.append(connection)
    }

    /// End of turn: one writev (or a few, for long queues) per connection with output.
    private func flushAll() {
        for hook in beforeFlushHooks { hook() }
        var i = 0
        while i < flushList.count {  // a flush may close a connection but never adds to this list
            let connection = flushList[i]
            connection.queuedForFlush = false
            if connection.phase != .closed { flush(connection) }
            i += 1
        }
        flushList.removeAll(keepingCapacity: true)
        if shutdownDeadlineMs != nil && connectionCount == 0 { loop.stop() }
    }

    func flush(_ connection: Connection) {
        switch connection.output.flush(fd: connection.fd, iovecs: iovecs, maxIovecs: maxIovecs, pool: pool) {
        case .drained:
            setInterest(connection, writable: false)
            connection.outputDrained()
        case .pending:
            setInterest(connection, writable: true)
        case .failed:
            abort(connection)
        }
    }

    /// Reading pauses while a connection's own output is backed up (an echo client that does not
    /// read must not make us buffer without bound); it resumes when the output drains.
    func applyBackpressure(_ connection: Connection) {
        if connection.output.byteCount > readPauseBytes { setInterest(connection, writable: true, readable: false) }
    }

    private func setInterest(_ connection: Connection, writable: Bool, readable: Bool = true) {
        var events: IOEvents = [.readHangup]
        if readable { events.insert(.readable) }
        if writable { events.insert(.writable) }
        if events != connection.interest {
            connection.interest = events
            loop.modify(fd: connection.fd, events: events)
        }
    }

    func slowConsumer(_ connection: Connection) {
        logger.debug("dropping a consumer whose output passed the buffer limit", metadata: ["limit": "\(config.maxOutputBufferBytes)"])
        abort(connection)
    }

    // MARK: timers

    func scheduleCloseTimeout(_ connection: Connection) {
        wheel.schedule(connection.fd, atMs: monotonicMilliseconds() + Int64(config.closeTimeoutMs))
    }

    private func scheduleKeepAlive(_ connection: Connection, from ms: Int64) {
        wheel.schedule(connection.fd, atMs: ms + Int64(config.pingIntervalMs))
    }

    private func tick() {
        let now = monotonicMilliseconds()
        wheel.collectDue(atMs: now, into: &due)
        for fd in due { timerFired(fd: fd, now: now) }
        due.removeAll(keepingCapacity: true)
        for hook in tickHooks { hook() }
        if let deadline = shutdownDeadlineMs, now >= deadline {
            logger.warning("shutdown grace period over; closing the remaining connections", metadata: ["connections": "\(connectionCount)"])
            for case let connection? in connections { abort(connection) }
            loop.stop()
        }
    }

    private func timerFired(fd: Int32, now: Int64) {
        guard Int(fd) < connections.count, let connection = connections[Int(fd)] else { return }
        switch connection.phase {
        case .http:
            connection.respond(HTTPResponse(status: .requestTimeout, body: Array("request head not received in time\n".utf8), contentType: "text/plain; charset=utf-8"))
            scheduleFlush(connection)
        case .open:
            switch KeepAlive.decide(now: now, lastActivity: connection.lastActivityMs, pingSentAt: connection.pingSentAtMs,
                                    interval: Int64(config.pingIntervalMs), timeout: Int64(config.pongTimeoutMs)) {
            case .wait(let until):
                wheel.schedule(fd, atMs: until)
            case .ping(let timeoutAt):
                connection.pingSentAtMs = now
                connection.sendFrame(.ping, payload: UnsafeRawBufferPointer(start: nil, count: 0))
                wheel.schedule(fd, atMs: timeoutAt)
            case .drop:
                logger.debug("dropping a client that did not answer a ping")
                abort(connection)
            }
        case .closeSent, .draining:
            abort(connection)
        case .closed:
            break
        }
    }

    // MARK: closing

    /// Closes the socket now, whatever its phase.
    func abort(_ connection: Connection) {
        guard connection.phase != .closed else { return }
        if connection.phase == .open || connection.phase == .closeSent { releasedApplication(connection) }
        connection.phase = .closed
        let fd = connection.fd
        wheel.cancel(fd)
        loop.deregister(fd: fd)
        connection.output.removeAll(pool: pool)
        connection.message = []
        connection.http = nil
        close(fd)
        connections[Int(fd)] = nil
        connectionCount -= 1
        if shutdownDeadlineMs != nil && connectionCount == 0 { loop.stop() }
    }

    /// SIGTERM/SIGINT: stop accepting, send 1001 to every WebSocket client, wait for them at most
    /// `shutdown_grace_ms`, then stop.
    func beginShutdown(reason: String) {
        guard shutdownDeadlineMs == nil else {
            logger.notice("second stop signal: closing now")
            for case let connection? in connections { abort(connection) }
            loop.stop()
            return
        }
        shutdownDeadlineMs = monotonicMilliseconds() + Int64(config.shutdownGraceMs)
        logger.notice("shutting down", metadata: ["signal": "\(reason)", "connections": "\(connectionCount)"])
        listener?.close()
        listener = nil
        for case let connection? in connections {
            switch connection.phase {
            case .http: abort(connection)
            case .open: connection.close(code: .goingAway, reason: "server shutting down")
            default: break
            }
        }
        if connectionCount == 0 { loop.stop() }
    }
}

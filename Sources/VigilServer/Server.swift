import CLinux
import Glibc
import Logging
import Prometheus
import VigilLoop
import VigilWire

/// The daemon's core on one loop thread: the listener, the connection table, the deadlines, the
/// applications' end-of-turn step, and shutdown.
///
/// It owns every connection in a table indexed by fd and one timer wheel whose ids are those fds;
/// each connection has at most one deadline, which its lifecycle chooses. It never changes a
/// connection's state itself: it creates connections, finds them by fd, fires their deadlines
/// and tells them to close.
///
/// One loop turn (the order is `EventLoop`'s; docs/ARCHITECTURE.md walks it): events are read
/// and applied; then `endOfTurn` runs each application's step (for `/v1`: the fan-out of
/// everything the turn produced, then the journal's write and fsync); then the loop flushes every
/// connection with output, one `writev` each; then fds released in the turn are closed.
public final class Server {
    public let config: ServerConfig
    public let loop: EventLoop
    let logger: Logger
    let timeouts: ConnectionLifecycle.Timeouts
    let policies: SendPolicies
    /// Reverse proxies whose `X-Forwarded-For` names the real client (`server.trusted_proxies`).
    let trustedProxies: [AddressPrefix]
    /// permessage-deflate: settings, shared deflaters, the inflater pool.
    let compression: Compression
    private(set) var listener: Listener?
    private(set) var tlsListener: Listener?
    private var adminListener: Listener?
    /// Connections refused by listeners already closed (shutdown), for the metrics.
    private(set) var listenerRefusedBefore = 0
    let connections = ConnectionTable()
    private var wheel: TimerWheel
    private var due: [Int32] = []
    private var tickSteps: [() -> Void] = []
    private var stopSteps: [() -> Void] = []
    private var applications: [String: any WebSocketApplication] = [:]
    /// The distinct mounted applications, in mount order: each runs its end-of-turn step once.
    private var turnApplications: [any WebSocketApplication] = []
    /// `/v1`, for the server's own wiring (persistence) and for tests.
    private(set) var v1: V1Application?
    /// The web pages (`web.enabled`), read at start-up.
    private(set) var site: StaticSite?
    private var signals: SignalSource?
    private var ticker: PeriodicTimer?
    private(set) var shutdownRequested: String?
    private var shutdownDeadlineMs: Int64?
    let startedMs = monotonicMilliseconds()
    /// Connections accepted and not yet closed, in any phase.
    public private(set) var connectionCount = 0
    /// Open WebSocket connections.
    public private(set) var webSocketCount = 0
    /// The addresses actually bound (with the real port when the config asked for port 0).
    public private(set) var boundAddress: ListenAddress?
    public private(set) var boundTLSAddress: ListenAddress?
    public private(set) var boundAdminAddress: ListenAddress?
    /// Connections refused because `max_connections` were held or shutdown had begun.
    private(set) var refusedCount = 0
    /// What the server counts as it goes (the operator's metrics read these).
    var counters = ServerCounters()
    /// `/metrics` (the admin listener).
    let metrics: OperatorMetrics
    /// systemd's notification socket, when vigild runs as a `Type=notify` service.
    let notifier: ServiceNotifier?
    private var nextWatchdogMs: Int64 = 0
    /// The I/O error of the connection being dropped (for its close line).
    private var lastFailure: SystemError?
    /// The figures of the last summary line (its changes are reported).
    var lastSummary: ServerFigures?
    /// `/state/digest`'s kept digest (see `StateDigestCache`).
    var stateDigests = StateDigestCache()
    private var nextSummaryMs: Int64
    /// Admin connections open; they have their own small cap, so that a server full of clients
    /// still answers its operator.
    private(set) var adminConnectionCount = 0
    static let maxAdminConnections = 16

    static let tickMs: Int64 = 50

    /// `registry`: where `/metrics` series live (vigild bootstraps swift-metrics with the same one).
    /// `notifier`: systemd's socket (by default from `$NOTIFY_SOCKET`).
    public init(config: ServerConfig, logger: Logger, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
                notifier: ServiceNotifier? = ServiceNotifier()) throws {
        self.config = config
        self.logger = logger
        self.metrics = OperatorMetrics(registry: registry)
        self.notifier = notifier
        self.nextSummaryMs = monotonicMilliseconds() + Int64(config.summaryIntervalSeconds) * 1000
        self.loop = try EventLoop()
        self.wheel = TimerWheel(tickMs: Self.tickMs, slots: 1024, nowMs: monotonicMilliseconds())
        self.timeouts = ConnectionLifecycle.Timeouts(
            handshakeMs: Int64(config.handshakeTimeoutMs), pingIntervalMs: Int64(config.pingIntervalMs),
            pongTimeoutMs: Int64(config.pongTimeoutMs), closeTimeoutMs: Int64(config.closeTimeoutMs))
        self.trustedProxies = config.trustedProxies.compactMap(AddressPrefix.init(parsing:))
        self.compression = Compression(settings: DeflateSettings(
            enabled: config.compressionEnabled, serverMaxWindowBits: config.compressionServerMaxWindowBits,
            clientMaxWindowBits: config.compressionClientMaxWindowBits, memoryLevel: config.compressionMemoryLevel,
            compressionLevel: config.compressionLevel, minimumMessageBytes: config.compressionMinMessageBytes))
        self.policies = SendPolicies(maxQueuedBytes: config.maxOutputBufferBytes, maxTotalQueuedBytes: config.maxTotalOutputBytes,
                                     conflateAbove: config.conflateAboveBytes)
        loop.addEndOfTurnStep { [unowned self] in self.endOfTurn() }
        if config.echoEnabled { mount("/echo", EchoApplication()) }
        let v1 = V1Application(server: self, settings: config.pins, panic: config.panic, secrets: OpenSSLSecrets())
        mount("/v1", v1)
        self.v1 = v1
        if config.webEnabled {
            let loaded = try StaticSiteLoader.load(config)
            site = loaded.site
            logger.info("web pages on", metadata: ["files": "\(loaded.pages)", "leaflet_files": "\(loaded.leaflet)",
                                                   "tiles": "\(config.webTileURL.isEmpty ? "none" : "on")"])
            if loaded.leaflet == 0 {
                logger.warning("web.leaflet \(config.webLeaflet.isEmpty ? "is empty" : "holds no files"): the pages show no map (apt-get install libjs-leaflet)")
            }
        }
        if config.stateDirectory.isEmpty {
            logger.warning("state.directory is not set: pins and panic streams live in memory only and are lost when vigild stops")
        } else {
            try v1.attach(Persistence(
                path: config.stateDirectory, policy: FsyncPolicy(config.fsyncPolicy, intervalMs: config.fsyncIntervalMs),
                snapshotIntervalSeconds: config.snapshotIntervalSeconds, pinSettings: config.pins,
                panicSettings: config.panic, checkinSettings: config.checkin, journal: !config.replication.enabled,
                logger: logger, loop: loop))
        }
        if config.replication.enabled {
            try v1.joinReplication(config.replication, startAfter: v1.persistence?.recovered.replicatedSequence ?? 0,
                               highestVoter: v1.persistence?.recovered.highestVoteSession ?? 0, logger: logger)
            logger.notice("cluster node", metadata: ["cluster": "\(config.replication)"])
        }
    }

    /// Puts an application behind a WebSocket path (replacing whatever was there).
    public func mount(_ path: String, _ application: any WebSocketApplication) {
        applications[path] = application
        turnApplications = []
        for app in applications.values where !turnApplications.contains(where: { $0 === app }) {
            turnApplications.append(app)
        }
    }

    func application(at path: String) -> (any WebSocketApplication)? { applications[path] }

    /// Runs `step` on every timer tick (every `tickMs`), after the connections' deadlines.
    public func addTickStep(_ step: @escaping () -> Void) {
        tickSteps.append(step)
    }

    /// Runs `step` once after the loop has stopped (graceful shutdown), before `run` returns.
    public func addStopStep(_ step: @escaping () -> Void) {
        stopSteps.append(step)
    }

    /// The connection on `fd`, if one is open (in any phase but closed).
    public func connection(fd: Int32) -> Connection? {
        connections[fd]
    }

    /// Binds, installs signal handling and the timer tick, then runs until shutdown completes.
    public func run() throws {
        ProcessLimits.ignoreSIGPIPE()
        let limit = try ProcessLimits.raiseFileDescriptorLimit()
        logger.info("file descriptor limit raised", metadata: ["nofile": "\(limit)"])
        signals = try SignalSource(signals: [SIGTERM, SIGINT, SIGHUP], loop: loop) { [unowned self] signal in
            if signal == SIGHUP {
                self.reloadTLS()
            } else {
                self.beginShutdown(reason: signal == SIGTERM ? "SIGTERM" : "SIGINT")
            }
        }
        try startTicker()
        logger.info("config", metadata: [
            "max_connections": "\(config.maxConnections)", "max_message_bytes": "\(config.maxMessageBytes)",
            "max_output_buffer_bytes": "\(config.maxOutputBufferBytes)", "compression": "\(config.compressionEnabled)",
            "tls": "\(config.tlsListen != nil)", "state_directory": "\(config.stateDirectory.isEmpty ? "none" : config.stateDirectory)",
            "fsync": "\(config.fsyncPolicy)", "snapshot_interval_s": "\(config.snapshotIntervalSeconds)",
            "trusted_proxies": "\(config.trustedProxies.count)", "log_level": "\(config.logLevel)",
        ])
        if let address = config.adminListen {
            let admin = try Listener(address: address, backlog: 64, server: self, tls: nil, admin: true)
            adminListener = admin
            boundAdminAddress = ListenAddress(host: address.host, port: Socket.localPort(admin.fd) ?? address.port)
            logger.info("admin endpoints on \(boundAdminAddress!)", metadata: ["endpoints": "/metrics /stats /healthz /state/digest"])
        }
        if let address = config.listen {
            let listener = try Listener(address: address, backlog: Int32(config.backlog), server: self, tls: nil)
            self.listener = listener
            boundAddress = ListenAddress(host: address.host, port: Socket.localPort(listener.fd) ?? address.port)
            logger.info("listening on \(boundAddress!)", metadata: ["echo": "\(config.echoEnabled)", "max_connections": "\(config.maxConnections)"])
        }
        if let address = config.tlsListen {
            let listener = try Listener(address: address, backlog: Int32(config.backlog), server: self, tls: try Self.tlsContext(config))
            tlsListener = listener
            boundTLSAddress = ListenAddress(host: address.host, port: Socket.localPort(listener.fd) ?? address.port)
            logger.info("listening for TLS on \(boundTLSAddress!)", metadata: ["certificate": "\(config.tlsCertificate)", "min_version": "\(config.tlsMinVersion)"])
        }
        let f = figures()
        logger.notice("ready", metadata: ["state": "\(f.stateMode.rawValue)", "pins": "\(f.pins)", "streams": "\(f.streamsActive)"])
        notifier?.send("READY=1\nSTATUS=\(Self.statusLine(f))")
        if let interval = notifier?.watchdogIntervalMs {
            logger.info("systemd watchdog enabled", metadata: ["ping_interval_ms": "\(interval)"])
        }
        try loop.run()
        for step in stopSteps { step() }
        logger.info("stopped", metadata: ["connections_left": "\(connectionCount)"])
    }

    /// The periodic tick that fires deadlines and the applications' timers (pin expiry, stale
    /// streams, snapshots). `run` starts it; tests that drive turns by hand may start it too.
    func startTicker() throws {
        ticker = try PeriodicTimer(intervalMs: Int(Self.tickMs), loop: loop) { [unowned self] in self.tick() }
    }

    // MARK: connections

    /// The TLS context the config describes (certificate, key, versions, ciphers); the error names the file.
    static func tlsContext(_ config: ServerConfig) throws(TLSError) -> TLSContext {
        try TLSContext.server(certificateChain: config.tlsCertificate, privateKey: config.tlsPrivateKey,
                              minimumVersion: TLSVersion(rawValue: config.tlsMinVersion) ?? .tls12,
                              ciphers: config.tlsCiphers, ciphersuites: config.tlsCiphersuites)
    }

    /// SIGHUP: the certificate and key are read again; new handshakes use the new pair, open
    /// connections keep theirs. A file that cannot be used is refused and the old pair kept.
    func reloadTLS() {
        guard let listener = tlsListener else {
            logger.notice("SIGHUP: no TLS listener, nothing to reload")
            return
        }
        do {
            listener.tls = try Self.tlsContext(config)
            logger.notice("TLS certificate reloaded", metadata: ["certificate": "\(config.tlsCertificate)"])
        } catch {
            logger.error("TLS reload refused; the previous certificate stays in use", metadata: ["error": "\(error)"])
        }
    }

    /// Takes over a connected socket (from a listener, or a socketpair end in tests), with a TLS
    /// session when `tls` is given.
    ///
    /// `peer` (nil for a Unix socket) becomes the connection's address key at once, and stays only
    /// as its keyed hash; a trusted proxy's `X-Forwarded-For` may replace it at the request head.
    @discardableResult
    func adopt(fd: Int32, tls: TLSContext? = nil, peer: PeerAddress? = nil, admin: Bool = false) -> Connection? {
        if admin {
            guard adminConnectionCount < Self.maxAdminConnections, shutdownRequested == nil else {
                Glibc.close(fd)
                return nil
            }
        } else if connectionCount - adminConnectionCount >= config.maxConnections || shutdownRequested != nil {
            Glibc.close(fd)
            refusedCount += 1
            return nil
        }
        Socket.setNoDelay(fd)
        let (connection, actions) = Connection.accepted(fd: fd, server: self, nowMs: monotonicMilliseconds(),
                                                        addressKey: peer?.key ?? PeerAddress.localKey,
                                                        viaTrustedProxy: peer.map { trustedProxies.contains($0) } ?? false, admin: admin)
        // Reading pauses while a connection's own output is backed up: an echo client that never
        // reads must not make us buffer without bound. It resumes when the output drains.
        connection.pauseReadingAbove = min(config.maxOutputBufferBytes / 2, 1 << 20)
        do {
            try connection.start(tls: tls)
        } catch {
            logger.warning("cannot watch a new connection", metadata: ["error": "\(error)"])
            Glibc.close(fd)
            return nil
        }
        connections.insert(connection)
        connectionCount += 1
        if admin { adminConnectionCount += 1 } else { counters.accepted += 1 }
        connection.perform(actions)
        return connection
    }

    /// A connection dropped itself: forget it (its stream closes its fd at the end of the turn).
    func remove(_ connection: Connection) {
        let fd = connection.fd
        guard connections.remove(connection) else { return }
        wheel.cancel(fd)
        connectionCount -= 1
        if connection.isAdmin { adminConnectionCount -= 1 }
        if shutdownDeadlineMs != nil && connectionCount == adminConnectionCount { loop.stop() }
    }

    func setDeadline(_ fd: Int32, atMs: Int64) {
        wheel.schedule(fd, atMs: atMs)
    }

    func webSocketOpened() { webSocketCount += 1 }
    func webSocketEnded() { webSocketCount -= 1 }

    /// A connection's I/O failed; it is dropped at once, and its close line names the error.
    func connectionFailed(_ error: SystemError) {
        lastFailure = error
    }

    /// One connection is gone: counted by why, and logged at debug level (no address, no id).
    func connectionEnded(_ cause: ConnectionEnd, closeCode: UInt16) {
        counters.ended[cause.rawValue] += 1
        defer { lastFailure = nil }
        guard logger.logLevel <= .debug else { return }
        var metadata: Logger.Metadata = ["reason": "\(cause.label)", "close_code": "\(closeCode)"]
        if cause == .ioError, let error = lastFailure { metadata["error"] = "\(error)" }
        logger.debug("connection closed", metadata: metadata)
    }

    func slowConsumer(_ traffic: TrafficClass) {
        counters.slowConsumerCloses[traffic.rawValue] += 1
        logger.debug("closing a consumer whose output passed its budget", metadata: ["traffic": "\(traffic)"])
    }

    // MARK: the turn

    /// Step 3 of the loop turn: each application's end-of-turn work, then what shutdown asked for.
    private func endOfTurn() {
        for app in turnApplications { app.endOfTurn() }
        if let reason = shutdownRequested, shutdownDeadlineMs == nil { closeEveryone(reason: reason) }
    }

    private func tick() {
        let now = monotonicMilliseconds()
        wheel.collectDue(atMs: now, into: &due)
        for fd in due { connection(fd: fd)?.timerFired(nowMs: now) }
        due.removeAll(keepingCapacity: true)
        for step in tickSteps { step() }
        if let interval = notifier?.watchdogIntervalMs, now >= nextWatchdogMs {
            // From the loop's own tick: a loop that hangs stops the pings, and systemd restarts it.
            notifier?.send("WATCHDOG=1")
            nextWatchdogMs = now + interval
        }
        if config.summaryIntervalSeconds > 0, now >= nextSummaryMs {
            nextSummaryMs = now + Int64(config.summaryIntervalSeconds) * 1000
            logSummary()
        }
        if let deadline = shutdownDeadlineMs, now >= deadline {
            logger.warning("shutdown grace period over; closing the remaining connections", metadata: ["connections": "\(connectionCount)"])
            for case let connection? in connections { connection.abort() }
            loop.stop()
        }
    }

    // MARK: shutdown

    /// SIGTERM/SIGINT: stop accepting; at the end of this turn (after the applications' fan-out,
    /// so replies already produced go out first) send 1001 to every WebSocket client; wait for
    /// them at most `shutdown_grace_ms`, then stop. A second signal closes at once.
    func beginShutdown(reason: String) {
        guard shutdownRequested == nil else {
            logger.notice("second stop signal: closing now")
            for case let connection? in connections { connection.abort() }
            loop.stop()
            return
        }
        shutdownRequested = reason
        logger.notice("shutting down", metadata: ["signal": "\(reason)", "connections": "\(connectionCount)"])
        notifier?.send("STOPPING=1\nSTATUS=shutting down: closing \(webSocketCount) websockets")
        for l in [listener, tlsListener, adminListener] {
            guard let l else { continue }
            listenerRefusedBefore += l.refused
            l.close()
        }
        (listener, tlsListener, adminListener) = (nil, nil, nil)
    }

    private func closeEveryone(reason: String) {
        shutdownDeadlineMs = monotonicMilliseconds() + Int64(config.shutdownGraceMs)
        for case let connection? in connections {
            switch connection.lifecycle.phase {
            case .http: connection.abort()
            case .open: connection.close(code: .goingAway, reason: "server shutting down")
            case .closeSent, .draining, .closed: break
            }
        }
        if connectionCount == adminConnectionCount { loop.stop() }
    }
}

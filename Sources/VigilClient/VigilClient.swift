import Foundation

/// A client of vigild's `/v1` protocol (docs/PROTOCOL.md): one WebSocket, with requests
/// answered by `ref`, per-request timeouts, typed errors, `rate_limited` waited out, and
/// reconnection that restores what the app asked for: the map subscription (its pin set
/// reconciled), each watched stream (from the last seq delivered), each owned stream (with its
/// owner token), each check-in circle (opened or joined again, reporting what was missed), and
/// the outbox of writes not yet answered (re-sent with the same `idem` key).
///
/// It talks to the network only through a ``VigilTransport``.
public actor VigilClient {
    /// Where the client connects (`ws://host:port/v1` or `wss://…`).
    public nonisolated let url: URL
    /// The options it was made with.
    public nonisolated let options: VigilClientOptions
    let transport: any VigilTransport
    let clock: any VigilClock

    /// The connection's state.
    public enum State: Sendable, Equatable {
        /// ``connect()`` not called yet.
        case idle
        /// Connecting, or waiting to reconnect.
        case connecting
        /// Welcomed by the server.
        case open
        /// Closed for good.
        case closed
    }

    /// The connection's state.
    public private(set) var state: State = .idle
    /// The last welcome.
    public private(set) var welcome: Welcome?
    /// How many connections were welcomed (2 and more: reconnected).
    public private(set) var connections = 0
    /// The session id of the current connection.
    public var session: String? { welcome?.session }
    /// The server's limits.
    public var limits: Limits? { welcome?.limits }
    /// Whether the connection is open.
    public var isOpen: Bool { state == .open }

    var connection: (any VigilConnection)?
    var generation = 0
    var outgoing: AsyncStream<String>.Continuation?
    var giveUpTask: Task<Void, Never>?
    var retryTask: Task<Void, Never>?
    var heartbeatTask: Task<Void, Never>?
    var attempt = 0
    var nextRef = 1
    var nextID = 1
    var inFlight: [Int: RequestRecord] = [:]
    var queued: [RequestRecord] = []
    var openWaiters: [Int: (CheckedContinuation<Result<Void, VigilError>, Never>, Task<Void, Never>?)] = [:]
    var lastHeard: Duration = .zero
    var probing = false
    var listeners: [Int: AsyncStream<ConnectionEvent>.Continuation] = [:]
    var map: MapRecord?
    var watches: [String: WatchRecord] = [:]
    var owners: [String: OwnerRecord] = [:]
    var circles: [String: CircleRecord] = [:]
    /// Watches and circles that ended, for their last state (by order).
    var endedWatches: [Int: WatchRecord] = [:]
    var endedCircles: [Int: CircleRecord] = [:]

    /// A client of `url` over `transport` (by default the platform's WebSocket transport:
    /// ``SocketTransport`` on Linux, `URLSessionTransport` on Apple platforms).
    /// Nothing happens before ``connect()``.
    public init(url: URL, options: VigilClientOptions = VigilClientOptions(),
                transport: any VigilTransport = Transports.platformDefault) {
        self.url = url
        self.options = options
        self.transport = transport
        self.clock = options.clock
    }

    // MARK: the connection

    /// Opens the connection; returns the server's welcome. Reconnects by itself afterwards.
    /// Throws `closed` after ``close()``, `timeout` past ``VigilClientOptions/connectTimeout``,
    /// `disconnected` when the connection is lost with reconnects off.
    @discardableResult
    public func connect() async throws(VigilError) -> Welcome {
        if state == .open, let welcome { return welcome }
        if state == .closed { throw closedError() }
        if state == .idle { open() }
        try await waitOpen(timeout: options.connectTimeout)
        guard let welcome else { throw closedError() }
        return welcome
    }

    /// Closes for good: no reconnect; every request and write waiting fails with `closed`, and
    /// every event stream finishes.
    public func close() async {
        guard state != .closed else { return }
        state = .closed
        retryTask?.cancel()
        heartbeatTask?.cancel()
        giveUpTask?.cancel()
        let conn = connection
        connection = nil
        outgoing?.finish()
        outgoing = nil
        generation += 1
        let all = inFlight.values.sorted { $0.id < $1.id } + queued
        inFlight = [:]
        queued = []
        for r in all { finish(r, .failure(VigilError(code: VigilError.Code.closed, message: "\(r.op): the client was closed", op: r.op))) }
        failOpenWaiters(closedError())
        finishEverything()
        await conn?.close(code: 1000, reason: "")
    }

    /// Drops the current connection, if any, and connects again at once with the backoff reset:
    /// for a network that changed. Requests in flight fail with `disconnected` (writes stay in
    /// the outbox); everything is restored on the new connection.
    public func reconnectNow() {
        guard state != .closed, state != .idle else { return }
        retryTask?.cancel()
        attempt = 0
        if connection != nil || state == .open {
            let conn = connection
            lost(code: 1000, reason: "reconnecting")
            if let conn { Task { await conn.close(code: 1000, reason: "reconnecting") } }
        }
        open()
    }

    /// The app came to the foreground: the backoff is reset and the client reconnects at once
    /// (a connection kept while suspended may be dead without a word), then restores
    /// subscriptions, watches, owned streams and circles, whose replies say what was missed.
    public func foreground() { reconnectNow() }

    /// The device changed networks (Wi-Fi to cellular): as ``foreground()``.
    public func networkChanged() { reconnectNow() }

    /// A stream of connection events and of every server event, from now on; it finishes at ``close()``.
    public func events() -> AsyncStream<ConnectionEvent> {
        let (stream, cont) = AsyncStream<ConnectionEvent>.makeStream()
        if state == .closed {
            cont.finish()
            return stream
        }
        let id = nextID
        nextID += 1
        listeners[id] = cont
        cont.onTermination = { [weak self] _ in Task { await self?.removeListener(id) } }
        return stream
    }

    func removeListener(_ id: Int) { listeners[id] = nil }

    /// Closed for good: every event stream finishes, after `.closed`.
    func finishEverything() {
        map?.finish()
        map = nil
        for w in watches.values { w.finish() }
        watches = [:]
        for o in owners.values { o.events.finish() }
        owners = [:]
        for c in circles.values { c.finish() }
        circles = [:]
        emit(.closed)
        for l in listeners.values { l.finish() }
        listeners = [:]
    }

    func emit(_ e: ConnectionEvent) {
        for l in listeners.values { l.yield(e) }
    }

    func closedError(_ op: String? = nil) -> VigilError {
        VigilError(code: VigilError.Code.closed, message: "the client was closed", op: op)
    }

    func waitOpen(timeout: Duration?) async throws(VigilError) {
        switch state {
        case .open: return
        case .closed: throw closedError()
        case .idle: throw VigilError(code: VigilError.Code.notConnected, message: "call connect() first")
        case .connecting: break
        }
        let id = nextID
        nextID += 1
        let result = await withCheckedContinuation { (cont: CheckedContinuation<Result<Void, VigilError>, Never>) in
            var timer: Task<Void, Never>?
            if let timeout {
                let deadline = clock.now + timeout
                timer = Task { [clock] in
                    do { try await clock.sleep(until: deadline) } catch { return }
                    self.openWaitTimedOut(id, timeout)
                }
            }
            openWaiters[id] = (cont, timer)
        }
        try result.get()
    }

    func openWaitTimedOut(_ id: Int, _ timeout: Duration) {
        guard let (cont, _) = openWaiters.removeValue(forKey: id) else { return }
        cont.resume(returning: .failure(VigilError(code: VigilError.Code.timeout, message: "not connected within \(timeout)")))
    }

    func failOpenWaiters(_ error: VigilError) {
        let waiters = openWaiters
        openWaiters = [:]
        for (cont, timer) in waiters.values {
            timer?.cancel()
            cont.resume(returning: .failure(error))
        }
    }

    func open() {
        state = .connecting
        generation += 1
        let gen = generation
        emit(.connecting)
        giveUpTask?.cancel()
        let deadline = clock.now + options.attemptTimeout
        giveUpTask = Task { [clock] in
            do { try await clock.sleep(until: deadline) } catch { return }
            self.giveUp(gen)
        }
        let transport = self.transport, url = self.url, timeout = options.attemptTimeout
        Task {
            do throws(TransportError) {
                let conn = try await transport.connect(to: url, timeout: timeout)
                await self.connected(conn, gen)
            } catch {
                self.attemptFailed(gen, error)
            }
        }
    }

    func connected(_ conn: any VigilConnection, _ gen: Int) async {
        guard gen == generation, state == .connecting else {
            await conn.close(code: 1000, reason: "")
            return
        }
        connection = conn
        let (stream, cont) = AsyncStream<String>.makeStream()
        outgoing = cont
        // One writer per connection keeps the messages in the order they were made.
        Task {
            for await text in stream {
                do { try await conn.send(text) } catch { return }
            }
        }
        Task {
            while true {
                let text: String
                do throws(TransportError) { text = try await conn.receive() } catch {
                    self.connectionEnded(gen, error)
                    return
                }
                let more = self.received(text, gen)
                if !more { return }
            }
        }
    }

    func attemptFailed(_ gen: Int, _ error: TransportError) {
        guard gen == generation, state == .connecting else { return }
        giveUpTask?.cancel()
        lost(code: 1006, reason: "connection failed: \(error)")
        scheduleReconnect()
    }

    func giveUp(_ gen: Int) {
        guard gen == generation, state == .connecting else { return }
        let conn = connection
        lost(code: 4000, reason: "no welcome in time")
        if let conn { Task { await conn.close(code: 1000, reason: "") } }
        scheduleReconnect()
    }

    func connectionEnded(_ gen: Int, _ error: TransportError) {
        guard gen == generation, state != .closed else { return }
        giveUpTask?.cancel()
        var code: UInt16? = nil
        var reason = "\(error)"
        if case .closed(let c, let r) = error { code = c; reason = r }
        lost(code: code, reason: reason)
        scheduleReconnect()
    }

    /// The current connection is gone (or dropped on purpose): requests in flight fail with
    /// `disconnected`, except writes with an idempotency key, which go back to the outbox.
    func lost(code: UInt16?, reason: String) {
        connection = nil
        outgoing?.finish()
        outgoing = nil
        heartbeatTask?.cancel()
        generation += 1
        let wasOpen = state == .open
        if state != .closed { state = .connecting }
        let flying = inFlight.values.sorted { $0.id < $1.id }
        inFlight = [:]
        for r in flying {
            r.ref = nil
            if r.keptOnLoss {
                queued.append(r)
            } else {
                finish(r, .failure(VigilError(code: VigilError.Code.disconnected, message: "\(r.op): connection closed (\(code.map(String.init) ?? "lost"))", op: r.op)))
            }
        }
        queued.sort { $0.id < $1.id }
        if wasOpen { emit(.disconnected(code: code, reason: reason)) }
    }

    func scheduleReconnect() {
        guard state != .closed else { return }
        guard let policy = options.reconnect else {
            state = .closed
            let err = VigilError(code: VigilError.Code.disconnected, message: "connection lost and reconnect is off")
            let waiting = queued
            queued = []
            for r in waiting { finish(r, .failure(VigilError(code: err.code, message: "\(r.op): \(err.message)", op: r.op))) }
            failOpenWaiters(err)
            finishEverything()
            return
        }
        let delay = policy.delay(attempt: attempt, random: options.random())
        attempt += 1
        // The deadline before the event: whoever hears it may move a test clock at once.
        let deadline = clock.now + delay
        emit(.reconnecting(attempt: attempt, delay: delay))
        let gen = generation
        retryTask = Task { [clock] in
            do { try await clock.sleep(until: deadline) } catch { return }
            self.retry(gen)
        }
    }

    func retry(_ gen: Int) {
        guard gen == generation, state == .connecting, connection == nil else { return }
        open()
    }

    /// Handles one message of connection `gen`; false once that connection is over.
    func received(_ text: String, _ gen: Int) -> Bool {
        guard gen == generation else { return false }
        lastHeard = clock.now
        guard let value = JSONValue.parse(text) else {
            emit(.error(VigilError(code: VigilError.Code.badJSON, message: "the server sent a message that is not JSON")))
            return true
        }
        guard case .object(let msg) = value else {
            emit(.error(VigilError(code: VigilError.Code.badMessage, message: "the server sent a message that is not an object")))
            return true
        }
        if msg["type"]?.stringValue == "welcome" {
            giveUpTask?.cancel()
            welcomed(msg)
        } else {
            dispatch(msg)
        }
        return true
    }

    func welcomed(_ msg: JSONObject) {
        guard let w = try? JSONValue.object(msg).decode(Welcome.self) else {
            emit(.error(VigilError(code: VigilError.Code.badMessage, message: "the server's welcome could not be read", reply: msg)))
            return
        }
        welcome = w
        state = .open
        attempt = 0
        connections += 1
        let reconnected = connections > 1
        let waiters = openWaiters
        openWaiters = [:]
        for (cont, timer) in waiters.values {
            timer?.cancel()
            cont.resume(returning: .success(()))
        }
        startHeartbeat()
        // The outbox first, in order, with the keys the writes had (writes made offline, and
        // those whose answer the lost connection took), as the JavaScript client does; then the
        // restore; then the other requests that waited for the connection.
        let waiting = queued
        queued = waiting.filter { !$0.isWrite }
        for r in waiting where r.isWrite { send(r) }
        emit(.open(w, reconnected: reconnected))
        if reconnected { restore() }
        let reads = queued
        queued = []
        for r in reads { send(r) }
    }

    // MARK: heartbeat

    func startHeartbeat() {
        heartbeatTask?.cancel()
        guard let every = options.heartbeat else { return }
        lastHeard = clock.now
        probing = false
        let gen = generation
        let step = max(.milliseconds(50), every / 2)
        var next = clock.now + step  // a fixed schedule from now, not from each wake
        heartbeatTask = Task { [clock] in
            while true {
                do { try await clock.sleep(until: next) } catch { return }
                next += step
                guard self.heartbeatTick(gen, every: every) else { return }
            }
        }
    }

    func heartbeatTick(_ gen: Int, every: Duration) -> Bool {
        guard gen == generation, state == .open else { return false }
        guard !probing, clock.now - lastHeard >= every else { return true }
        probing = true
        Task {
            let result: Result<JSONObject, VigilError>
            do throws(VigilError) {
                result = .success(try await self.call("panic.unwatch", ["stream": "-"], timeout: self.options.heartbeatTimeout))
            } catch {
                result = .failure(error)
            }
            self.probed(gen, result)
        }
        return true
    }

    func probed(_ gen: Int, _ result: Result<JSONObject, VigilError>) {
        probing = false
        guard case .failure(let err) = result, err.code == VigilError.Code.timeout, gen == generation else { return }
        emit(.stalled(silentFor: clock.now - lastHeard))
        reconnectNow()
    }

    // MARK: requests

    /// The operations that change state: each carries an `idem` key and goes through the outbox.
    public static let writeOps: Set<String> = [
        "pin.create", "pin.update", "pin.delete", "pin.vote",
        "panic.start", "panic.update", "panic.status", "panic.timer", "panic.end", "panic.invite", "panic.revoke", "panic.rekey",
        "checkin.create", "checkin.invite", "checkin.revoke", "checkin.answer", "checkin.home", "checkin.close",
        "checkin.request", "checkin.register", "checkin.unregister", "checkin.ack",
    ]

    /// Sends `{op, ref, ...fields}` and returns the `ok` reply; throws a ``VigilError``.
    ///
    /// Waits for the connection when it is not open (within the timeout: `timeout`, or
    /// ``VigilClientOptions/requestTimeout``). On `rate_limited` it waits the `retry_after_ms`
    /// the server gave (1 s without one) and tries again, up to
    /// ``VigilClientOptions/rateLimitRetries`` times. A write (``writeOps``) carries an `idem`
    /// key chosen once for it, and is kept in the outbox until it is answered.
    public func request(_ op: String, _ fields: JSONObject = [:], timeout: Duration? = nil,
                        retryRateLimited: Bool = true) async throws(VigilError) -> JSONObject {
        let isWrite = VigilClient.writeOps.contains(op)
        let idem = isWrite && options.sendsIdempotencyKeys ? makeIdempotencyKey() : nil
        let t = timeout ?? options.requestTimeout
        if !retryRateLimited { return try await call(op, fields, timeout: t, isWrite: isWrite, idem: idem) }
        return try await withRateLimit(op) { () async throws(VigilError) -> JSONObject in
            try await self.call(op, fields, timeout: t, isWrite: isWrite, idem: idem)
        }
    }

    func withRateLimit(_ op: String, _ attempt: () async throws(VigilError) -> JSONObject) async throws(VigilError) -> JSONObject {
        var retries = 0
        while true {
            do {
                return try await attempt()
            } catch {
                guard error.code == VigilError.Code.rateLimited, retries < options.rateLimitRetries, state != .closed else { throw error }
                retries += 1
                let wait = max(.zero, error.retryAfter ?? .seconds(1))
                let deadline = clock.now + wait
                emit(.rateLimited(op: op, retryAfter: wait))
                do { try await clock.sleep(until: deadline) } catch { throw VigilError(code: "cancelled", message: "\(op): cancelled", op: op) }
            }
        }
    }

    /// One attempt. `onReply` runs on the actor before any later message is handled; a non-nil
    /// result fails the request with that error.
    func call(_ op: String, _ fields: JSONObject, timeout: Duration?, isWrite: Bool = false, idem: String? = nil,
              onReply: ((JSONObject) -> VigilError?)? = nil) async throws(VigilError) -> JSONObject {
        let rec = try start(op, fields, timeout: timeout, isWrite: isWrite, idem: idem, onReply: onReply)
        return try await result(of: rec)
    }

    /// Makes a request and sends it now (or queues it for the connection), synchronously: what
    /// is started in one turn of the actor goes out in that order.
    func start(_ op: String, _ fields: JSONObject, timeout: Duration?, isWrite: Bool = false, idem: String? = nil,
               onReply: ((JSONObject) -> VigilError?)? = nil) throws(VigilError) -> RequestRecord {
        switch state {
        case .idle: throw VigilError(code: VigilError.Code.notConnected, message: "\(op): call connect() first", op: op)
        case .closed: throw VigilError(code: VigilError.Code.closed, message: "\(op): the client was closed", op: op)
        default: break
        }
        if isWrite {
            let waiting = queued.count(where: { $0.isWrite }) + inFlight.values.count(where: { $0.isWrite })
            if waiting >= options.outboxLimit {
                throw VigilError(code: VigilError.Code.outboxFull, message: "\(op): \(waiting) writes wait already", op: op)
            }
        }
        let rec = RequestRecord(id: nextID, op: op, fields: fields, isWrite: isWrite, idem: idem, onReply: onReply)
        nextID += 1
        if let timeout {
            let deadline = clock.now + timeout
            rec.timeoutTask = Task { [clock] in
                do { try await clock.sleep(until: deadline) } catch { return }
                self.timedOut(rec, timeout)
            }
        }
        if state == .open { send(rec) } else { queued.append(rec) }
        return rec
    }

    /// The answer to a started request.
    func result(of rec: RequestRecord) async throws(VigilError) -> JSONObject {
        if let r = rec.result { return try r.get() }
        let r = await withCheckedContinuation { (cont: CheckedContinuation<Result<JSONObject, VigilError>, Never>) in
            rec.continuation = cont
        }
        return try r.get()
    }

    func send(_ rec: RequestRecord) {
        let ref = nextRef
        nextRef += 1
        rec.ref = ref
        inFlight[ref] = rec
        var msg = rec.fields
        msg["op"] = .string(rec.op)
        msg["ref"] = .number(Double(ref))
        if let idem = rec.idem { msg["idem"] = .string(idem) }
        outgoing?.yield(JSONValue.object(msg).jsonText)
    }

    func timedOut(_ rec: RequestRecord, _ timeout: Duration) {
        if let ref = rec.ref, inFlight[ref] === rec {
            inFlight[ref] = nil
        } else if let i = queued.firstIndex(where: { $0 === rec }) {
            queued.remove(at: i)
        } else {
            return
        }
        finish(rec, .failure(VigilError(code: VigilError.Code.timeout, message: "\(rec.op): no reply within \(timeout)", op: rec.op)))
    }

    func finish(_ rec: RequestRecord, _ result: Result<JSONObject, VigilError>) {
        rec.timeoutTask?.cancel()
        rec.timeoutTask = nil
        var result = result
        if case .failure(var e) = result, e.idem == nil, let key = rec.idem {
            e.idem = key  // the write's key, for a resend of the same write
            result = .failure(e)
        }
        guard let cont = rec.continuation else {
            if rec.result == nil { rec.result = result }  // answered before anyone awaited it
            return
        }
        rec.continuation = nil
        cont.resume(returning: result)
    }

    // MARK: dispatch

    func dispatch(_ msg: JSONObject) {
        let type = msg["type"]?.stringValue
        if type == "ok" || type == "error", let refValue = msg["ref"] {
            guard let ref = refValue.intValue, let rec = inFlight.removeValue(forKey: ref) else { return }
            if type == "ok" {
                if let err = rec.onReply?(msg) {
                    finish(rec, .failure(VigilError(code: err.code, message: err.message, op: rec.op, reply: msg)))
                } else {
                    finish(rec, .success(msg))
                }
            } else {
                finish(rec, .failure(VigilError(reply: msg, op: rec.op)))
            }
            return
        }
        if type == "error" {
            emit(.error(VigilError(reply: msg, op: nil)))
            return
        }
        guard let type else {
            emit(.error(VigilError(code: VigilError.Code.badMessage, message: "a message without a type", reply: msg)))
            return
        }
        if type.hasPrefix("pin.") || type == "clusters.changed" {
            map?.event(type, msg)
        } else if type.hasPrefix("checkin."), let circle = msg["circle"]?.stringValue {
            circles[circle]?.event(type, msg, client: self)
        } else if type.hasPrefix("panic."), let stream = msg["stream"]?.stringValue {
            if type == "panic.watchers" {
                owners[stream]?.event(msg)
            } else {
                if msg["reason"]?.stringValue == "missed_check_in" { owners[stream]?.event(msg) }
                watches[stream]?.event(type, msg, client: self)
            }
        }
        emit(.event(type: type, message: msg))
    }

    /// After a reconnect (and the outbox): circles are opened or joined again, owners resume, the
    /// subscription is sent again, each watch re-watches from its last seq.
    func restore() {
        // Each first attempt is sent in this turn, in this order, after the outbox. A record
        // whose own request was made while offline (and waits to go out next) needs no other.
        for circle in circles.values.sorted(by: { $0.order < $1.order }) where !waitsToBeSent(circle.lastRequest) { relisten(circle) }
        for owner in owners.values.sorted(by: { $0.order < $1.order }) where !waitsToBeSent(owner.lastRequest) { resumeInBackground(owner) }
        if let map, !waitsToBeSent(map.lastRequest) { resubscribe(map) }
        for w in watches.values.sorted(by: { $0.order < $1.order }) where !waitsToBeSent(w.lastRequest) { syncInBackground(w) }
    }

    func waitsToBeSent(_ r: RequestRecord?) -> Bool {
        guard let r else { return false }
        return queued.contains { $0 === r }
    }

    /// Starts `body`'s request now and hands its outcome to `done` when it comes.
    func background(_ body: () throws(VigilError) -> RequestRecord, _ done: @escaping (VigilError?) -> Void) {
        let rec: RequestRecord
        do {
            rec = try body()
        } catch {
            done(error)
            return
        }
        Task {
            do throws(VigilError) {
                _ = try await self.result(of: rec)
                done(nil)
            } catch {
                done(error)
            }
        }
    }

    /// A failure of background work: anything but a lost or closed connection is reported.
    static func reportable(_ e: VigilError) -> Bool {
        e.code != VigilError.Code.disconnected && e.code != VigilError.Code.closed
    }
}

/// One request, from its call to its answer (or failure), across connections for a write.
final class RequestRecord {
    let id: Int
    let op: String
    let fields: JSONObject
    let isWrite: Bool
    let idem: String?
    let onReply: ((JSONObject) -> VigilError?)?
    var ref: Int?
    var continuation: CheckedContinuation<Result<JSONObject, VigilError>, Never>?
    var result: Result<JSONObject, VigilError>?
    var timeoutTask: Task<Void, Never>?

    init(id: Int, op: String, fields: JSONObject, isWrite: Bool, idem: String?, onReply: ((JSONObject) -> VigilError?)?) {
        self.id = id
        self.op = op
        self.fields = fields
        self.isWrite = isWrite
        self.idem = idem
        self.onReply = onReply
    }

    /// A write with a key is sent again after a lost connection: the server answers a repeat
    /// with the first answer and changes nothing.
    var keptOnLoss: Bool { isWrite && idem != nil }
}

extension VigilClient {
    /// How many requests wait for a connection (the outbox's unsent writes among them).
    var queuedCount: Int { queued.count }
}

import VigilLoop
import VigilNATS

/// A NATS client on vigild's own loop: one connection at a time to one server of a list,
/// non-blocking from the TCP connect to the last byte, so a NATS outage never stalls the loop.
///
/// - Connects to the first server of the list that answers; when a connection breaks (or never
///   comes up), tries the next one at once, and after a whole pass over the list failed waits a
///   backoff with jitter (`NATSReconnectBackoff`) before the next pass.
/// - A connection counts as up once the server answered the PING sent after CONNECT and every
///   subscription: authentication passed and the subscriptions are in place. Subscriptions are
///   the client's, not the connection's: they are sent again on every new connection.
/// - Liveness: a PING every `pingIntervalMs`; `maxPingsOutstanding` unanswered ones drop the
///   connection. The server's PINGs are answered.
/// - Request/reply: one subscription `_INBOX.<random>.*` per client; each request gets the next
///   token, a slot in a `TimerWheel` for its timeout, and exactly one completion: the reply, a
///   503 status (no responders), the timeout, or the connection's loss.
/// - Output is bounded: a publish that would leave more than `maxPendingBytes` unsent is refused
///   (`outboundFull`), and nothing is queued while disconnected (`notConnected`): the caller
///   decides, the client never buffers without bound.
///
/// Everything runs on the loop thread: the client's clock is its own `PeriodicTimer`, its
/// callbacks (state observers, subscription handlers, request completions) run from its events.
/// A callback may publish, request, subscribe or close the client.
public final class NATSClient {
    public private(set) var state: NATSClientState = .disconnected
    /// The server's INFO on the current connection.
    public internal(set) var serverInfo: NATSServerInfo?
    /// Called on every change of `state`, in the order they were added, with the reason (a
    /// connection's loss names its cause; never an address or a credential).
    private var stateObservers: [(token: HandlerToken, observer: (NATSClientState, String) -> Void)] = []
    /// Connections made so far (the first one included).
    public internal(set) var connectionCount = 0

    let loop: EventLoop
    let urls: [NATSServerURL]
    let options: NATSConnectOptions
    let settings: NATSClientSettings
    /// TLS for the servers that need it (`tls://` URLs, or all with a `cluster.tls` section).
    let tls: NATSTLS?
    var stream: NATSStream?
    /// Host names are resolved off the loop (created at the first name).
    var resolver: NameResolver?
    /// The lookup the current attempt waits for (0: none).
    var resolvingID: UInt64 = 0
    var nextResolveID: UInt64 = 1
    /// The connection's phase, which server and address come next, PINGs and reconnect backoff:
    /// every event of the connection goes through it, and the client carries out its actions.
    var lifecycle: NATSConnectionPhase
    var random = SystemRandomNumberGenerator()
    var scratch: [UInt8] = []
    private var timer: PeriodicTimer?
    private var tickHandlers: [(token: HandlerToken, handler: (Int64) -> Void)] = []
    private var nextHandlerToken: UInt64 = 1

    var subscriptions: [UInt64: Subscription] = [:]
    var nextSID: UInt64 = 1
    let inboxPrefix: String
    let inboxSID: UInt64 = 0
    var requests: [UInt64: PendingRequest] = [:]
    var requestTimers: TimerWheel
    var requestOfSlot: [UInt64] = []
    var freeSlots: [Int32] = []
    var nextRequest: UInt64 = 1

    struct Subscription {
        var subject: String
        var queue: String?
        var handler: (NATSMessage) -> Void
    }

    struct PendingRequest {
        var slot: Int32
        var completion: (Result<NATSMessage, NATSClientError>) -> Void
    }

    /// `tls` is needed when a URL is `tls://` or `options.tlsRequired` is set (the connection fails
    /// otherwise, with the reason, never falls back to plaintext); `ReplicationSettings.makeClient`
    /// builds it from the config.
    public init(urls: [NATSServerURL], options: NATSConnectOptions, settings: NATSClientSettings = NATSClientSettings(),
                tls: NATSTLS? = nil, loop: EventLoop) {
        precondition(!urls.isEmpty, "a NATS client needs at least one server")
        self.urls = urls
        self.options = options
        self.settings = settings
        self.tls = tls
        self.loop = loop
        lifecycle = NATSConnectionPhase(serverCount: urls.count, settings: settings)
        inboxPrefix = NATSInbox.makePrefix(using: &random)
        requestTimers = TimerWheel(tickMs: settings.tickMs, slots: 256, nowMs: monotonicMilliseconds())
    }

    /// A client let go without `close()` still releases its socket and its clock (the stream's
    /// `unowned` reference to the client must never outlive it).
    deinit {
        resolver?.stop()
        stream?.close()
        if let timer { loop.closeAfterTurn(timer.fd) }
    }

    /// Starts the clock and the first connection attempt (nothing once closed).
    public func start() throws(SystemError) {
        guard timer == nil, !lifecycle.isClosed else { return }
        do {
            timer = try PeriodicTimer(intervalMs: Int(settings.tickMs), loop: loop) { [weak self] in
                self?.tick(nowMs: monotonicMilliseconds())
            }
        } catch let error as SystemError {
            throw error
        } catch {
            throw SystemError("timerfd_create", errno: 0)
        }
        perform(lifecycle.start(nowMs: monotonicMilliseconds()))
    }

    /// Names a state observer or tick handler, to remove it (`removeHandler`).
    public struct HandlerToken: Hashable, Sendable {
        let value: UInt64
    }

    /// Adds an observer of `state` (see `stateObservers`).
    @discardableResult
    public func addStateObserver(_ observer: @escaping (NATSClientState, String) -> Void) -> HandlerToken {
        let token = newHandlerToken()
        stateObservers.append((token, observer))
        return token
    }

    /// Runs `handler` on every tick of the client's clock (the JetStream layer's heartbeat checks).
    @discardableResult
    public func addTickHandler(_ handler: @escaping (Int64) -> Void) -> HandlerToken {
        let token = newHandlerToken()
        tickHandlers.append((token, handler))
        return token
    }

    /// Removes a state observer or tick handler (one removed while the client is calling them
    /// may still get that one call).
    public func removeHandler(_ token: HandlerToken) {
        stateObservers.removeAll { $0.token == token }
        tickHandlers.removeAll { $0.token == token }
    }

    /// How many state observers and tick handlers are added (for tests of their owners).
    public var handlerCount: Int { stateObservers.count + tickHandlers.count }

    private func newHandlerToken() -> HandlerToken {
        defer { nextHandlerToken += 1 }
        return HandlerToken(value: nextHandlerToken)
    }

    /// The server's `max_payload` on this connection (1 MiB before the first INFO).
    public var maxPayload: Int { serverInfo?.maxPayload ?? 1_048_576 }

    /// Whether the current connection is TLS (false while disconnected).
    public var usesTLS: Bool { stream?.usesTLS ?? false }

    /// Bytes waiting to be written to the server.
    public var pendingBytes: Int { stream?.queuedBytes ?? 0 }

    /// A random token, for ids that must not repeat across nodes and restarts.
    public func randomToken(length: Int) -> String { NATSInbox.token(length: length, using: &random) }

    // MARK: publish, subscribe

    /// Queues a message for the server (sent at the end of this loop turn).
    public func publish(subject: String, replyTo: String? = nil, headers: NATSHeaders? = nil,
                        payload: some Collection<UInt8>) throws(NATSClientError) {
        guard lifecycle.isUp, let stream else { throw .notConnected }
        scratch.removeAll(keepingCapacity: true)
        do {
            try NATSEncoder.publish(subject: subject, replyTo: replyTo, headers: headers, payload: payload,
                                    maxPayload: maxPayload, into: &scratch)
        } catch {
            throw .invalid(error)
        }
        guard stream.queuedBytes + scratch.count <= settings.maxPendingBytes else {
            throw .outboundFull(limit: settings.maxPendingBytes)
        }
        scratch.withUnsafeBytes { stream.append($0) }
    }

    /// Subscribes `handler` to `subject` (wildcards allowed), now if connected and again on every
    /// reconnection; returns the subscription's id for `unsubscribe`.
    @discardableResult
    public func subscribe(subject: String, queue: String? = nil,
                          handler: @escaping (NATSMessage) -> Void) throws(NATSClientError) -> UInt64 {
        var probe: [UInt8] = []
        do {
            try NATSEncoder.subscribe(subject: subject, queue: queue, sid: 1, into: &probe)
        } catch {
            throw .invalid(error)
        }
        let sid = nextSID
        nextSID += 1
        subscriptions[sid] = Subscription(subject: subject, queue: queue, handler: handler)
        if lifecycle.isUp { sendSubscription(sid) }
        return sid
    }

    /// Stops a subscription: nothing more reaches its handler, even what is already in flight.
    public func unsubscribe(_ sid: UInt64) {
        guard subscriptions.removeValue(forKey: sid) != nil else { return }
        guard lifecycle.isUp, let stream else { return }
        scratch.removeAll(keepingCapacity: true)
        NATSEncoder.unsubscribe(sid: sid, into: &scratch)
        scratch.withUnsafeBytes { stream.append($0) }
    }

    // MARK: request / reply

    /// Publishes a request whose reply comes to this client's inbox; `completion` runs exactly
    /// once, later (never from inside this call): the reply, `.noResponders`, `.timedOut` or
    /// `.connectionLost`. An error thrown here means nothing was sent and `completion` never runs.
    public func request(subject: String, headers: NATSHeaders? = nil, payload: some Collection<UInt8>, timeoutMs: Int64,
                        completion: @escaping (Result<NATSMessage, NATSClientError>) -> Void) throws(NATSClientError) {
        let number = nextRequest
        try publish(subject: subject, replyTo: "\(inboxPrefix).\(number)", headers: headers, payload: payload)
        nextRequest += 1
        let slot = freeSlots.popLast() ?? Int32(requestOfSlot.count)
        if Int(slot) == requestOfSlot.count { requestOfSlot.append(0) }
        requestOfSlot[Int(slot)] = number
        requestTimers.schedule(slot, atMs: monotonicMilliseconds() + timeoutMs)
        requests[number] = PendingRequest(slot: slot, completion: completion)
    }

    /// Requests waiting for their reply.
    public var pendingRequests: Int { requests.count }

    /// Ends the request `number` with `result` (the reply, or why there is none).
    func finishRequest(_ number: UInt64, _ result: Result<NATSMessage, NATSClientError>) {
        guard let pending = requests.removeValue(forKey: number) else { return }
        requestTimers.cancel(pending.slot)
        freeSlots.append(pending.slot)
        pending.completion(result)
    }

    func failAllRequests(_ error: NATSClientError) {
        for number in requests.keys.sorted() { finishRequest(number, .failure(error)) }
    }

    // MARK: the clock

    private var dueSlots: [Int32] = []

    func tick(nowMs: Int64) {
        perform(lifecycle.tick(nowMs: nowMs))
        dueSlots.removeAll(keepingCapacity: true)
        requestTimers.collectDue(atMs: nowMs, into: &dueSlots)
        for slot in dueSlots {
            let number = requestOfSlot[Int(slot)]
            if let pending = requests.removeValue(forKey: number) {
                freeSlots.append(slot)
                pending.completion(.failure(.timedOut))
            }
        }
        for entry in tickHandlers { entry.handler(nowMs) }
    }

    /// Closes the connection for good: pending requests fail with `.closed`, no reconnection.
    public func close() {
        guard state != .closed else { return }
        lifecycle.close()
        stream?.close()
        stream = nil
        resolver?.stop()
        resolver = nil
        if let timer { loop.closeAfterTurn(timer.fd) }
        timer = nil
        failAllRequests(.closed)
        setState(.closed, reason: "closed")
    }

    func setState(_ new: NATSClientState, reason: String) {
        guard new != state else { return }
        state = new
        for entry in stateObservers { entry.observer(new, reason) }
    }
}

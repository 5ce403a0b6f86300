import Glibc
import Logging
import VigilLoop
import VigilWire

/// An HTTP/1.1 client on vigild's own loop, for Web Push (RFC 8030) and webhooks: keep-alive
/// connections per origin, bounded queues, a deadline on every request, TLS verified against the
/// system's CAs (or a configured file) and the origin's host name, host names resolved off the
/// loop. Nothing it does blocks a turn: a slow or dead service costs its sockets and its queue,
/// never a reply or a fan-out's time.
///
/// `send` hands a request in; its `completion` runs exactly once, with the response (any
/// status) or a typed failure, always from the client's end-of-turn step (EventLoop step 3),
/// never inside a call into the client: a completion may send again. The shape of the work:
/// - `HTTPPool` (a value) decides queues, bounds and which connection takes which request;
/// - `HTTPConnectionLifecycle` (a value per connection) decides each connection's steps;
/// - this class carries out their actions (`HTTPClient+Connections`): sockets through
///   `HTTPConnection` streams, lookups through a `NameResolver`, deadlines on two `TimerWheel`s
///   (requests by their slot, connections by theirs) driven by a `PeriodicTimer` that runs only
///   while there is a request or a connection.
///
/// Logging: debug lines only, naming the origin (scheme, host, port), never a path, a query or a
/// field; failures are the caller's to report.
public final class HTTPClient {
    let loop: EventLoop
    let settings: HTTPClientSettings
    let timeouts: HTTPConnectionLifecycle.Timeouts
    let tls: TLSContext
    let logger: Logger?
    var pool: HTTPPool
    /// Requests by slot (the pool's request ids), nil when free.
    var requests: [PendingRequest?] = []
    private var freeRequestSlots: [Int32] = []
    /// Connections by the pool's id, nil when free.
    var slots: [ConnectionSlot?] = []
    var requestTimers: TimerWheel
    var connectionTimers: TimerWheel
    private var clock: PeriodicTimer?
    var resolver: NameResolver?
    var nextResolveID: UInt64 = 1
    private let completions = CompletionQueue()
    var counters = HTTPClientCounters()
    /// Requests sent and not yet finished (a gauge of the counters).
    var inFlight = 0
    /// After `close()`: nothing is opened or sent any more.
    var isClosed = false

    /// A request from `send` to its outcome.
    struct PendingRequest {
        var origin: HTTPOrigin
        var bytes: [UInt8]
        var isHead: Bool
        var startedMs: Int64
        /// The connection it was sent on; nil while queued.
        var connection: Int32?
        var completion: (HTTPOutcome) -> Void
    }

    /// A connection of the pool: its origin, its lifecycle and its current socket.
    struct ConnectionSlot {
        var origin: HTTPOrigin
        var lifecycle: HTTPConnectionLifecycle
        var stream: HTTPConnection?
        /// The lookup it waits for (0: none).
        var resolveID: UInt64 = 0
    }

    /// Makes the client (no socket, thread or timer until the first request). Throws when the
    /// CA file (or the system's store) cannot be loaded.
    public init(settings: HTTPClientSettings = HTTPClientSettings(), loop: EventLoop, logger: Logger? = nil) throws(TLSError) {
        self.loop = loop
        self.settings = settings
        self.logger = logger
        timeouts = HTTPConnectionLifecycle.Timeouts(connectMs: settings.connectTimeoutMs, keepAliveIdleMs: settings.keepAliveIdleMs)
        tls = try TLSContext.verifyingClient(caFile: settings.caFile)
        pool = HTTPPool(HTTPPool.Limits(
            perOriginConnections: settings.maxConnectionsPerOrigin, perOriginQueued: settings.maxQueuedPerOrigin,
            totalConnections: settings.maxConnections, totalQueued: settings.maxQueued, totalQueuedBytes: settings.maxQueuedBytes))
        let now = monotonicMilliseconds()
        requestTimers = TimerWheel(tickMs: settings.tickMs, slots: 512, nowMs: now)
        connectionTimers = TimerWheel(tickMs: settings.tickMs, slots: 512, nowMs: now)
        let completions = self.completions
        loop.addEndOfTurnStep { completions.run() }
    }

    /// A client let go without `close()` still releases its sockets, thread and clock (the
    /// streams' `unowned` reference to the client must never outlive it).
    deinit {
        for slot in slots { slot?.stream?.close() }
        resolver?.stop()
        if let clock { loop.closeAfterTurn(clock.fd) }
    }

    // MARK: the API

    /// Sends `request` to `origin` (path and fields in the request, framing added here) and
    /// calls `completion` once with the outcome, by `deadline` (monotonic milliseconds,
    /// `monotonicMilliseconds()` plus the time allowed) at the latest, within one tick.
    public func send(_ request: OutgoingRequest, to origin: HTTPOrigin, deadline: Int64,
                     completion: @escaping (HTTPOutcome) -> Void) {
        counters.requests += 1
        let now = monotonicMilliseconds()
        guard !isClosed else { return refuse(.shutDown, completion) }
        var bytes: [UInt8] = []
        do {
            try HTTPRequestEncoder.encode(request, authority: origin.authority, into: &bytes)
        } catch {
            return refuse(.invalidRequest(error.description), completion)
        }
        do {
            try startClock()
        } catch {
            return refuse(.connect("\(error.call): \(String(cString: strerror(error.errno)))"), completion)
        }
        let slot = freeRequestSlots.popLast() ?? Int32(requests.count)
        if Int(slot) == requests.count { requests.append(nil) }
        requests[Int(slot)] = PendingRequest(origin: origin, bytes: bytes, isHead: request.isHead, startedMs: now,
                                             connection: nil, completion: completion)
        requestTimers.schedule(slot, atMs: deadline)
        perform(pool.enqueue(slot, to: origin, bytes: bytes.count))
    }

    /// The counters now (gauges included), for /metrics.
    public var snapshot: HTTPClientCounters {
        var c = counters
        c.queued = pool.queuedCount
        c.inFlight = inFlight
        c.connections = pool.connectionCount
        return c
    }

    /// Closes every connection and fails every pending request with `.shutDown` (their
    /// completions run at the end of the turn); later sends fail the same way.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        for index in slots.indices {
            guard var slot = slots[index] else { continue }
            let actions = slot.lifecycle.close()
            slots[index] = slot
            perform(actions, on: Int32(index))
        }
        for index in requests.indices where requests[index] != nil { finish(Int32(index), .failure(.shutDown)) }
        // What the pool meant to open while connections closed was skipped: it starts over empty.
        pool = HTTPPool(pool.limits)
        resolver?.stop()
        resolver = nil
        stopClock()
    }

    // MARK: outcomes

    /// Ends request `slot` with `outcome`: its deadline cancelled, its slot freed, its
    /// completion queued for the end of the turn.
    func finish(_ slot: Int32, _ outcome: HTTPOutcome) {
        guard Int(slot) < requests.count, let request = requests[Int(slot)] else { return }
        requests[Int(slot)] = nil
        if request.connection != nil { inFlight -= 1 }
        freeRequestSlots.append(slot)
        requestTimers.cancel(slot)
        counters.count(outcome, latencyMs: monotonicMilliseconds() - request.startedMs)
        completions.add(request.completion, outcome)
        loop.requestTurn()
    }

    /// A request that never got a slot.
    private func refuse(_ failure: HTTPClientFailure, _ completion: @escaping (HTTPOutcome) -> Void) {
        counters.count(.failure(failure), latencyMs: 0)
        completions.add(completion, .failure(failure))
        loop.requestTurn()
    }

    // MARK: the clock

    /// Starts the tick if it is not running (it stops once nothing is pending).
    func startClock() throws(SystemError) {
        guard clock == nil else { return }
        do {
            clock = try PeriodicTimer(intervalMs: Int(settings.tickMs), loop: loop) { [weak self] in self?.tick() }
        } catch let error as SystemError {
            throw error
        } catch {
            throw SystemError("timerfd_create", errno: 0)
        }
    }

    private func stopClock() {
        guard let clock else { return }
        loop.closeAfterTurn(clock.fd)
        self.clock = nil
    }

    private var due: [Int32] = []

    /// Deadlines that passed: requests' first (a request whose connection also timed out is
    /// reported as its own timeout), then connections'.
    func tick() {
        let now = monotonicMilliseconds()
        due.removeAll(keepingCapacity: true)
        requestTimers.collectDue(atMs: now, into: &due)
        for slot in due { requestDeadlinePassed(slot) }
        due.removeAll(keepingCapacity: true)
        connectionTimers.collectDue(atMs: now, into: &due)
        for id in due {
            guard var slot = slots[Int(id)] else { continue }
            let actions = slot.lifecycle.timerFired()
            slots[Int(id)] = slot
            perform(actions, on: id)
        }
        if requestTimers.count == 0 && connectionTimers.count == 0 { stopClock() }
    }

    private func requestDeadlinePassed(_ slot: Int32) {
        guard let request = requests[Int(slot)] else { return }
        if let connection = request.connection, var c = slots[Int(connection)] {
            let actions = c.lifecycle.deadlinePassed()
            slots[Int(connection)] = c
            perform(actions, on: connection)
        } else if pool.withdraw(slot, from: request.origin) {
            finish(slot, .failure(.timeout(.waitingForConnection)))
        }
    }
}

/// Completions decided during a turn, run by the client's end-of-turn step. Its own object, held
/// by the step, so that the completions of a client closed and let go in this turn still run.
final class CompletionQueue {
    private var waiting: [((HTTPOutcome) -> Void, HTTPOutcome)] = []

    func add(_ completion: @escaping (HTTPOutcome) -> Void, _ outcome: HTTPOutcome) {
        waiting.append((completion, outcome))
    }

    /// Runs what waits, including what those completions add (a completion that sends a request
    /// refused at once hears of it in the same step).
    func run() {
        while !waiting.isEmpty {
            let batch = waiting
            waiting = []
            for (completion, outcome) in batch { completion(outcome) }
        }
    }
}

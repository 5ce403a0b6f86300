import DequeModule
import VigilWire

/// The client's bookkeeping of origins, queues and connections as a value: what each request and
/// connection event means for the queues and the bounds, returned as actions for `HTTPClient`
/// to carry out (open a connection, send a request on one, close an idle one, fail a request).
/// No sockets, no clock: the tests drive it with arrays.
///
/// The rules:
/// - A request joins its origin's queue (FIFO) unless a bound is reached: the origin's queue
///   length, or the total queue's length or bytes. Refused, it fails with `queueFull` at once.
/// - An idle connection of the origin takes the queue's head; the most recently used goes first,
///   so that under light load the others idle out instead of all staying warm.
/// - Requests no connection can take yet open new connections, one per waiting request beyond
///   those already opening, up to the origin's bound. At the total bound, the idle connection
///   unused for longest (of another origin: this one has none idle while it has a queue) is
///   closed to make room; with none idle, the origin waits for the next connection to end.
/// - A connection attempt that fails (DNS, connect, TLS, the connect timeout) when its origin
///   has no other connection fails the whole queue with that reason: nothing else would serve
///   it, and a dead service costs each caller one attempt, not a wait until its deadline. With
///   other connections left, the queue waits for them and no new attempt is made until the next
///   request arrives, so a service that refuses connections cannot make the client spin.
struct HTTPPool {
    struct Limits: Equatable {
        var perOriginConnections: Int
        var perOriginQueued: Int
        var totalConnections: Int
        var totalQueued: Int
        var totalQueuedBytes: Int
    }

    enum Action: Equatable {
        /// Open a connection to the origin; the pool names it `id` from now on.
        case open(Int32, HTTPOrigin)
        /// Send the request on the idle connection, which is busy from now on.
        case assign(request: Int32, connection: Int32)
        /// Close an idle connection; the pool has already forgotten it.
        case closeIdle(Int32)
        case fail(Int32, HTTPClientFailure)
    }

    private enum ConnectionState {
        case opening, idle, busy
    }

    private struct Queued {
        var request: Int32
        var bytes: Int
    }

    private struct Origin {
        var queue = Deque<Queued>()
        var opening = 0
        /// Idle connections, the most recently used last.
        var idle: [Int32] = []
        var busy = 0

        var connectionCount: Int { opening + idle.count + busy }
        var isEmpty: Bool { queue.isEmpty && connectionCount == 0 }
    }

    let limits: Limits
    private var origins: [HTTPOrigin: Origin] = [:]
    private var connections: [Int32: (origin: HTTPOrigin, state: ConnectionState)] = [:]
    /// Every idle connection, the longest idle first (the first to close for room).
    private var idleOrder: [Int32] = []
    /// Origins with requests that the total connection bound keeps waiting, in arrival order.
    private var starved: [HTTPOrigin] = []
    private var freeIDs: [Int32] = []
    private var nextID: Int32 = 0
    private(set) var queuedCount = 0
    private(set) var queuedBytes = 0

    init(_ limits: Limits) {
        self.limits = limits
    }

    /// Connections open or opening.
    var connectionCount: Int { connections.count }

    /// Requests waiting in `origin`'s queue.
    func queued(at origin: HTTPOrigin) -> Int { origins[origin]?.queue.count ?? 0 }

    /// Connections of `origin`, open or opening.
    func connections(of origin: HTTPOrigin) -> Int { origins[origin]?.connectionCount ?? 0 }

    // MARK: events

    /// A request of `bytes` encoded bytes for `origin`.
    mutating func enqueue(_ request: Int32, to origin: HTTPOrigin, bytes: Int) -> [Action] {
        if queued(at: origin) >= limits.perOriginQueued { return [.fail(request, .queueFull(.origin))] }
        if queuedCount >= limits.totalQueued || queuedBytes + bytes > limits.totalQueuedBytes {
            return [.fail(request, .queueFull(.total))]
        }
        origins[origin, default: Origin()].queue.append(Queued(request: request, bytes: bytes))
        queuedCount += 1
        queuedBytes += bytes
        return dispatch(origin, mayOpen: true)
    }

    /// A queued request leaves the queue unsent (its deadline passed); false when it was not queued.
    mutating func withdraw(_ request: Int32, from origin: HTTPOrigin) -> Bool {
        guard var o = origins[origin], let at = o.queue.firstIndex(where: { $0.request == request }) else { return false }
        let entry = o.queue.remove(at: at)
        queuedCount -= 1
        queuedBytes -= entry.bytes
        store(o, at: origin)
        return true
    }

    /// The connection is up, or done with its response and kept alive: it may take a request.
    mutating func connectionReady(_ id: Int32) -> [Action] {
        guard let c = connections[id], var o = origins[c.origin] else { return [] }
        switch c.state {
        case .opening: o.opening -= 1
        case .busy: o.busy -= 1
        case .idle: return []
        }
        o.idle.append(id)
        idleOrder.append(id)
        connections[id] = (c.origin, .idle)
        origins[c.origin] = o
        // Its own queue first; then an origin kept waiting by the total bound may take its room.
        return dispatch(c.origin, mayOpen: false) + dispatchStarved()
    }

    /// The connection is gone (closed by either side, failed, timed out). `attemptFailure`: it
    /// never came up, and this is why.
    mutating func connectionClosed(_ id: Int32, attemptFailure: HTTPClientFailure?) -> [Action] {
        guard let c = connections.removeValue(forKey: id), var o = origins[c.origin] else { return [] }
        freeIDs.append(id)
        switch c.state {
        case .opening: o.opening -= 1
        case .busy: o.busy -= 1
        case .idle:
            o.idle.removeAll { $0 == id }
            idleOrder.removeAll { $0 == id }
        }
        var actions: [Action] = []
        if let attemptFailure, o.connectionCount == 0 {
            for entry in o.queue { actions.append(.fail(entry.request, attemptFailure)) }
            queuedCount -= o.queue.count
            queuedBytes -= o.queue.reduce(0) { $0 + $1.bytes }
            o.queue.removeAll()
        }
        origins[c.origin] = o
        // A kept-alive connection the server closed is replaced when requests wait for it; a
        // failed attempt is not retried until the next request (see the type's notes).
        actions += dispatch(c.origin, mayOpen: attemptFailure == nil)
        actions += dispatchStarved()
        if let o = origins[c.origin] { store(o, at: c.origin) }
        return actions
    }

    // MARK: decisions

    /// Hands `origin`'s queue to its idle connections, then opens what is still needed.
    private mutating func dispatch(_ origin: HTTPOrigin, mayOpen: Bool) -> [Action] {
        guard var o = origins[origin] else { return [] }
        var actions: [Action] = []
        while !o.queue.isEmpty, let id = o.idle.popLast() {
            let entry = o.queue.removeFirst()
            queuedCount -= 1
            queuedBytes -= entry.bytes
            idleOrder.removeAll { $0 == id }
            connections[id] = (origin, .busy)
            o.busy += 1
            actions.append(.assign(request: entry.request, connection: id))
        }
        var wanted = o.queue.count - o.opening
        while mayOpen && wanted > 0 && o.connectionCount < limits.perOriginConnections {
            if connections.count >= limits.totalConnections {
                guard let victim = idleOrder.first else {
                    if !starved.contains(origin) { starved.append(origin) }
                    break
                }
                actions.append(.closeIdle(victim))
                forgetIdle(victim)
            }
            let id = freeIDs.popLast() ?? { defer { nextID += 1 }; return nextID }()
            connections[id] = (origin, .opening)
            o.opening += 1
            wanted -= 1
            actions.append(.open(id, origin))
        }
        store(o, at: origin)
        return actions
    }

    /// Origins the total bound kept waiting, in order, now that a connection ended or idles.
    private mutating func dispatchStarved() -> [Action] {
        guard !starved.isEmpty else { return [] }
        let waiting = starved
        starved = []
        var actions: [Action] = []
        for origin in waiting { actions += dispatch(origin, mayOpen: true) }
        return actions
    }

    /// Drops an idle connection (of another origin) closed to make room.
    private mutating func forgetIdle(_ id: Int32) {
        guard let c = connections.removeValue(forKey: id) else { return }
        freeIDs.append(id)
        idleOrder.removeAll { $0 == id }
        if var other = origins[c.origin] {
            other.idle.removeAll { $0 == id }
            store(other, at: c.origin)
        }
    }

    /// Keeps an origin's state, or forgets the origin once it has neither queue nor connections.
    private mutating func store(_ o: Origin, at origin: HTTPOrigin) {
        if o.isEmpty {
            origins[origin] = nil
            starved.removeAll { $0 == origin }
        } else {
            origins[origin] = o
        }
    }
}

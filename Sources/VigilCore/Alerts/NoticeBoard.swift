import HeapModule

/// The notices waiting to reach subscriptions, as pure state transitions: no sockets, no HTTP,
/// the clock only through the `now` each call is given and jitter through the `random` word.
/// The server drives it (`takeDue`, then `finished` with what the service answered) and journals
/// every settlement it returns; a restart rebuilds the notices from the restored state and
/// `settle`s what the journal says was done, so each delivery is attempted until it settles, at
/// least once, and after a settlement never again.
///
/// `Target` is what a notice is delivered to (the server's subscription id); the board never
/// looks inside it.
///
/// Bounds: `settings.maxPending` deliveries waiting or in flight in all; notices and settled
/// deliveries are dropped `settings.ttlMs` after their cause (`prune`).
public struct NoticeBoard<Target: Hashable & Sendable>: Sendable {
    public typealias Key = DeliveryKey<Target>

    struct Pending: Sendable {
        /// Attempts made so far.
        var attempts: Int
        var dueAt: Int64
        var inFlight: Bool
        let role: CheckinRole
        /// Acknowledged while in flight: its answer settles it, and a failure is not retried.
        var acknowledged = false
    }

    /// A timer entry: stale once its delivery is in flight, settled, or due at another time.
    struct Due: Comparable, Sendable {
        let at: Int64
        let order: UInt64
        let key: Key
        static func < (a: Due, b: Due) -> Bool { (a.at, a.order) < (b.at, b.order) }
        static func == (a: Due, b: Due) -> Bool { a.at == b.at && a.order == b.order }
    }

    /// One delivery handed to the sender.
    public struct Attempt: Sendable {
        public let key: Key
        public let notice: Notice
        /// 1 for the first attempt.
        public let number: Int
    }

    /// What `post` did with a notice.
    public struct Posted: Equatable, Sendable {
        public var queued = 0
        /// Subscriptions left out because `maxPending` deliveries wait already.
        public var refused = 0
    }

    public let settings: NoticeSettings
    public private(set) var notices: [NoticeID: Notice] = [:]
    var pending: [Key: Pending] = [:]
    /// Settled deliveries of notices not yet pruned: a notice posted again (a restart) skips them.
    var settled: [NoticeID: [Target: DeliverySettlement]] = [:]
    var heap = Heap<Due>()
    var nextOrder: UInt64 = 0
    public private(set) var inFlightCount = 0

    public init(settings: NoticeSettings) {
        self.settings = settings
    }

    // MARK: reading

    /// Deliveries waiting or in flight.
    public var pendingCount: Int { pending.count }
    public func isPending(_ key: Key) -> Bool { pending[key] != nil }
    public func settlement(of key: Key) -> DeliverySettlement? { settled[key.notice]?[key.target] }
    /// The earliest time a waiting delivery is due (possibly of an entry that turns out stale).
    public var nextDue: Int64? { heap.min?.at }

    /// Every settled delivery still remembered, oldest notice first (for snapshots).
    public func exportSettled() -> [(key: Key, settlement: DeliverySettlement)] {
        var out: [(key: Key, settlement: DeliverySettlement)] = []
        for id in settled.keys.sorted() {
            for (target, s) in settled[id]! { out.append((Key(notice: id, target: target), s)) }
        }
        return out
    }

    // MARK: transitions

    /// Queues `notice` for every target whose holder is in its audience and that has no delivery
    /// of it pending or settled already (so posting the same notice again, as a restart does,
    /// adds only what is missing). A notice past its time to live is not queued.
    @discardableResult
    public mutating func post(_ notice: Notice, to targets: [(target: Target, role: CheckinRole)], now: Int64) -> Posted {
        var posted = Posted()
        guard now < notice.expiresAt else { return posted }
        let done = settled[notice.id] ?? [:]
        for (target, role) in targets where notice.audience.includes(role) && done[target] == nil {
            let key = Key(notice: notice.id, target: target)
            guard pending[key] == nil else { continue }
            guard pending.count < settings.maxPending else {
                posted.refused += 1
                continue
            }
            pending[key] = Pending(attempts: 0, dueAt: now, inFlight: false, role: role)
            schedule(key, at: now)
            posted.queued += 1
        }
        if posted.queued > 0 || notices[notice.id] == nil { notices[notice.id] = notice }
        return posted
    }

    /// Up to `limit` deliveries due by `now`, marked in flight: each must come back through
    /// `finished` (or be cancelled meanwhile, and then `finished` ignores it).
    public mutating func takeDue(now: Int64, limit: Int) -> [Attempt] {
        var out: [Attempt] = []
        while out.count < limit, let top = heap.min, top.at <= now {
            heap.removeMin()
            guard var p = pending[top.key], !p.inFlight, p.dueAt == top.at, let notice = notices[top.key.notice] else { continue }
            p.inFlight = true
            p.attempts += 1
            pending[top.key] = p
            inFlightCount += 1
            out.append(Attempt(key: top.key, notice: notice, number: p.attempts))
        }
        return out
    }

    /// What an attempt came to. Nil when the delivery is no longer pending (cancelled by an ack
    /// or its subscription removed while it was in flight): nothing to do, nothing to journal.
    public mutating func finished(_ key: Key, _ result: DeliveryResult, now: Int64, random: UInt64) -> DeliveryStep? {
        guard var p = pending[key], p.inFlight else { return nil }
        if p.acknowledged {
            switch result {
            case .throttled, .failed: return settle(key, .cancelled)
            case .accepted, .gone, .refused: break
            }
        }
        let expiresAt = notices[key.notice]?.expiresAt ?? now
        let delay: Int64
        switch result {
        case .accepted: return settle(key, .delivered)      // `settle` takes it out of flight
        case .gone: return settle(key, .gone)
        case .refused: return settle(key, .refused)
        case .throttled(let after?): delay = min(max(after, 0), settings.maxRetryAfterMs)
        case .throttled(nil), .failed: delay = backoff(after: p.attempts, random: random)
        }
        let at = PanicHub.saturatingSum(now, delay)
        guard at < expiresAt else { return settle(key, .expired) }
        p.inFlight = false
        inFlightCount -= 1
        p.dueAt = at
        pending[key] = p
        schedule(key, at: at)
        return .retry(at: at)
    }

    /// The delay before attempt `attempts + 1`: doubling from `firstRetryMs`, capped at
    /// `maxRetryMs`, then half of it fixed and half drawn ("equal jitter"), so that many
    /// deliveries failed by one outage do not all come back in the same instant, and none
    /// comes back at once.
    public func backoff(after attempts: Int, random: UInt64) -> Int64 {
        let doublings = max(0, min(attempts - 1, 40))
        let (scaled, overflow) = settings.firstRetryMs.multipliedReportingOverflow(by: Int64(1) << doublings)
        let cap = max(1, overflow ? settings.maxRetryMs : min(scaled, settings.maxRetryMs))
        let half = cap / 2
        return half + Int64(random % UInt64(cap - half + 1))
    }

    /// An acknowledgement by `role`: that holder's waiting deliveries of the notice are cancelled
    /// (settled as `cancelled`; returned). One in flight cannot be called back: the push service
    /// may have it already, so its answer settles it as usual, except that a failure is settled
    /// as `cancelled` instead of being retried.
    public mutating func cancel(_ notice: NoticeID, for role: CheckinRole) -> [Key] {
        var keys: [Key] = []
        for (key, p) in pending where key.notice == notice && p.role == role {
            if p.inFlight { pending[key]!.acknowledged = true } else { keys.append(key) }
        }
        for key in keys { _ = settle(key, .cancelled) }
        return keys
    }

    /// The target is gone (unregistered, its member revoked, its circle closed, or the service
    /// said so): every delivery pending to it is dropped, settled as `cancelled`.
    @discardableResult
    public mutating func dropTarget(_ target: Target) -> Int {
        let keys = pending.keys.filter { $0.target == target }
        for key in keys { _ = settle(key, .cancelled) }
        return keys.count
    }

    /// A settlement read back from the journal or a snapshot, or replicated from another node:
    /// the delivery is not attempted (again).
    public mutating func settle(_ key: Key, as settlement: DeliverySettlement) {
        _ = settle(key, settlement)
    }

    /// Forgets notices whose time to live has passed, and the settlements of notices older than
    /// `ttlMs`; settles any of their deliveries still waiting as `expired` (returned with their
    /// notices, to journal).
    public mutating func prune(now: Int64) -> [(key: Key, notice: Notice)] {
        var expired: [(key: Key, notice: Notice)] = []
        for (key, p) in pending where !p.inFlight {
            if let notice = notices[key.notice], notice.expiresAt <= now { expired.append((key, notice)) }
        }
        for (key, _) in expired { _ = settle(key, .expired) }
        let pendingNotices = Set(pending.keys.map(\.notice))
        for (id, notice) in notices where notice.expiresAt <= now && !pendingNotices.contains(id) { notices[id] = nil }
        for id in settled.keys where PanicHub.saturatingSum(id.at, settings.ttlMs) <= now && notices[id] == nil { settled[id] = nil }
        return expired
    }

    // MARK: internals

    private mutating func settle(_ key: Key, _ settlement: DeliverySettlement) -> DeliveryStep {
        if let p = pending.removeValue(forKey: key), p.inFlight { inFlightCount -= 1 }
        settled[key.notice, default: [:]][key.target] = settlement
        compactIfStale()
        return .settled(settlement)
    }

    private mutating func schedule(_ key: Key, at: Int64) {
        heap.insert(Due(at: at, order: nextOrder, key: key))
        nextOrder &+= 1
        compactIfStale()
    }

    /// Rebuilds the heap from the waiting deliveries once stale entries outnumber them.
    private mutating func compactIfStale() {
        guard heap.count > 2 * pending.count + 64 else { return }
        var live: [Due] = []
        for d in heap.unordered where pending[d.key].map({ !$0.inFlight && $0.dueAt == d.at }) == true { live.append(d) }
        heap = Heap(live)
    }
}

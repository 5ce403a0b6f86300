import HeapModule

/// Check-in circles (SafeWay's "are you safe?"), as pure state transitions: no sockets, and the
/// clock only through the `now` (unix ms) each operation is given.
///
/// A circle is created by its owner, who gets the owner token, and shared as member tokens (one
/// per person, minted at creation or by `invite`, stored only as digests, revocable). A member
/// asks (`request`; a newer request replaces the member's older one); the owner answers "safe"
/// (`answer`, with an optional note), which answers every pending request; every connection
/// listening to the circle (the owner's, after `create` or `open`, and members', after `join`)
/// is told each of these as it happens, and whoever connects later reads the same in the state.
/// "Home safe" (`setHome`) holds until a time, then lapses (`tick`).
///
/// Who may do what: the owner's operations need the owner token, every time (there is no owning
/// connection); a member's need that member's live token. A wrong token and an unknown circle get
/// the same `.forbidden`, and the token is hashed before the circle is looked up.
///
/// What members see of each other: the number and label of whoever asked, never tokens; the
/// member list (all numbers and labels) is the owner's alone.
///
/// Bounds: `maxCircles` circles, `maxMembers` live members each, one pending request per member,
/// `maxSubscriptionsPerHolder` subscriptions for the owner and each member,
/// `requestsPerMinute` requests per member (a bucket per member, not durable: a restart refills
/// it), and a circle left idle for `idleLifetimeMs` is removed. Listening connections are bounded
/// by the server's connections.
public struct CheckinHub: Sendable {
    /// A timer entry, checked against the circle when it comes due (never removed early).
    struct Deadline: Comparable, Sendable {
        let at: Int64
        let order: UInt64
        let id: CircleID
        static func < (a: Deadline, b: Deadline) -> Bool { (a.at, a.order) < (b.at, b.order) }
    }

    struct MemberKey: Hashable, Sendable {
        let circle: CircleID
        let member: UInt32
    }

    public let settings: CheckinSettings
    var circles: [CircleID: CheckinCircle] = [:]
    /// The connections listening to each circle, and as whom.
    var listeners: [CircleID: [WatcherID: CheckinRole]] = [:]
    /// The circles each connection listens to: what `disconnected` must undo.
    var listening: [WatcherID: Set<CircleID>] = [:]
    /// Each member's request budget (only members who asked have one).
    var buckets: [MemberKey: TokenLevel] = [:]
    /// One live entry per circle, at its next timer (`CheckinCircle.nextDue`: home safe lapsing,
    /// or the circle idle too long), and entries made stale by a change that brought that time
    /// forward; `filed` holds each circle's live entry's time. Rebuilt when the stale entries
    /// outnumber the circles (`compactIfStale`), so the heap stays O(circles).
    var deadlines = Heap<Deadline>()
    var filed: [CircleID: Int64] = [:]
    /// The home safe each circle last had lapse here (at most one a circle, dropped with it): a
    /// replicated record from a node that had not lapsed it yet must not bring it back.
    var lapsedHomes: [CircleID: CheckinHome] = [:]
    var nextOrder: UInt64 = 0
    /// Notices' deliveries that are done, by circle (`NoticeSettlement`): durable, dropped with the circle.
    var settlements: [CircleID: [DeliveryKey<SubscriptionID>: NoticeSettlement]] = [:]

    public init(settings: CheckinSettings) {
        self.settings = settings
    }

    // MARK: reading

    public func circle(_ id: CircleID) -> CheckinCircle? { circles[id] }
    public var count: Int { circles.count }
    /// Connections listening to the circle (0 for an unknown one).
    public func listenerCount(_ id: CircleID) -> Int { listeners[id]?.count ?? 0 }
    /// Every circle, by id (for snapshots).
    public func exportCircles() -> [CheckinCircle] { circles.keys.sorted().compactMap { circles[$0] } }

    /// The earliest pending timer (possibly of an entry that turns out stale).
    public var nextDeadline: Int64? {
        deadlines.min?.at
    }

    // MARK: the owner's operations

    /// A new circle owned by whoever holds the returned owner token, with one member per label in
    /// `labels` (nil: a member without a label). Connection `owner` listens to it as its owner.
    public mutating func create(owner: WatcherID, labels: [String?], secrets: Secrets, now: Int64)
        -> Result<(circle: CheckinCircle, ownerToken: String, memberTokens: [String]), CheckinFailure> {
        guard labels.count <= settings.maxMembers else { return .failure(.tooManyMembers) }
        guard circles.count < settings.maxCircles else { return .failure(.capacityExceeded) }
        var id = CircleID(random: secrets.randomBytes(16))
        while circles[id] != nil { id = CircleID(random: secrets.randomBytes(16)) }
        let ownerToken = secrets.newToken()
        var tokens: [String] = []
        var members: [CheckinMember] = []
        for (i, label) in labels.enumerated() {
            let token = secrets.newToken()
            tokens.append(token)
            members.append(CheckinMember(id: UInt32(i + 1), label: label, addedAt: now, digest: secrets.digest(ofToken: token)))
        }
        let circle = CheckinCircle(id: id, createdAt: now, activeAt: now, ownerDigest: secrets.digest(ofToken: ownerToken),
                                   members: members, nextMember: UInt32(labels.count + 1), requests: [], answer: nil, home: nil)
        circles[id] = circle
        listen(id, owner, as: .owner)
        arm(circle)
        return .success((circle, ownerToken, tokens))
    }

    /// The owner's connection listens to the circle; the state says what it missed (pending
    /// requests, the last answer, home safe).
    public mutating func open(_ id: CircleID, by connection: WatcherID, ownerToken: String, secrets: Secrets) -> Result<CheckinCircle, CheckinFailure> {
        let digest = secrets.digest(ofToken: ownerToken)
        guard let circle = circles[id], circle.ownerDigest.matches(digest) else { return .failure(.forbidden) }
        listen(id, connection, as: .owner)
        return .success(circle)
    }

    /// A new member token, with an optional label the other members will see when this one asks.
    public mutating func invite(_ id: CircleID, ownerToken: String, label: String?, secrets: Secrets, now: Int64)
        -> Result<(member: CheckinMember, token: String, circle: CheckinCircle), CheckinFailure> {
        let maxMembers = settings.maxMembers
        return steer(id, ownerToken: ownerToken, secrets: secrets) { circle in
            // Numbers are never reused: a circle that has given out every number takes no more.
            guard circle.members.count < maxMembers, circle.nextMember < .max else { return .failure(.tooManyMembers) }
            let token = secrets.newToken()
            let member = CheckinMember(id: circle.nextMember, label: label, addedAt: now, digest: secrets.digest(ofToken: token))
            circle.members.append(member)
            circle.nextMember += 1
            circle.activeAt = max(circle.activeAt, now)
            return .success((member, token, circle))
        }
    }

    /// Kills member `member`'s token: its connections get `.revoked` and stop listening, and its
    /// pending request and its subscriptions go. A member not live (revoked already, never
    /// invited) is `.success(nil)`: nothing changed.
    public mutating func revoke(_ id: CircleID, ownerToken: String, member: UInt32, secrets: Secrets, now: Int64,
                                out: inout [CheckinDelivery]) -> Result<CheckinCircle?, CheckinFailure> {
        let result = steer(id, ownerToken: ownerToken, secrets: secrets) { circle -> Result<CheckinCircle?, CheckinFailure> in
            guard let index = circle.members.firstIndex(where: { $0.id == member }) else { return .success(nil) }
            circle.members.remove(at: index)
            circle.requests.removeAll { $0.member == member }
            circle.subscriptions.removeAll { $0.holder == .member(member) }
            circle.activeAt = max(circle.activeAt, now)
            return .success(circle)
        }
        guard case .success(let changed?) = result else { return result }
        buckets[MemberKey(circle: id, member: member)] = nil
        let cut = (listeners[id] ?? [:]).filter { $0.value == .member(member) }.keys.sorted()
        for connection in cut { unlisten(id, connection) }
        if !cut.isEmpty { out.append(CheckinDelivery(circle: id, kind: .revoked(member: member), recipients: cut)) }
        arm(changed)
        return result
    }

    /// "Safe": answers every pending request, to everyone listening. Works with no request
    /// pending too (a proactive "I'm safe").
    public mutating func answer(_ id: CircleID, ownerToken: String, note: String?, secrets: Secrets, now: Int64,
                                out: inout [CheckinDelivery]) -> Result<CheckinCircle, CheckinFailure> {
        let result = steer(id, ownerToken: ownerToken, secrets: secrets) { circle -> Result<CheckinCircle, CheckinFailure> in
            circle.answer = CheckinAnswer(at: now, note: note, answered: circle.requests)
            circle.requests = []
            circle.activeAt = max(circle.activeAt, now)
            return .success(circle)
        }
        if case .success(let circle) = result, let answer = circle.answer {
            deliver(.answered(answer), of: id, out: &out)
            arm(circle)
        }
        return result
    }

    /// Sets or clears "home safe". A new one must end in the future and at most `maxHomeMs` ahead.
    /// Clearing when none is set changes nothing (`.success(nil)`: nothing to journal).
    public mutating func setHome(_ id: CircleID, ownerToken: String, change: CheckinHomeChange, secrets: Secrets, now: Int64,
                                 out: inout [CheckinDelivery]) -> Result<CheckinCircle?, CheckinFailure> {
        var until: Int64?
        switch change {
        case .forSeconds(let s): until = PanicHub.saturatingSum(now, s.multipliedReportingOverflow(by: 1000).overflow ? .max : s * 1000)
        case .until(let t): until = t
        case .clear: until = nil
        }
        // Judged here, told only after the token is: a bad time tells a stranger nothing.
        let valid = until.map { $0 > now && $0 <= PanicHub.saturatingSum(now, settings.maxHomeMs) } ?? true
        let result = steer(id, ownerToken: ownerToken, secrets: secrets) { circle -> Result<CheckinCircle?, CheckinFailure> in
            guard valid else { return .failure(.invalidHome) }
            guard let until else {
                guard circle.home != nil else { return .success(nil) }
                circle.home = nil
                circle.activeAt = max(circle.activeAt, now)
                return .success(circle)
            }
            circle.home = CheckinHome(at: now, until: until)
            circle.activeAt = max(circle.activeAt, now)
            return .success(circle)
        }
        if case .success(let circle?) = result {
            deliver(.home(circle.home, lapsed: false), of: id, out: &out)
            arm(circle)
        }
        return result
    }

    /// Removes the circle with its tokens; everyone listening is told.
    public mutating func close(_ id: CircleID, ownerToken: String, secrets: Secrets, out: inout [CheckinDelivery]) -> Result<Void, CheckinFailure> {
        let digest = secrets.digest(ofToken: ownerToken)
        guard let circle = circles[id], circle.ownerDigest.matches(digest) else { return .failure(.forbidden) }
        remove(id, reason: .closed, out: &out)
        return .success(())
    }

    // MARK: members

    /// A member's connection listens to the circle, as that member.
    public mutating func join(_ id: CircleID, by connection: WatcherID, memberToken: String, secrets: Secrets)
        -> Result<(circle: CheckinCircle, member: CheckinMember), CheckinFailure> {
        let digest = secrets.digest(ofToken: memberToken)
        guard let circle = circles[id], let member = circle.member(matching: digest) else { return .failure(.forbidden) }
        listen(id, connection, as: .member(member.id))
        return .success((circle, member))
    }

    /// A member asks whether the owner is safe: replaces the member's pending request, and goes to
    /// the owner and every member listening. At most `requestsPerMinute` a member.
    public mutating func request(_ id: CircleID, memberToken: String, secrets: Secrets, now: Int64,
                                 out: inout [CheckinDelivery]) -> Result<(ask: CheckinAsk, circle: CheckinCircle), CheckinFailure> {
        let digest = secrets.digest(ofToken: memberToken)
        guard let member = circles[id]?.member(matching: digest) else { return .failure(.forbidden) }
        let rate = settings.requestRate
        let key = MemberKey(circle: id, member: member.id)
        var bucket = buckets[key] ?? TokenLevel(full: rate, nowMs: now)
        if let retry = bucket.take(rate, nowMs: now) {
            buckets[key] = bucket
            return .failure(.rateLimited(retryAfterMs: retry))
        }
        buckets[key] = bucket
        let ask = CheckinAsk(member: member.id, label: member.label, at: now)
        let circle = withCircle(id) { circle -> CheckinCircle in
            circle.requests.removeAll { $0.member == member.id }
            circle.requests.append(ask)
            circle.activeAt = max(circle.activeAt, now)
            return circle
        }!
        deliver(.requested(ask), of: id, out: &out)
        arm(circle)
        return .success((ask, circle))
    }

    /// The connection stops listening (a member's or the owner's). Not listening is the goal, so
    /// an unknown circle is fine too.
    public mutating func leave(_ id: CircleID, by connection: WatcherID) {
        unlisten(id, connection)
    }

    /// The connection closed: it listens to nothing any more.
    public mutating func disconnected(_ connection: WatcherID) {
        guard let ids = listening.removeValue(forKey: connection) else { return }
        for id in ids {
            listeners[id]?[connection] = nil
            if listeners[id]?.isEmpty == true { listeners[id] = nil }
        }
    }

    // MARK: internals

    /// Runs `body` on the held circle in place (nil when there is none); `body` may not touch the hub.
    @discardableResult
    mutating func withCircle<R>(_ id: CircleID, _ body: (inout CheckinCircle) -> R) -> R? {
        guard circles[id] != nil else { return nil }
        return body(&circles[id]!)
    }

    /// `withCircle` for the owner's operations: only with the owner token (hashed before the lookup).
    private mutating func steer<T>(_ id: CircleID, ownerToken: String, secrets: Secrets,
                                   _ body: (inout CheckinCircle) -> Result<T, CheckinFailure>) -> Result<T, CheckinFailure> {
        let digest = secrets.digest(ofToken: ownerToken)
        return withCircle(id) { circle in
            guard circle.ownerDigest.matches(digest) else { return .failure(.forbidden) }
            return body(&circle)
        } ?? .failure(.forbidden)
    }

    mutating func listen(_ id: CircleID, _ connection: WatcherID, as role: CheckinRole) {
        listeners[id, default: [:]][connection] = role
        listening[connection, default: []].insert(id)
    }

    mutating func unlisten(_ id: CircleID, _ connection: WatcherID) {
        guard listeners[id]?.removeValue(forKey: connection) != nil else { return }
        if listeners[id]?.isEmpty == true { listeners[id] = nil }
        if listening[connection]?.remove(id) != nil, listening[connection]?.isEmpty == true { listening[connection] = nil }
    }

    /// The news to every connection listening to the circle (nothing when none does).
    func deliver(_ kind: CheckinDelivery.Kind, of id: CircleID, out: inout [CheckinDelivery]) {
        guard let recipients = listeners[id]?.keys.sorted(), !recipients.isEmpty else { return }
        out.append(CheckinDelivery(circle: id, kind: kind, recipients: recipients))
    }

    /// Drops the circle, its buckets and its listeners, telling those.
    mutating func remove(_ id: CircleID, reason: CheckinCloseReason, out: inout [CheckinDelivery]) {
        guard let circle = circles.removeValue(forKey: id) else { return }
        filed[id] = nil
        settlements[id] = nil
        lapsedHomes[id] = nil
        deliver(.closed(reason), of: id, out: &out)
        for connection in listeners[id].map({ Array($0.keys) }) ?? [] { unlisten(id, connection) }
        listeners[id] = nil
        for m in circle.members { buckets[MemberKey(circle: id, member: m.id)] = nil }
    }

    /// Makes sure the circle's next timer has an entry no later than it.
    mutating func arm(_ circle: CheckinCircle) {
        let due = circle.nextDue(settings)
        if let at = filed[circle.id], at <= due { return }
        filed[circle.id] = due
        deadlines.insert(Deadline(at: due, order: nextOrder, id: circle.id))
        nextOrder &+= 1
        compactIfStale()
    }

    /// Rebuilds the heap from the live entries once the stale ones outnumber the circles.
    mutating func compactIfStale() {
        guard deadlines.count > 2 * filed.count + 64 else { return }
        var live: [Deadline] = []
        live.reserveCapacity(filed.count)
        for d in deadlines.unordered where filed[d.id] == d.at { live.append(d) }
        deadlines = Heap(live)
    }
}

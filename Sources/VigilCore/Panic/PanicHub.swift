import HeapModule

/// Panic streams and their watchers, as pure state transitions.
///
/// Each operation changes the state and appends the resulting deliveries to `out`, in the order
/// the changes were applied; the hub never touches a socket, and reads the clock only through the
/// `now` it is given.
///
/// Who may do what:
/// - The owner connection (the one that started or last resumed a stream) steers it without a
///   token; any other connection must present the owner token. `resume` moves ownership.
/// - Watching needs a live watch token of that stream (the owner token does not open it).
/// - A wrong token and an unknown stream get the same `.forbidden`, and the token is hashed before
///   the stream is looked up, so neither answer nor timing tells whether a stream exists.
///
/// Time: an active stream does not expire while its phone speaks (it may be away for long; it
/// resumes), but one whose owner has sent nothing for `abandonAfterMs` is ended as `abandoned`.
/// `tick` is the clock for that and everything else: stale notices, abandonment, and removal of
/// ended streams after their grace (PanicHub+Timers.swift).
///
/// Capacity: `maxStreams` streams are held at most, and the last `reservedShare` of them only for
/// starts the caller vouches for (`start`'s `reserveEligible`): the server passes whether the
/// requesting address has no idle stream (`hasIdleStream`), so whoever starts streams and leaves
/// them silent can fill the unreserved part only, and a person whose address has no idle stream
/// can still start one. The trade: behind a carrier's shared address (CGNAT) one busy abuser makes
/// everyone there ineligible for the reserve until its streams are abandoned; they still get the
/// unreserved part like anyone.
public struct PanicHub: Sendable {
    /// A timer entry. Entries are never removed early: one whose stream is gone or changed is
    /// skipped (or re-filed) when it reaches the top. Each stream has at most one stale, one
    /// abandonment and one grace entry at a time, so the heaps hold at most three entries per stream.
    struct Deadline: Comparable, Sendable {
        let at: Int64
        let order: UInt64      // insertion order: equal deadlines fire in the order they were set
        let id: StreamID
        static func < (a: Deadline, b: Deadline) -> Bool { (a.at, a.order) < (b.at, b.order) }
    }

    public let settings: PanicSettings
    var streams: [StreamID: PanicStream] = [:]
    /// Streams each connection watches, and streams it owns: what `disconnected` must undo.
    var watching: [WatcherID: Set<StreamID>] = [:]
    var owning: [WatcherID: Set<StreamID>] = [:]
    /// The streams held (active and in grace) of each check-in circle that has any: what the
    /// circle's state lists and what revoking a member searches (PanicHub+Circles.swift), without
    /// a walk over every stream. Kept with `streams` by `insert` and `removeStream`.
    var byCircle: [CircleID: Set<StreamID>] = [:]
    var staleDeadlines = Heap<Deadline>()
    var abandonDeadlines = Heap<Deadline>()
    var graceDeadlines = Heap<Deadline>()
    /// Safety timers (PanicHub+Timers.swift): an entry per deadline set, checked against the
    /// stream's `dueAt` when it comes due.
    var timerDeadlines = Heap<Deadline>()
    /// Streams removed (grace over) since the last `tick`, which hands them to the server to
    /// journal; a `start` that frees room removes due streams too. At most the removals between two ticks.
    var removedSinceTick: [StreamID] = []
    var nextOrder: UInt64 = 0
    /// Safety timers and abandonments that came due in a tick that does not decide them (a node
    /// in a cluster: `tick(…, deciding: false)`), until their record is applied; at most one of
    /// each a stream. Not state: the heaps' entries, moved here so a tick need not pop them again.
    var undecidedTimers: [Deadline] = []
    var undecidedAbandons: [Deadline] = []

    public init(settings: PanicSettings) {
        self.settings = settings
    }

    // MARK: reading

    public func stream(_ id: StreamID) -> PanicStream? { streams[id] }

    /// Streams held, active and in grace.
    public var count: Int { streams.count }

    /// Connections watching the stream (0 for an unknown stream).
    public func watcherCount(_ id: StreamID) -> Int { streams[id]?.watchers.count ?? 0 }

    /// Connections watching some stream, all streams together (one connection per stream it watches).
    public var totalWatchers: Int { watching.values.reduce(0) { $0 + $1.count } }

    /// Streams not yet ended.
    public var activeCount: Int { streams.values.reduce(0) { $0 + ($1.isActive ? 1 : 0) } }

    /// The earliest pending timer (possibly of an entry that turns out stale): when to call `tick`.
    public var nextDeadline: Int64? {
        [timerDeadlines.min?.at, staleDeadlines.min?.at, abandonDeadlines.min?.at, graceDeadlines.min?.at].compactMap { $0 }.min()
    }

    /// Whether any of `ids` is an idle stream: active, with no location for `staleAfterMs` or
    /// longer (the silence `tick` tells watchers of). The server asks it of the streams an
    /// address holds, to decide whether that address may use the reserve (see the type's
    /// comment); it costs a lookup per id, and ids of streams no longer held count as not idle.
    public func hasIdleStream(among ids: [StreamID], now: Int64) -> Bool {
        ids.contains { id in
            guard let stream = streams[id], stream.isActive else { return false }
            return Self.saturatingSum(stream.lastLocationAt, settings.staleAfterMs) <= now
        }
    }

    // MARK: the owner's operations

    /// Starts a stream owned by connection `owner`, with `watchers` watch tokens (one per contact).
    /// Its first event, seq 1, is the location. Nobody watches yet, so nothing is delivered, except
    /// that ended streams whose grace has passed are removed first (silently, as in `tick`), so they
    /// do not hold capacity.
    ///
    /// Once `settings.unreservedStreams` streams are held, only a start with `reserveEligible`
    /// is admitted (`.reserveOnly` otherwise); at `maxStreams`, none (`.capacityExceeded`). The
    /// default, eligible, is the rule without a reserve: a caller that cannot tell loses nothing.
    ///
    /// `timer` (not `.cancel`) starts the stream with a safety timer (see `setTimer`); it needs `amber`.
    /// `circle`: the check-in circle whose members are the stream's standing contacts; the caller
    /// has checked the circle's owner token (the hub knows nothing of circles but their ids).
    public mutating func start(owner: WatcherID, status: PanicStatus, location: PanicLocation, note: String?, watchers: Int,
                               timer: PanicTimer? = nil, circle: CircleID? = nil, reserveEligible: Bool = true, secrets: Secrets, now: Int64,
                               out: inout [PanicDelivery])
        -> Result<(stream: PanicStream, ownerToken: String, watchTokens: [String]), PanicFailure> {
        start(owner: owner, status: status, origin: .clear(location, note: note), watchers: watchers, timer: timer, circle: circle,
              reserveEligible: reserveEligible, secrets: secrets, now: now, out: &out)
    }

    /// `start`, clear or end-to-end encrypted (`origin`): an e2e stream's first event is its
    /// sealed point (seq 1, sealed for `status`), and it holds its keys' public side (the key id,
    /// the circle members' boxes) from then on. Everything else as for a clear start.
    public mutating func start(owner: WatcherID, status: PanicStatus, origin: PanicOrigin, watchers: Int,
                               timer: PanicTimer? = nil, circle: CircleID? = nil, reserveEligible: Bool = true, secrets: Secrets, now: Int64,
                               out: inout [PanicDelivery])
        -> Result<(stream: PanicStream, ownerToken: String, watchTokens: [String]), PanicFailure> {
        precondition(watchers >= 1, "a panic stream starts with at least one contact (checked at decode)")
        guard watchers <= settings.maxWatchersOnStart, watchers <= settings.maxWatchTokens else { return .failure(.tooManyWatchTokens) }
        var dueAt: Int64?
        if let timer {
            guard status == .amber else { return .failure(.timerNeedsAmber) }
            guard let due = timer.dueAt(now: now), isValidDeadline(due, now: now) else { return .failure(.invalidTimer) }
            dueAt = due
        }
        removeEndedStreams(dueBy: now)
        guard streams.count < settings.maxStreams else { return .failure(.capacityExceeded) }
        guard reserveEligible || streams.count < settings.unreservedStreams else { return .failure(.reserveOnly) }
        var id = StreamID(random: secrets.randomBytes(16))
        while streams[id] != nil { id = StreamID(random: secrets.randomBytes(16)) }
        let ownerToken = secrets.newToken()
        let watchTokens = (0..<watchers).map { _ in secrets.newToken() }
        var stream = PanicStream(id: id, status: status, origin: origin,
                                 ownerDigest: secrets.digest(ofToken: ownerToken),
                                 watchTokens: watchTokens.map { secrets.digest(ofToken: $0) },
                                 owner: owner, now: now, historyEvents: settings.historyEvents)
        stream.staleArmed = true
        stream.dueAt = dueAt
        stream.circle = circle
        insert(stream)
        owning[owner, default: []].insert(id)
        fileStale(at: Self.saturatingSum(now, settings.staleAfterMs), id)
        fileAbandon(at: Self.saturatingSum(now, settings.abandonAfterMs), id)
        if let dueAt { fileTimer(at: dueAt, id) }
        return .success((stream, ownerToken, watchTokens))
    }

    /// Sets, moves or cancels the safety timer (walk-me-home): unless the owner extends it again
    /// or ends the stream by `dueAt`, `tick` sets the stream red on its own (`missedCheckIn`) and
    /// tells every watcher where the phone last was. A new deadline must be in the future and at
    /// most `maxTimerMs` ahead, and only an amber stream takes one; cancelling works on any
    /// active stream. The change is an event (`timer`, the next seq, to every watcher), so watchers
    /// know by when to expect the check-in. The deadline it has already, or cancelling no timer,
    /// is `.unchanged` (nothing to journal).
    public mutating func setTimer(_ id: StreamID, by connection: WatcherID, ownerToken: String?, timer: PanicTimer,
                                  secrets: Secrets, now: Int64, out: inout [PanicDelivery]) -> Result<PanicChange, PanicFailure> {
        let due = timer.dueAt(now: now)
        // Judged here (`body` may not read the hub), told only after the token is: a bad
        // deadline tells a stranger nothing about a stream.
        let valid = due.map { isValidDeadline($0, now: now) } ?? true
        let result = steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream -> Result<PanicChange, PanicFailure> in
            guard stream.isActive else { return .failure(.ended) }
            guard valid else { return .failure(.invalidTimer) }
            if due != nil && stream.status != .amber { return .failure(.timerNeedsAmber) }
            guard stream.dueAt != due else { return .success(.unchanged(seq: stream.seq)) }
            let event = stream.record(.timer(dueAt: due), now: now)
            Self.deliver(event, of: stream, out: &out)
            return .success(.recorded(event))
        }
        if case .success(.recorded) = result, let due { fileTimer(at: due, id) }
        return result
    }

    /// A deadline a timer may take at `now`: after it, and at most `maxTimerMs` ahead.
    func isValidDeadline(_ due: Int64, now: Int64) -> Bool {
        due > now && due <= Self.saturatingSum(now, settings.maxTimerMs)
    }

    /// A new location: the next seq, to every watcher. It ends any silence (re-arms the stale notice).
    public mutating func update(_ id: StreamID, by connection: WatcherID, ownerToken: String?, location: PanicLocation,
                                secrets: Secrets, now: Int64, out: inout [PanicDelivery]) -> Result<UInt64, PanicFailure> {
        record(location: .location(location), of: id, by: connection, ownerToken: ownerToken, secrets: secrets, now: now, out: &out) { stream in
            stream.isE2E ? .sealedRequired : nil
        }
    }

    /// A sealed location for an end-to-end encrypted stream: applied, as the next seq to every
    /// watcher, only when it was sealed for the stream's next seq and current status
    /// (`SealedSeqCheck`; else `.seqMismatch` with both, and the client seals again). A clear
    /// stream takes none (`.notE2E`). Both are judged after the token, so a stranger learns
    /// nothing of a stream. The key id is the client's to choose (an update sealed just before a
    /// rekey under the key before is still readable by who holds that key).
    public mutating func updateSealed(_ id: StreamID, by connection: WatcherID, ownerToken: String?, update: SealedUpdate,
                                      secrets: Secrets, now: Int64, out: inout [PanicDelivery]) -> Result<UInt64, PanicFailure> {
        record(location: .sealedLocation(update.point), of: id, by: connection, ownerToken: ownerToken, secrets: secrets, now: now,
               out: &out) { stream in
            guard stream.isE2E else { return .notE2E }
            return SealedSeqCheck.check(seq: update.seq, status: update.status, streamSeq: stream.seq, streamStatus: stream.status)
        }
    }

    /// A location event (clear or sealed) recorded if `refusal` finds nothing against it, after
    /// the token and the end are checked; it ends any silence (re-arms the stale notice).
    private mutating func record(location kind: PanicEventKind, of id: StreamID, by connection: WatcherID, ownerToken: String?,
                                 secrets: Secrets, now: Int64, out: inout [PanicDelivery],
                                 refusal: (PanicStream) -> PanicFailure?) -> Result<UInt64, PanicFailure> {
        var needsStaleEntry = false
        let result = steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream -> Result<UInt64, PanicFailure> in
            guard stream.isActive else { return .failure(.ended) }
            if let failure = refusal(stream) { return .failure(failure) }
            let event = stream.record(kind, now: now)
            needsStaleEntry = !stream.staleArmed
            stream.staleArmed = true
            Self.deliver(event, of: stream, out: &out)
            return .success(event.seq)
        }
        if needsStaleEntry { fileStale(at: Self.saturatingSum(now, settings.staleAfterMs), id) }
        return result
    }

    /// Replaces an active e2e stream's key id and member boxes (`panic.rekey`, owner only): every
    /// watcher hears the new key id, and each member watching as a circle member its own new box
    /// (none when the owner gave it none: a revoked member keeps only what it could already
    /// read). Not an event: no seq is taken, and a watcher watching again gets the keys in its
    /// reply. A clear stream is `.notE2E`, an ended one `.ended`.
    public mutating func rekey(_ id: StreamID, by connection: WatcherID, ownerToken: String?, keys: E2EKeys,
                               secrets: Secrets, out: inout [PanicDelivery]) -> Result<UInt64, PanicFailure> {
        steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream -> Result<UInt64, PanicFailure> in
            guard stream.isActive else { return .failure(.ended) }
            guard stream.isE2E else { return .failure(.notE2E) }
            Self.rekey(&stream, keys, out: &out)
            return .success(stream.seq)
        }
    }

    /// The keys replaced, and the watchers told (`rekey`, and the replicated rekey).
    static func rekey(_ stream: inout PanicStream, _ keys: E2EKeys, out: inout [PanicDelivery]) {
        stream.e2e = keys
        for watcher in stream.watchers.keys.sorted() {
            let box = stream.memberWatchers[watcher].flatMap { keys.box(forMember: $0) }
            out.append(PanicDelivery(stream: stream.id, kind: .rekeyed(kid: keys.kid, box: box), recipients: [watcher]))
        }
    }

    /// A status change: the next seq, to every watcher. Setting the status it already has is not an
    /// event (nothing changed, nothing to tell, nothing to journal): `.unchanged` with the current seq.
    public mutating func setStatus(_ id: StreamID, by connection: WatcherID, ownerToken: String?, status: PanicStatus,
                                   secrets: Secrets, now: Int64, out: inout [PanicDelivery]) -> Result<PanicChange, PanicFailure> {
        steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream in
            guard stream.isActive else { return .failure(.ended) }
            guard stream.status != status else { return .success(.unchanged(seq: stream.seq)) }
            let event = stream.record(.status(status), now: now)
            Self.deliver(event, of: stream, out: &out)
            return .success(.recorded(event))
        }
    }

    /// Ends the stream: the `ended` event (next seq) to every watcher. The stream stays readable for
    /// `endedGraceMs` (watch, replay), then `tick` removes it with its trail and tokens.
    public mutating func end(_ id: StreamID, by connection: WatcherID, ownerToken: String?, reason: PanicEndReason,
                             secrets: Secrets, now: Int64, out: inout [PanicDelivery]) -> Result<UInt64, PanicFailure> {
        precondition(reason.isGivenByOwner, "only tick ends a stream as abandoned")
        let result = steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream -> Result<UInt64, PanicFailure> in
            guard stream.isActive else { return .failure(.ended) }
            let event = stream.record(.ended(reason), now: now)
            Self.deliver(event, of: stream, out: &out)
            return .success(event.seq)
        }
        if case .success = result { fileGrace(at: Self.saturatingSum(now, settings.endedGraceMs), id) }
        return result
    }

    /// The phone is back (or on another connection): with the owner token, `connection` becomes the
    /// owner, and the previous owner connection keeps no token-less rights. Works on an ended stream
    /// in grace too, so the phone learns that it ended.
    public mutating func resume(_ id: StreamID, by connection: WatcherID, ownerToken: String, secrets: Secrets) -> Result<PanicStream, PanicFailure> {
        let digest = secrets.digest(ofToken: ownerToken)
        var handedOver = false
        var previousOwner: WatcherID?
        let result = withStream(id) { stream -> Result<PanicStream, PanicFailure> in
            guard stream.ownerDigest.matches(digest) else { return .failure(.forbidden) }
            if stream.owner != connection {
                handedOver = true
                previousOwner = stream.owner
                stream.owner = connection
            }
            return .success(stream)
        } ?? .failure(.forbidden)
        if handedOver {
            if let previousOwner { Self.unindex(&owning, previousOwner, id) }
            owning[connection, default: []].insert(id)
        }
        return result
    }

    /// A new watch token for one more contact. Refused on an ended stream: contacts are chosen
    /// while the person is in danger, and an ended stream gains no new readers.
    public mutating func invite(_ id: StreamID, by connection: WatcherID, ownerToken: String?, secrets: Secrets) -> Result<String, PanicFailure> {
        let maxWatchTokens = settings.maxWatchTokens     // `body` may not read the hub (see withStream)
        return steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream in
            guard stream.isActive else { return .failure(.ended) }
            guard stream.watchTokens.count < maxWatchTokens else { return .failure(.tooManyWatchTokens) }
            let token = secrets.newToken()
            stream.watchTokens.append(secrets.digest(ofToken: token))
            return .success(token)
        }
    }

    /// Kills a watch token: every connection watching with it gets `.revoked` and stops watching, the
    /// token opens nothing again, and the owner hears the new watcher count if it changed. Allowed on
    /// an ended stream (cutting a reader off the trail). A token that is not live (never issued, or
    /// revoked already) is a success that changed nothing (`.notLive`: nothing to journal or sync),
    /// so revoking is idempotent and a storm of revocations costs no disk.
    public mutating func revoke(_ id: StreamID, by connection: WatcherID, ownerToken: String?, watchToken: String,
                                secrets: Secrets, out: inout [PanicDelivery]) -> Result<PanicRevocation, PanicFailure> {
        let digest = secrets.digest(ofToken: watchToken)
        var cut: [WatcherID] = []
        let result = steer(id, by: connection, ownerToken: ownerToken, secrets: secrets) { stream -> Result<PanicRevocation, PanicFailure> in
            guard let killed = Self.killWatchToken(digest, of: &stream, out: &out) else { return .success(.notLive) }
            cut = killed
            return .success(.revoked)
        }
        for watcher in cut { Self.unindex(&watching, watcher, id) }
        return result
    }

    // MARK: watchers

    /// Subscribes `watcher` with a live watch token (wrong token or unknown stream: `.forbidden`).
    ///
    /// Returns the stream's state and, when `since` is given, the seqs to replay after it
    /// (`since + 1 ... seq`) if the history still holds them all (`gap: false`), or none and
    /// `gap: true` when some are gone. `since` equal to the current seq replays nothing; past it,
    /// `.sinceAhead`. The events themselves are read from the history one at a time as the
    /// watcher's connection takes them (`PanicStream.event(seq:)`): a replay costs no copy of the
    /// history. From the moment this returns the watcher gets every later event live, so replay
    /// followed by live events is the whole sequence.
    /// Watching again (same or another token) moves the watcher to that token without changing the
    /// count; a new watching connection makes the owner hear the count.
    public mutating func watch(_ id: StreamID, watcher: WatcherID, watchToken: String, since: UInt64?, secrets: Secrets,
                               out: inout [PanicDelivery]) -> Result<PanicWatch, PanicFailure> {
        let digest = secrets.digest(ofToken: watchToken)
        return watch(id, watcher: watcher, as: digest, since: since, out: &out) { $0.watchTokenIndex(digest) != nil }
    }

    /// `watch`, for whoever `admits` lets in (the token's check, read before anything else), the
    /// watcher kept under `digest` so that revoking what it holds finds it.
    mutating func watch(_ id: StreamID, watcher: WatcherID, as digest: TokenDigest, member: UInt32? = nil, since: UInt64?,
                        out: inout [PanicDelivery], admits: (PanicStream) -> Bool) -> Result<PanicWatch, PanicFailure> {
        var isNewWatcher = false
        let result = withStream(id) { stream -> Result<PanicWatch, PanicFailure> in
            guard admits(stream) else { return .failure(.forbidden) }
            var replay: ClosedRange<UInt64>?
            var gap = false
            if let since {
                guard since <= stream.seq else { return .failure(.sinceAhead) }
                if since == stream.seq {
                    // up to date: nothing to replay
                } else if stream.event(seq: since + 1) != nil {
                    replay = (since + 1)...stream.seq  // held: the history's seqs are contiguous up to `seq`
                } else {
                    gap = true
                }
            }
            if stream.watchers.updateValue(digest, forKey: watcher) == nil {
                isNewWatcher = true
                Self.deliverWatcherCount(of: stream, out: &out)
            }
            stream.memberWatchers[watcher] = member
            // A member's own box, and no other's; a watch token's watcher has the key from its link.
            let box = member.flatMap { stream.e2e?.box(forMember: $0) }
            return .success(PanicWatch(stream: stream, replay: replay, gap: gap, box: box))
        } ?? .failure(.forbidden)
        if isNewWatcher { watching[watcher, default: []].insert(id) }
        return result
    }

    /// Whether `watcher` watches the stream now (a replay to it goes on only while it does).
    public func isWatching(_ id: StreamID, watcher: WatcherID) -> Bool {
        streams[id]?.watchers[watcher] != nil
    }

    /// Stops `watcher` watching the stream (a no-op when it does not).
    public mutating func unwatch(_ id: StreamID, watcher: WatcherID, out: inout [PanicDelivery]) {
        let stopped = withStream(id) { stream -> Bool in
            guard stream.watchers.removeValue(forKey: watcher) != nil else { return false }
            stream.memberWatchers.removeValue(forKey: watcher)
            Self.deliverWatcherCount(of: stream, out: &out)
            return true
        }
        if stopped == true { Self.unindex(&watching, watcher, id) }
    }

    /// The connection is gone: it owns nothing and watches nothing any more. Its streams stay
    /// active, ownerless, until the phone resumes with the owner token. Ownership is dropped first, so
    /// a connection that both owned and watched a stream is not sent its own count.
    public mutating func disconnected(_ connection: WatcherID, out: inout [PanicDelivery]) {
        if let owned = owning.removeValue(forKey: connection) {
            for id in owned {
                withStream(id) { stream in
                    if stream.owner == connection { stream.owner = nil }
                }
            }
        }
        if let watched = watching.removeValue(forKey: connection) {
            for id in watched.sorted() {
                withStream(id) { stream in
                    guard stream.watchers.removeValue(forKey: connection) != nil else { return }
                    stream.memberWatchers.removeValue(forKey: connection)
                    Self.deliverWatcherCount(of: stream, out: &out)
                }
            }
        }
    }

    // MARK: private

    /// Runs `body` on the held stream `id` in place; nil (and `body` not run) when there is none.
    ///
    /// Every change to a held stream goes through here. The dictionary's in-place access
    /// (`streams[id]?.…` uses its modify accessor) hands `body` the stored value itself, not a
    /// copy, so the stream's history and token arrays stay uniquely referenced and are never
    /// copied on write. While `body` runs, `streams` is being accessed: `body` must not read or
    /// change the hub (the compiler enforces it), so callers copy the settings they need before,
    /// append deliveries to their own `out`, and do timer and index work after it returns.
    @discardableResult
    mutating func withStream<R>(_ id: StreamID, _ body: (inout PanicStream) -> R) -> R? {
        streams[id]?.applying(body)
    }

    /// `withStream`, for the owner's operations: runs `body` only if `connection` may steer the
    /// stream, that is it owns it, or it presents the owner token. The owner connection is
    /// authorised whatever token it adds (a stale one must not lose an update). The token is hashed
    /// before the lookup, so an unknown stream costs the same as a wrong token, and both are
    /// `.forbidden`.
    private mutating func steer<T>(_ id: StreamID, by connection: WatcherID, ownerToken: String?, secrets: Secrets,
                                   _ body: (inout PanicStream) -> Result<T, PanicFailure>) -> Result<T, PanicFailure> {
        let digest = ownerToken.map { secrets.digest(ofToken: $0) }
        return withStream(id) { stream in
            if stream.owner != connection {
                guard let digest, stream.ownerDigest.matches(digest) else { return .failure(.forbidden) }
            }
            return body(&stream)
        } ?? .failure(.forbidden)
    }

    static func unindex(_ index: inout [WatcherID: Set<StreamID>], _ connection: WatcherID, _ id: StreamID) {
        guard index[connection]?.remove(id) != nil, index[connection]?.isEmpty == true else { return }
        index.removeValue(forKey: connection)
    }

    /// The event to every watcher of `stream` (nothing when nobody watches).
    static func deliver(_ event: PanicEvent, of stream: PanicStream, out: inout [PanicDelivery]) {
        let recipients = stream.watchers.keys.sorted()
        if !recipients.isEmpty { out.append(PanicDelivery(stream: stream.id, kind: .event(event), recipients: recipients)) }
    }

    /// Kills the live watch token `digest` of `stream`: the connections watching with it are told
    /// (`revoked`) and stop watching, and the owner hears the new count if it changed. Returns those
    /// connections (the caller unindexes them), nil when the token was not live. Shared by `revoke`
    /// and the replicated revocation, which must cut exactly the same watchers.
    static func killWatchToken(_ digest: TokenDigest, of stream: inout PanicStream, out: inout [PanicDelivery]) -> [WatcherID]? {
        guard let index = stream.watchTokenIndex(digest) else { return nil }
        stream.watchTokens.remove(at: index)
        let cut = stream.watchers.filter { $0.value.matches(digest) }.map(\.key).sorted()
        guard !cut.isEmpty else { return cut }
        for watcher in cut {
            stream.watchers.removeValue(forKey: watcher)
            stream.memberWatchers.removeValue(forKey: watcher)
        }
        out.append(PanicDelivery(stream: stream.id, kind: .revoked, recipients: cut))
        deliverWatcherCount(of: stream, out: &out)
        return cut
    }

    /// The stream's watcher count to its owner connection (nothing while it has none).
    static func deliverWatcherCount(of stream: PanicStream, out: inout [PanicDelivery]) {
        guard let owner = stream.owner else { return }
        out.append(PanicDelivery(stream: stream.id, kind: .watchers(count: stream.watchers.count), recipients: [owner]))
    }
}

private extension PanicStream {
    /// `body` applied to this stream in place: lets `PanicHub.withStream` reach the stored value
    /// through optional chaining on the dictionary (`streams[id]?.applying(body)`).
    mutating func applying<R>(_ body: (inout PanicStream) -> R) -> R {
        body(&self)
    }
}

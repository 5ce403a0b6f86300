import HeapModule

/// An opaque 64-bit key the server derives from a connection's source address (a keyed hash, the
/// key random per process; for IPv6, of the /64, which one subscriber holds whole). Nothing here
/// is persisted, and the key says nothing about the address without the server's hash key.
public typealias AddressKey = UInt64

/// Budgets that hold across connections: what one source address may start, create and ask for,
/// however often it reconnects (a reconnect is a fresh session with fresh per-session buckets).
/// A pure value, like the hubs: the server asks before an operation (`admit…`) and reports what
/// opened and closed (`streamStarted`/`streamEnded`, `pinCreated`/`pinRemoved`).
///
/// What each limit trades (defaults in `AddressBudgetSettings`). One address is not one person: a
/// carrier's shared address (CGNAT) holds thousands of phones, a reverse proxy everyone (the
/// server must take the client address from a trusted proxy's `X-Forwarded-For`). So:
/// - panic starts per hour and open streams: an abuser on one address can hold at most
///   `maxOpenStreams` streams, not the server's capacity; the price is that a person behind the
///   same shared address as an abuser at that limit is refused until the abuser's streams end or
///   are abandoned. The limits are far above what a crowd in danger behind one address starts,
///   and the hub's reserved share stays open to addresses with no idle stream.
/// - pins per hour and live pins: filling the map takes many addresses; a shared address of
///   heavy honest mappers may be told to wait (`rate_limited`, with the exact retry time).
/// - subscribes per second: bounds the loop time one address can ask for; a shared address with
///   more than the rate of people panning at once gets `rate_limited` and retries a second later.
/// - votes: one voter number per address (`voter`), kept while the address is known, so a
///   reconnect does not vote again on the same pin; the price is one vote per pin for everyone
///   behind a shared address.
///
/// Memory is bounded: at most `maxTrackedAddresses` entries, and an entry is dropped once it
/// holds nothing (no open stream, no live pin, every bucket full again, its voter number past
/// `voterMemoryMs`), found through a heap of those times so that `sweep` costs O(due) entries,
/// not O(all). The per-address lists of open streams and the id → address maps are bounded by
/// the hubs' own capacities.
public struct AddressBudgets: Sendable {
    /// One address: 16 bytes a bucket, its open streams, its live pin count, its voter number.
    struct Entry: Sendable {
        var starts: TokenLevel
        var pinCreates: TokenLevel
        var subscribes: TokenLevel
        var circleCreates: TokenLevel
        /// The address's open streams, in start order (at most `maxOpenStreams`).
        var streams: [StreamID] = []
        var livePins = 0
        /// 0 until the address first votes; never reused once given.
        var voter: UInt64 = 0
        /// The voter number is kept until this time (ms).
        var voterKeptUntil: Int64 = .min
        /// The time of this entry's element in `droppable`, when it has one.
        var filedAt: Int64?

        init(_ settings: AddressBudgetSettings, now: Int64) {
            starts = TokenLevel(full: settings.panicStarts, nowMs: now)
            pinCreates = TokenLevel(full: settings.pinCreates, nowMs: now)
            subscribes = TokenLevel(full: settings.subscribes, nowMs: now)
            circleCreates = TokenLevel(full: settings.circleCreates, nowMs: now)
        }

        var holdsSomething: Bool { !streams.isEmpty || livePins > 0 }
    }

    /// When an entry that holds nothing may be dropped (a candidate; checked again when due).
    struct Droppable: Comparable, Sendable {
        let at: Int64
        let key: AddressKey
        static func < (a: Droppable, b: Droppable) -> Bool { (a.at, a.key) < (b.at, b.key) }
    }

    public let settings: AddressBudgetSettings
    var entries: [AddressKey: Entry] = [:]
    var droppable = Heap<Droppable>()
    private var streamAddress: [StreamID: AddressKey] = [:]
    private var pinAddress: [PinID: AddressKey] = [:]
    private var nextVoter: UInt64

    /// `firstVoter`: the lowest voter number to give, above every number in the restored votes
    /// (`StateImage.highestVoteSession + 1`), so that no new address finds an old one's vote.
    public init(settings: AddressBudgetSettings, firstVoter: UInt64 = 1) {
        self.settings = settings
        self.nextVoter = max(1, firstVoter)
    }

    /// Addresses tracked.
    public var count: Int { entries.count }

    // MARK: admissions

    /// A `panic.start` from `key`: refused at `maxOpenStreams` open streams, else one token of the
    /// start rate. An address the full table cannot track is admitted: a person in danger is not
    /// refused for the server's bookkeeping (the hub's capacity and reserve still apply).
    public mutating func admitPanicStart(_ key: AddressKey, now: Int64) -> AddressAdmission {
        let rate = settings.panicStarts, maxOpen = settings.maxOpenStreams
        return withEntry(key, now: now) { entry in
            guard entry.streams.count < maxOpen else { return .overLimit(.openStreams) }
            return entry.starts.take(rate, nowMs: now).map { .rateLimited(retryAfterMs: $0) } ?? .admitted
        } ?? .admitted
    }

    /// A `pin.create` from `key`: refused at `maxLivePins` live pins, else one token of the create
    /// rate. Refused when the address cannot be tracked (pins can wait; see the type's comment).
    public mutating func admitPinCreate(_ key: AddressKey, now: Int64) -> AddressAdmission {
        let rate = settings.pinCreates, maxLive = settings.maxLivePins
        return withEntry(key, now: now) { entry in
            guard entry.livePins < maxLive else { return .overLimit(.livePins) }
            return entry.pinCreates.take(rate, nowMs: now).map { .rateLimited(retryAfterMs: $0) } ?? .admitted
        } ?? .overLimit(.trackedAddresses)
    }

    /// A `subscribe` from `key`: one token of the subscribe rate. An untracked address is admitted
    /// (a subscribe's cost is bounded by its scan budget; refusing maps to every newcomer while
    /// the table is full would be worse).
    public mutating func admitSubscribe(_ key: AddressKey, now: Int64) -> AddressAdmission {
        let rate = settings.subscribes
        return withEntry(key, now: now) { entry in
            entry.subscribes.take(rate, nowMs: now).map { .rateLimited(retryAfterMs: $0) } ?? .admitted
        } ?? .admitted
    }

    /// A `checkin.create` from `key`: one token of the circle-create rate. Refused when the
    /// address cannot be tracked (a new circle can wait, like a pin).
    public mutating func admitCircleCreate(_ key: AddressKey, now: Int64) -> AddressAdmission {
        let rate = settings.circleCreates
        return withEntry(key, now: now) { entry in
            entry.circleCreates.take(rate, nowMs: now).map { .rateLimited(retryAfterMs: $0) } ?? .admitted
        } ?? .overLimit(.trackedAddresses)
    }

    /// The voter number of `key` for `MapHub.vote`: the same one every time while the address is
    /// known (and for `voterMemoryMs` after its last vote), a new one, never used before, once it
    /// was forgotten. Small numbers, counted up: never the address or its hash. Nil when the
    /// address cannot be tracked (the vote is refused: `AddressLimit.trackedAddresses`).
    public mutating func voter(for key: AddressKey, now: Int64) -> UInt64? {
        let keptUntil = PanicHub.saturatingSum(now, settings.voterMemoryMs)
        var fresh = nextVoter
        let voter = withEntry(key, now: now) { entry -> UInt64 in
            if entry.voter == 0 {
                entry.voter = fresh
                fresh += 1
            }
            entry.voterKeptUntil = max(entry.voterKeptUntil, keptUntil)
            return entry.voter
        }
        nextVoter = fresh
        return voter
    }

    // MARK: what opened and closed

    /// A stream `key` started (after the hub admitted it). Not tracked if the address cannot be.
    public mutating func streamStarted(_ id: StreamID, by key: AddressKey, now: Int64) {
        guard streamAddress[id] == nil else { return }
        let tracked = withEntry(key, now: now) { entry -> Bool in
            entry.streams.append(id)
            return true
        }
        if tracked == true { streamAddress[id] = key }
    }

    /// A stream ended (by its owner, abandoned) or was removed: it no longer counts against its
    /// address. Ending one twice, or one never tracked, changes nothing.
    public mutating func streamEnded(_ id: StreamID, now: Int64) {
        guard let key = streamAddress.removeValue(forKey: id) else { return }
        entries[key]?.streams.removeAll { $0 == id }
        fileIfEmptied(key, now: now)
    }

    /// The open streams started from `key`, for `PanicHub.hasIdleStream(among:now:)`.
    public func openStreams(of key: AddressKey) -> [StreamID] {
        entries[key]?.streams ?? []
    }

    /// A pin `key` created (after the hub stored it).
    public mutating func pinCreated(_ id: PinID, by key: AddressKey, now: Int64) {
        guard pinAddress[id] == nil else { return }
        let tracked = withEntry(key, now: now) { entry -> Bool in
            entry.livePins += 1
            return true
        }
        if tracked == true { pinAddress[id] = key }
    }

    /// A pin deleted, flagged or expired. Removing one twice, or one never tracked (created
    /// before a restart, or while the table was full), changes nothing.
    public mutating func pinRemoved(_ id: PinID, now: Int64) {
        guard let key = pinAddress.removeValue(forKey: id) else { return }
        entries[key]?.livePins -= 1
        fileIfEmptied(key, now: now)
    }

    /// Live pins created from `key`.
    public func livePins(of key: AddressKey) -> Int {
        entries[key]?.livePins ?? 0
    }

    // MARK: the table

    /// Runs `body` on `key`'s entry, creating it if need be; nil (and `body` not run) when the
    /// table is full and sweeping what is due frees no room.
    private mutating func withEntry<R>(_ key: AddressKey, now: Int64, _ body: (inout Entry) -> R) -> R? {
        if entries[key] == nil {
            if entries.count >= settings.maxTrackedAddresses { sweep(now: now) }
            guard entries.count < settings.maxTrackedAddresses else { return nil }
            entries[key] = Entry(settings, now: now)
            file(key, at: now)
        }
        return entries[key]?.applying(body)
    }

    /// After a close: an entry left holding nothing becomes a candidate for dropping.
    private mutating func fileIfEmptied(_ key: AddressKey, now: Int64) {
        guard let entry = entries[key], !entry.holdsSomething, entry.filedAt == nil else { return }
        file(key, at: now)
    }
}

private extension AddressBudgets.Entry {
    /// `body` applied in place, through the dictionary's optional chaining (no copy of `streams`).
    mutating func applying<R>(_ body: (inout Self) -> R) -> R { body(&self) }
}

/// Where a stream's person last was: coordinates for a clear stream, or, for an end-to-end
/// encrypted one, the sealed point and the seq it was sealed for. An e2e stream has no
/// coordinates at all, so nothing can encode a placeholder position for it.
public enum PanicPosition: Equatable, Sendable {
    case clear(PanicLocation)
    case sealed(SealedPoint, seq: UInt64)

    /// The coordinates, for a clear stream only.
    public var clearLocation: PanicLocation? {
        if case .clear(let location) = self { return location }
        return nil
    }
}

/// Where a stream's person last was, and when the phone said so.
public struct LastLocation: Equatable, Sendable {
    public var position: PanicPosition
    public var at: Int64

    public init(position: PanicPosition, at: Int64) {
        self.position = position
        self.at = at
    }

    /// A clear position.
    public init(location: PanicLocation, at: Int64) {
        self.init(position: .clear(location), at: at)
    }

    /// The coordinates, for a clear stream only (nil for an e2e stream's sealed point).
    public var clearLocation: PanicLocation? { position.clearLocation }
}

/// How and when a stream ended.
public struct PanicEnd: Equatable, Sendable {
    public var reason: PanicEndReason
    public var at: Int64
}

/// How a stream starts: its first location in clear (and the note), or end-to-end encrypted.
public enum PanicOrigin: Equatable, Sendable {
    case clear(PanicLocation, note: String?)
    case e2e(E2EStart)
}

extension PanicEventKind {
    /// A location, clear or sealed: a point of the trail, conflated for a slow watcher.
    public var isLocation: Bool {
        switch self {
        case .location, .sealedLocation: return true
        case .status, .ended, .timer, .missedCheckIn: return false
        }
    }
}

/// One person's panic stream: its state, its bounded history, and who may see and steer it.
///
/// A value: the hub hands out copies as snapshots. All changes go through `record`, which keeps
/// `seq`, the history, `status`, `last` and `ended` consistent with each other.
public struct PanicStream: Sendable {
    public let id: StreamID
    public internal(set) var status: PanicStatus
    public let startedAt: Int64
    /// Time of the last event (location, status or end).
    public internal(set) var updatedAt: Int64
    /// The last event's seq (contiguous from 1).
    public internal(set) var seq: UInt64
    public internal(set) var last: LastLocation
    public let note: String?
    public internal(set) var ended: PanicEnd?
    public internal(set) var history: PanicHistory
    /// The safety timer: by when the owner must check in (extend it or end the stream), unix ms.
    /// Set only on an active stream; cleared by the end, a cancel, or the escalation.
    public internal(set) var dueAt: Int64?
    /// When the hub set the stream red because its timer passed (`missedCheckIn`: the event's
    /// time). Such a stream stays open until its owner ends it: the abandonment rule does not
    /// apply to it.
    public internal(set) var missedCheckInAt: Int64?
    /// When that escalation was sent (`missedCheckIn`'s `sentAt`, at or after `missedCheckInAt`);
    /// set together with it.
    public internal(set) var missedCheckInSentAt: Int64?
    /// The check-in circle the stream was started for (`panic.start` with the circle's owner
    /// token), whose members are its standing contacts: they watch with their member tokens, and
    /// the circle's listeners hear of its start, escalation and end. Fixed at the start; a
    /// circle closed since leaves it set (the stream goes on; new member watches are refused).
    public internal(set) var circle: CircleID?
    /// The keys' public side of an end-to-end encrypted stream (its current key id and the circle
    /// members' boxes); nil for a clear stream. Fixed as e2e or clear at the start; `rekey`
    /// replaces the keys.
    public internal(set) var e2e: E2EKeys?
    /// Whether the stream is end-to-end encrypted: its locations are sealed, never coordinates.
    public var isE2E: Bool { e2e != nil }

    /// Digest of the owner token (resume, and steering from a connection that does not own the stream).
    let ownerDigest: TokenDigest
    /// Digests of the live watch tokens; a revoked token is removed, so it opens nothing again.
    var watchTokens: [TokenDigest]
    /// The connection that started or last resumed the stream; it steers without a token. Nil while
    /// the phone is away (the stream stays active all the same).
    public internal(set) var owner: WatcherID?
    /// Connections watching, each with the digest of the token it watches with: a watch token's,
    /// or a circle member's token's for a member watching (`watch(asMember:)`). Revoking either
    /// finds the watchers it cuts by it; the two kinds of token are both 256 random bits, so a
    /// digest of one never matches the other's.
    var watchers: [WatcherID: TokenDigest] = [:]
    /// The member number of each watcher watching as a circle member (`watch(asMember:)`): whom
    /// a rekey sends which box.
    var memberWatchers: [WatcherID: UInt32] = [:]
    /// Whether watchers were told of the current silence; a new location clears it.
    var staleNotified = false
    /// Whether a stale-deadline entry for this stream is in the hub's heap (one at most).
    var staleArmed = false

    /// The time of the last location, which stale detection counts from.
    public var lastLocationAt: Int64 { last.at }
    public var isActive: Bool { ended == nil }
    /// Whether the stream was escalated for a missed check-in (and has not ended).
    public var isEscalated: Bool { ended == nil && missedCheckInAt != nil }
    public var watcherCount: Int { watchers.count }

    /// `origin`: the first location in clear (with the note), or an e2e start (its keys and the
    /// first point, sealed for seq 1 and `status`).
    init(id: StreamID, status: PanicStatus, origin: PanicOrigin, ownerDigest: TokenDigest,
         watchTokens: [TokenDigest], owner: WatcherID, now: Int64, historyEvents: Int) {
        self.id = id
        self.status = status
        self.startedAt = now
        self.updatedAt = now
        self.seq = 1
        let first: PanicEventKind
        switch origin {
        case .clear(let location, let note):
            self.last = LastLocation(location: location, at: now)
            self.note = note
            first = .location(location)
        case .e2e(let start):
            let point = start.point(status: status)
            self.last = LastLocation(position: .sealed(point, seq: 1), at: now)
            self.note = nil
            self.e2e = start.keys
            first = .sealedLocation(point)
        }
        self.ended = nil
        self.ownerDigest = ownerDigest
        self.watchTokens = watchTokens
        self.owner = owner
        self.history = PanicHistory(capacity: historyEvents)
        history.append(PanicEvent(seq: 1, at: now, kind: first))
    }

    /// A clear stream (`init(origin:)` with `.clear`).
    init(id: StreamID, status: PanicStatus, location: PanicLocation, note: String?, ownerDigest: TokenDigest,
         watchTokens: [TokenDigest], owner: WatcherID, now: Int64, historyEvents: Int) {
        self.init(id: id, status: status, origin: .clear(location, note: note), ownerDigest: ownerDigest, watchTokens: watchTokens,
                  owner: owner, now: now, historyEvents: historyEvents)
    }

    /// Applies the next event and returns it. The caller has checked that the stream is active.
    mutating func record(_ kind: PanicEventKind, now: Int64) -> PanicEvent {
        precondition(ended == nil, "an ended stream takes no events")
        seq += 1
        updatedAt = now
        let event = PanicEvent(seq: seq, at: now, kind: kind)
        switch kind {
        case .location(let location):
            last = LastLocation(location: location, at: now)
            staleNotified = false
        case .sealedLocation(let point):
            last = LastLocation(position: .sealed(point, seq: seq), at: now)
            staleNotified = false
        case .status(let status):
            self.status = status
        case .ended(let reason):
            ended = PanicEnd(reason: reason, at: now)
            dueAt = nil
        case .timer(let due):
            dueAt = due
        case .missedCheckIn(_, _, let sentAt):
            status = .red
            dueAt = nil
            missedCheckInAt = now
            missedCheckInSentAt = sentAt
        }
        history.append(event)
        return event
    }

    /// Whether `other` would be encoded as the same `state` (`ServerMessages.panicState`): every
    /// field that encoder reads is compared, the rest (owner, watchers, tokens, the stale flags)
    /// is not. Two copies of a stream taken with no event between them compare in O(1). Keep this
    /// list and the encoder's in step (`PanicStateMessageTests` checks it).
    public func hasTheSameState(as other: PanicStream) -> Bool {
        id == other.id && seq == other.seq && status == other.status && startedAt == other.startedAt
            && updatedAt == other.updatedAt && note == other.note && last == other.last && ended == other.ended
            && dueAt == other.dueAt && missedCheckInAt == other.missedCheckInAt
            && missedCheckInSentAt == other.missedCheckInSentAt && e2e?.kid == other.e2e?.kid && history.holdsTheSameEvents(as: other.history)
    }

    /// The held event with this seq, or nil when the history no longer (or not yet) holds it.
    public func event(seq: UInt64) -> PanicEvent? { history.event(seq: seq) }

    /// The location events (clear or sealed) still held, oldest first.
    public var trail: [PanicEvent] {
        history.all.filter { $0.kind.isLocation }
    }

    /// Index of the live watch token whose digest matches, checking every token whatever matches
    /// first, so the time taken says nothing about which token (or how many) there are before it.
    func watchTokenIndex(_ digest: TokenDigest) -> Int? {
        var found: Int?
        for (i, token) in watchTokens.enumerated() where token.matches(digest) && found == nil {
            found = i
        }
        return found
    }
}

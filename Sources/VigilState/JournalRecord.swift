import VigilCore

/// One change to durable state, as the journal keeps it between snapshots.
///
/// Records describe results, not requests: `pinPut` holds the pin as it is after the write, and
/// `panicEvent` the event with the seq and time the hub gave it, so replay needs no tokens,
/// settings or clock, and replaying a record twice changes nothing (see `StateImage.apply`).
///
/// What is not journaled, because restore derives it: pin expiry (pins with `expiresAt <= now`
/// are dropped at restore), removal of ended streams after their grace (likewise), stale
/// notices, and everything about connections (owners, watchers, subscriptions).
public enum JournalRecord: Equatable, Sendable {
    /// A pin created or edited (or, before votes had records of their own, voted on): its full
    /// state afterwards, votes and sequence included.
    case pinPut(Pin)
    /// A pin deleted or flagged (or expired, though that needs no record).
    case pinRemove(PinID)
    /// One vote that changed a pin's counts and left it standing: `voter`'s vote is now `value`.
    /// A vote changes nothing else (not `updatedAt`), so this is all replay needs; a vote that
    /// flagged the pin is its `pinRemove`, and one that changed nothing has no record.
    case pinVote(PinID, voter: UInt64, value: Int8)
    /// A new panic stream: everything it started with (its circle too, if it was started for one).
    case panicStart(PanicStartRecord)
    /// A location, status change or end, with the seq and time the hub gave it.
    case panicEvent(StreamID, PanicEvent)
    /// A new watch token (its digest).
    case panicInvite(StreamID, TokenDigest)
    /// A watch token killed.
    case panicRevoke(StreamID, TokenDigest)
    /// An end-to-end encrypted stream's new keys (`panic.rekey`): its key id and member boxes.
    case panicRekey(StreamID, E2EKeys)
    /// A stream removed (grace over). Optional: restore drops such streams by their times anyway.
    case panicRemove(StreamID)
    /// A check-in circle created or changed: its whole durable state afterwards (it is small).
    case circlePut(CheckinCircle)
    /// A circle closed by its owner, or removed for being idle.
    case circleRemove(CircleID)
    /// A notice's delivery to one subscription is done: a restart does not send it again.
    case noticeSettled(NoticeSettlement)
    /// A notice acknowledged by the owner or a member.
    case noticeAcked(NoticeAck)
    /// The answer kept for an idempotency key (sealed, see `KeptAnswer`), written after the
    /// change it answers in the same turn: a repeat after a restart gets it again and changes
    /// nothing. Changes no pin, stream or circle.
    case answerKept(KeptAnswer)
}

/// What `panicStart` keeps: the stream's first state, from which replay rebuilds it exactly.
public struct PanicStartRecord: Equatable, Sendable {
    public var id: StreamID
    public var status: PanicStatus
    /// The first location (event seq 1) in clear with the note, or an e2e stream's keys and
    /// sealed first point.
    public var origin: PanicOrigin
    public var startedAt: Int64
    public var ownerDigest: TokenDigest
    public var watchTokens: [TokenDigest]
    public var historyCapacity: Int
    /// The safety timer the stream started with, if any.
    public var dueAt: Int64?
    /// The check-in circle the stream was started for, if any.
    public var circle: CircleID?

    public init(id: StreamID, status: PanicStatus, origin: PanicOrigin, startedAt: Int64,
                ownerDigest: TokenDigest, watchTokens: [TokenDigest], historyCapacity: Int, dueAt: Int64? = nil,
                circle: CircleID? = nil) {
        self.id = id
        self.status = status
        self.origin = origin
        self.startedAt = startedAt
        self.ownerDigest = ownerDigest
        self.watchTokens = watchTokens
        self.historyCapacity = historyCapacity
        self.dueAt = dueAt
        self.circle = circle
    }

    /// A clear start.
    public init(id: StreamID, status: PanicStatus, location: PanicLocation, note: String?, startedAt: Int64,
                ownerDigest: TokenDigest, watchTokens: [TokenDigest], historyCapacity: Int, dueAt: Int64? = nil,
                circle: CircleID? = nil) {
        self.init(id: id, status: status, origin: .clear(location, note: note), startedAt: startedAt, ownerDigest: ownerDigest,
                  watchTokens: watchTokens, historyCapacity: historyCapacity, dueAt: dueAt, circle: circle)
    }

    /// The first location of a clear start (nil for an e2e one).
    public var location: PanicLocation? {
        if case .clear(let location, _) = origin { return location }
        return nil
    }

    /// The note of a clear start (an e2e start has none).
    public var note: String? {
        if case .clear(_, let note) = origin { return note }
        return nil
    }

    /// The e2e start (nil for a clear one).
    public var e2e: E2EStart? {
        if case .e2e(let start) = origin { return start }
        return nil
    }

    /// The record of a stream the hub has just started (its only event is seq 1).
    public init(_ stream: PanicStream) {
        let origin: PanicOrigin
        switch stream.last.position {
        case .clear(let location): origin = .clear(location, note: stream.note)
        case .sealed(let point, _):
            origin = .e2e(E2EStart(keys: stream.e2e ?? E2EKeys(kid: point.kid, boxes: []), sealed: point.sealed))
        }
        self.init(id: stream.id, status: stream.status, origin: origin,
                  startedAt: stream.startedAt, ownerDigest: stream.ownerTokenDigest,
                  watchTokens: stream.watchTokenDigests, historyCapacity: stream.history.capacity, dueAt: stream.dueAt,
                  circle: stream.circle)
    }

    /// The stream as `PanicHub.start` made it: seq 1, the first location as its only event.
    public func stream() throws(PanicRestoreError) -> PanicStream {
        let last: LastLocation
        let first: PanicEventKind
        switch origin {
        case .clear(let location, _):
            last = LastLocation(location: location, at: startedAt)
            first = .location(location)
        case .e2e(let start):
            let point = start.point(status: status)
            last = LastLocation(position: .sealed(point, seq: 1), at: startedAt)
            first = .sealedLocation(point)
        }
        return try PanicStream.restored(id: id, status: status, startedAt: startedAt, updatedAt: startedAt, seq: 1,
                                        last: last, note: note, ended: nil,
                                        history: [PanicEvent(seq: 1, at: startedAt, kind: first)],
                                        historyCapacity: historyCapacity, ownerDigest: ownerDigest,
                                        watchTokens: watchTokens, staleNotified: false, dueAt: dueAt, circle: circle,
                                        e2e: e2e?.keys)
    }
}

extension JournalRecord {
    /// The record after a successful create, update or delete: the pin as the hub now holds it,
    /// or its removal when the hub no longer holds it. (Not for votes: see `afterVote`.)
    public static func pinState(_ id: PinID, in hub: MapHub) -> JournalRecord {
        if let pin = hub.store[id] { return .pinPut(pin) }
        return .pinRemove(id)
    }

    /// The record of a vote: the vote itself when it changed the counts, the pin's removal when
    /// it flagged it away, nothing when it changed nothing (so nothing is written or synced).
    public static func afterVote(_ vote: VoteOutcome) -> JournalRecord? {
        switch vote.change {
        case .unchanged: return nil
        case .counted: return .pinVote(vote.pin.id, voter: vote.voter, value: vote.value)
        case .flagged: return .pinRemove(vote.pin.id)
        }
    }

    /// The record for a stream the hub has just started.
    public static func panicStart(_ stream: PanicStream) -> JournalRecord {
        .panicStart(PanicStartRecord(stream))
    }

    /// The record of a stream's newest event, after `update`, `setStatus` or `end` succeeded.
    /// Journaling it when nothing changed (a status set to the status it had) is harmless: replay
    /// skips a seq it holds already.
    public static func latestEvent(of stream: PanicStream) -> JournalRecord? {
        stream.latestEvent.map { .panicEvent(stream.id, $0) }
    }
}

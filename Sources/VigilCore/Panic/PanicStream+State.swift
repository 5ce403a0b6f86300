/// Durable state for panic streams: the parts a snapshot or journal keeps, a way to rebuild a
/// stream from them, and the replay of journaled changes.
///
/// Everything here checks its input instead of trusting it: the parts come from files, and a
/// stream that broke an invariant (non-contiguous history, a seq about to overflow) would trap
/// later in `record` or `PanicHistory.append`.
extension PanicStream {
    /// Times (unix ms) and seqs a restored stream may hold: ±2^53, far beyond any real clock, and
    /// far enough from the integer limits that `at + staleAfterMs` and `seq + 1` cannot overflow.
    public static let restorableMagnitude: Int64 = 1 << 53

    /// Digest of the owner token, for the state encoder (the token itself is never stored).
    public var ownerTokenDigest: TokenDigest { ownerDigest }

    /// Digests of the live watch tokens, in the order they were issued.
    public var watchTokenDigests: [TokenDigest] { watchTokens }

    /// Whether watchers were told of the current silence (persisted, so a restart does not tell
    /// them twice).
    public var isStaleNotified: Bool { staleNotified }

    /// The stream's newest event (the one with seq `seq`), which a journal records after each
    /// location, status change or end. Nil never happens for a stream built by the hub or by
    /// `restored`: both hold at least the newest event.
    public var latestEvent: PanicEvent? {
        history.event(seq: seq)
    }

    /// A stream rebuilt from its persisted parts, with no owner connection and no watchers
    /// (connections do not survive a restart: the phone resumes, contacts watch again with `since`).
    ///
    /// `history` is the held window, oldest first: contiguous seqs ending at `seq`, at most
    /// `historyCapacity` of them. `missedCheckInSentAt` nil with `missedCheckInAt` set (a
    /// snapshot from before it was kept) reads as sent at its time. `circle`: the check-in circle
    /// it was started for (nil: none, as for every stream kept before circles had streams). Throws when the parts
    /// contradict each other or the limits above.
    public static func restored(id: StreamID, status: PanicStatus, startedAt: Int64, updatedAt: Int64, seq: UInt64,
                                lastLocation: PanicLocation, lastLocationAt: Int64, note: String?,
                                ended: (reason: PanicEndReason, at: Int64)?, history events: [PanicEvent], historyCapacity: Int,
                                ownerDigest: TokenDigest, watchTokens: [TokenDigest], staleNotified: Bool,
                                dueAt: Int64? = nil, missedCheckInAt: Int64? = nil,
                                missedCheckInSentAt: Int64? = nil, circle: CircleID? = nil) throws(PanicRestoreError) -> PanicStream {
        try restored(id: id, status: status, startedAt: startedAt, updatedAt: updatedAt, seq: seq,
                     last: LastLocation(location: lastLocation, at: lastLocationAt), note: note, ended: ended, history: events,
                     historyCapacity: historyCapacity, ownerDigest: ownerDigest, watchTokens: watchTokens, staleNotified: staleNotified,
                     dueAt: dueAt, missedCheckInAt: missedCheckInAt, missedCheckInSentAt: missedCheckInSentAt, circle: circle)
    }

    /// `restored`, for any stream: `last` a clear or a sealed position, `e2e` the keys of an
    /// end-to-end encrypted stream (nil: clear). An e2e stream holds no clear location, no note,
    /// and only sealed points (its `last` among them); a clear one no sealed point.
    public static func restored(id: StreamID, status: PanicStatus, startedAt: Int64, updatedAt: Int64, seq: UInt64,
                                last: LastLocation, note: String?,
                                ended: (reason: PanicEndReason, at: Int64)?, history events: [PanicEvent], historyCapacity: Int,
                                ownerDigest: TokenDigest, watchTokens: [TokenDigest], staleNotified: Bool,
                                dueAt: Int64? = nil, missedCheckInAt: Int64? = nil,
                                missedCheckInSentAt: Int64? = nil, circle: CircleID? = nil,
                                e2e: E2EKeys? = nil) throws(PanicRestoreError) -> PanicStream {
        let lastLocationAt = last.at
        guard historyCapacity >= 1 else { throw .invalidHistoryCapacity(historyCapacity) }
        guard seq >= 1, seq <= UInt64(restorableMagnitude) else { throw .seqOutOfRange(seq) }
        for time in [startedAt, updatedAt, lastLocationAt, ended?.at ?? 0, dueAt ?? 0, missedCheckInAt ?? 0, missedCheckInSentAt ?? 0] {
            guard Self.isRestorableTime(time) else { throw .timeOutOfRange(time) }
        }
        switch (missedCheckInAt, missedCheckInSentAt) {
        case (nil, _?): throw .escalationSentAtWithoutEscalation
        case (let at?, let sentAt?) where sentAt < at: throw .escalationSentBeforeItsTime(at: at, sentAt: sentAt)
        default: break
        }
        guard Self.isRestorable(last.position, e2e: e2e != nil, seq: seq) else { throw .invalidLocation }
        if e2e != nil && note != nil { throw .e2eMismatch }
        if ended != nil && dueAt != nil { throw .timerAfterEnd }
        guard let newest = events.last else { throw .emptyHistory }
        guard events.count <= historyCapacity else { throw .historyOverCapacity(count: events.count, capacity: historyCapacity) }
        guard newest.seq == seq else { throw .historyNotAtSeq(newest: newest.seq, seq: seq) }
        guard UInt64(events.count) <= seq else { throw .historyNotContiguous }
        var history = PanicHistory(capacity: historyCapacity)
        var expected = seq - UInt64(events.count) + 1
        for event in events {
            // Checked here because `append` traps on a gap.
            guard event.seq == expected else { throw .historyNotContiguous }
            guard Self.isRestorableTime(event.at) else { throw .timeOutOfRange(event.at) }
            guard Self.isRestorable(event.kind) else { throw .invalidLocation }
            guard Self.fits(event.kind, e2e: e2e != nil) else { throw .e2eMismatch }
            if case .missedCheckIn(_, _, let sentAt) = event.kind, sentAt < event.at {
                throw .escalationSentBeforeItsTime(at: event.at, sentAt: sentAt)
            }
            if case .ended = event.kind, event.seq != seq { throw .eventAfterEnd }
            history.append(event)
            expected += 1
        }
        // `ended` and the newest event must agree: `record` refuses events only when `ended` is set.
        switch (ended, newest.kind) {
        case (nil, .ended), (_?, .location), (_?, .sealedLocation), (_?, .status), (_?, .timer), (_?, .missedCheckIn):
            throw .endMismatch
        case (let end?, .ended(let reason)) where end.reason != reason || end.at != newest.at:
            throw .endMismatch
        default:
            break
        }
        // The origin's point is replaced by `last` and `history` below.
        let origin: PanicOrigin
        switch last.position {
        case .clear(let location): origin = .clear(location, note: note)
        case .sealed(let point, _): origin = .e2e(E2EStart(keys: e2e ?? E2EKeys(kid: point.kid, boxes: []), sealed: point.sealed))
        }
        var stream = PanicStream(id: id, status: status, origin: origin, ownerDigest: ownerDigest,
                                 watchTokens: watchTokens, owner: 0, now: startedAt, historyEvents: historyCapacity)
        stream.owner = nil
        stream.updatedAt = updatedAt
        stream.seq = seq
        stream.last = last
        stream.ended = ended.map { PanicEnd(reason: $0.reason, at: $0.at) }
        stream.history = history
        stream.staleNotified = staleNotified
        stream.dueAt = dueAt
        stream.missedCheckInAt = missedCheckInAt
        stream.missedCheckInSentAt = missedCheckInAt.map { missedCheckInSentAt ?? $0 }
        stream.circle = circle
        return stream
    }

    /// Applies a journaled event: the next seq is recorded exactly as it was (same kind, same
    /// time); a seq already held is skipped (`alreadyApplied`), so replaying a record twice is
    /// harmless; anything else (a gap, an ended stream, a bad value) is refused and changes nothing.
    public mutating func replay(_ event: PanicEvent) -> PanicReplayOutcome {
        if event.seq <= seq { return .alreadyApplied }
        guard ended == nil else { return .refused("stream \(id) ended at seq \(seq); event seq \(event.seq) comes after its end") }
        guard event.seq == seq + 1 else { return .refused("stream \(id) is at seq \(seq); event seq \(event.seq) leaves a gap") }
        guard Self.isRestorableTime(event.at) else { return .refused("stream \(id) event seq \(event.seq) has time \(event.at) out of range") }
        guard Self.isRestorable(event.kind), Self.fits(event.kind, e2e: isE2E) else {
            return .refused("stream \(id) event seq \(event.seq) has an invalid location or time, or a location of the other kind (clear, sealed)")
        }
        guard Self.isInOrder(event) else { return .refused("stream \(id) event seq \(event.seq) is an escalation sent before its time") }
        _ = record(event.kind, now: event.at)
        return .applied
    }

    /// Replaces an e2e stream's keys with a journaled rekey's. False when it holds them already
    /// (a replayed record) or is not end-to-end encrypted (a clear stream takes no keys).
    @discardableResult
    public mutating func replayRekey(_ keys: E2EKeys) -> Bool {
        guard isE2E, e2e != keys else { return false }
        e2e = keys
        return true
    }

    /// Adds a journaled invitation's token digest. False when it is live already (a replayed record).
    @discardableResult
    public mutating func replayInvite(_ digest: TokenDigest) -> Bool {
        guard watchTokenIndex(digest) == nil else { return false }
        watchTokens.append(digest)
        return true
    }

    /// Removes a journaled revocation's token digest, and any watcher using it. False when the
    /// token was not live (revoking is idempotent, as in the hub).
    @discardableResult
    public mutating func replayRevoke(_ digest: TokenDigest) -> Bool {
        guard let index = watchTokenIndex(digest) else { return false }
        watchTokens.remove(at: index)
        watchers = watchers.filter { !$0.value.matches(digest) }
        return true
    }

    static func isRestorableTime(_ time: Int64) -> Bool {
        time >= -restorableMagnitude && time <= restorableMagnitude
    }

    /// An event's location (if it has one) as `isRestorable(_: PanicLocation)` wants it, and its
    /// times in range.
    static func isRestorable(_ kind: PanicEventKind) -> Bool {
        switch kind {
        case .location(let location): return isRestorable(location)
        case .sealedLocation, .status, .ended: return true
        case .timer(let due): return isRestorableTime(due ?? 0)
        case .missedCheckIn(let due, let last, let sentAt):
            guard isRestorableTime(due), isRestorableTime(last.at), isRestorableTime(sentAt) else { return false }
            switch last.position {
            case .clear(let location): return isRestorable(location)
            case .sealed(_, let seq): return seq >= 1 && seq <= UInt64(restorableMagnitude)
            }
        }
    }

    /// A stream's last position: of its kind (sealed exactly when the stream is e2e), and a sealed
    /// one sealed for a seq the stream has reached.
    static func isRestorable(_ position: PanicPosition, e2e: Bool, seq: UInt64) -> Bool {
        switch position {
        case .clear(let location): return !e2e && isRestorable(location)
        case .sealed(_, let sealedSeq): return e2e && sealedSeq >= 1 && sealedSeq <= seq
        }
    }

    /// Whether an event's location (if it has one, the escalation's `last` too) is of the
    /// stream's kind: an e2e stream holds no coordinates, a clear one no sealed point.
    static func fits(_ kind: PanicEventKind, e2e: Bool) -> Bool {
        switch kind {
        case .location: return !e2e
        case .sealedLocation: return e2e
        case .missedCheckIn(_, let last, _): return (last.clearLocation == nil) == e2e
        case .status, .ended, .timer: return true
        }
    }

    /// An escalation is sent at or after its own time (`PanicHub.escalation` takes the later of
    /// the clock and the event's time); every other event is in order by itself.
    static func isInOrder(_ event: PanicEvent) -> Bool {
        guard case .missedCheckIn(_, _, let sentAt) = event.kind else { return true }
        return sentAt >= event.at
    }

    /// Coordinates in range and the optional readings finite: what the request decoder admits.
    static func isRestorable(_ location: PanicLocation) -> Bool {
        guard location.lat.isFinite, location.lon.isFinite, (-90...90).contains(location.lat), (-180...180).contains(location.lon) else { return false }
        return [location.accuracyM, location.heading, location.speedMps].allSatisfy { $0?.isFinite ?? true }
    }
}

/// What replaying one journaled event did.
public enum PanicReplayOutcome: Equatable, Sendable {
    case applied
    /// The stream holds this seq already: the record was replayed before (or is in the snapshot).
    case alreadyApplied
    /// The event does not follow the stream's state; the reason is for the log.
    case refused(String)
}

/// Why persisted parts do not make a stream. Each case names the broken rule, for the log.
public enum PanicRestoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidHistoryCapacity(Int)
    case seqOutOfRange(UInt64)
    case timeOutOfRange(Int64)
    case invalidLocation
    case emptyHistory
    case historyOverCapacity(count: Int, capacity: Int)
    case historyNotAtSeq(newest: UInt64, seq: UInt64)
    case historyNotContiguous
    case eventAfterEnd
    case endMismatch
    case timerAfterEnd
    case escalationSentAtWithoutEscalation
    case escalationSentBeforeItsTime(at: Int64, sentAt: Int64)
    /// A clear location or a note in an end-to-end encrypted stream, or a sealed point in a clear one.
    case e2eMismatch

    public var description: String {
        switch self {
        case .invalidHistoryCapacity(let n): return "history capacity \(n) is below 1"
        case .seqOutOfRange(let s): return "seq \(s) is outside 1...2^53"
        case .timeOutOfRange(let t): return "time \(t) ms is outside ±2^53"
        case .invalidLocation: return "a location has coordinates out of range or a reading that is not finite"
        case .emptyHistory: return "history is empty (a stream always holds its newest event)"
        case .historyOverCapacity(let count, let capacity): return "history holds \(count) events, more than its capacity \(capacity)"
        case .historyNotAtSeq(let newest, let seq): return "newest history event has seq \(newest), the stream is at seq \(seq)"
        case .historyNotContiguous: return "history seqs are not contiguous"
        case .eventAfterEnd: return "history has events after an end"
        case .endMismatch: return "the stream's end does not match its newest event"
        case .timerAfterEnd: return "an ended stream has a safety timer"
        case .escalationSentAtWithoutEscalation: return "the stream has an escalation's sent time but no escalation"
        case .escalationSentBeforeItsTime(let at, let sentAt): return "an escalation at \(at) ms was sent before it, at \(sentAt) ms"
        case .e2eMismatch: return "an end-to-end encrypted stream holds a clear location or note, or a clear stream a sealed point"
        }
    }
}

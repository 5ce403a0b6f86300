import VigilCore
import VigilState

/// The `panic.*` operations (docs/PROTOCOL.md, "Panic-location streams").
///
/// A `stream` that is not a well-formed stream id (decoded as nil) gets the same `forbidden` as
/// a wrong token, so an answer never tells whether a stream exists. The owner connection steers
/// its stream without a token; anyone else needs the owner token.
extension V1Application {
    private static let forbidden = Outcome(.error(.from(PanicFailure.forbidden)))

    /// Counted against the caller's address (starts per hour, open streams). Once the reserved
    /// share of capacity is all that is left, only an address with no idle stream may start one
    /// (`PanicSettings.reservedShare`): an address that started streams and never updates them
    /// cannot take the last places from a person in danger.
    ///
    /// With `circle`, the stream is the circle's (its members are the standing contacts): the
    /// circle's owner token is checked first (a wrong one, or an unknown circle, is `forbidden`
    /// and spends no budget), and the circle's listeners hear of the start with its reply.
    func startStream(_ caller: Caller, status: PanicStatus, origin: PanicOrigin, watchers: Int,
                     timer: PanicTimer?, circle: CircleToken?, now: Int64) -> Outcome {
        if let circle {
            guard let id = circle.circle, checkin.isOwner(id, ownerToken: circle.token, secrets: secrets) else {
                return Outcome(.error(.from(CheckinFailure.forbidden)))
            }
        }
        if let refused = admit(budgets.admitPanicStart(caller.address, now: caller.monotonicMs), rate: .addressPanicStarts) { return refused }
        let eligible = !panic.hasIdleStream(among: budgets.openStreams(of: caller.address), now: now)
        switch panic.start(owner: caller.fd, status: status, origin: origin, watchers: watchers,
                           timer: timer, circle: circle?.circle, reserveEligible: eligible, secrets: secrets, now: now, out: &scratch.panic) {
        case .success(let started):
            budgets.streamStarted(started.stream.id, by: caller.address, now: caller.monotonicMs)
            if let id = started.stream.circle {
                checkin.tell(.started(started.stream), of: id, out: &scratch.checkin)
                notify(.panicStarted(started.stream, circle: id, ttlMs: noticeTTLMs))
            }
            return Outcome(.panicStarted(stream: started.stream.id, seq: started.stream.seq,
                                         ownerToken: started.ownerToken, watchTokens: started.watchTokens,
                                         dueAt: started.stream.dueAt, circle: started.stream.circle),
                           record: .panicStart(started.stream), undo: .streamStarted(started.stream.id))
        case .failure(let failure):
            if failure == .capacityExceeded { stats.refused(.panicCapacity) }
            if failure == .reserveOnly { stats.refused(.panicReserve) }
            return Outcome(.error(.from(failure)))
        }
    }

    func updateStream(_ stream: StreamID?, by me: Int32, token: String?, location: PanicLocation, now: Int64) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        return newestEvent(of: stream, before, panic.update(stream, by: me, ownerToken: token, location: location,
                                                            secrets: secrets, now: now, out: &scratch.panic))
    }

    /// A sealed location of an end-to-end encrypted stream (`seq_mismatch`, `not_e2e` as the hub judges).
    func updateStreamSealed(_ stream: StreamID?, by me: Int32, token: String?, update: SealedUpdate, now: Int64) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        return newestEvent(of: stream, before, panic.updateSealed(stream, by: me, ownerToken: token, update: update,
                                                                  secrets: secrets, now: now, out: &scratch.panic))
    }

    /// `panic.rekey`: the e2e stream's new keys, journaled; the reply is the stream's seq (unchanged).
    func rekeyStream(_ stream: StreamID?, by me: Int32, token: String?, keys: E2EKeys) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream, keepingWatchers: true)
        switch panic.rekey(stream, by: me, ownerToken: token, keys: keys, secrets: secrets, out: &scratch.panic) {
        case .success(let seq):
            return Outcome(.seq(seq), record: .panicRekey(stream, keys), undo: before.map { .stream($0) })
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    /// The status it already has is not a change: `ok` with the current seq, and nothing journaled
    /// (so nothing fsynced).
    func setStreamStatus(_ stream: StreamID?, by me: Int32, token: String?, status: PanicStatus, now: Int64) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        let change: Result<PanicChange, PanicFailure> = panic.setStatus(stream, by: me, ownerToken: token, status: status,
                                                                       secrets: secrets, now: now, out: &scratch.panic)
        switch change {
        case .success(let c): return Outcome(.seq(c.seq), record: c.event.map { .panicEvent(stream, $0) }, undo: before.map { .stream($0) })
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }

    /// The safety timer set, moved or cancelled: an event (journaled, to every watcher) unless it
    /// changed nothing.
    func setStreamTimer(_ stream: StreamID?, by me: Int32, token: String?, timer: PanicTimer, now: Int64) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        switch panic.setTimer(stream, by: me, ownerToken: token, timer: timer, secrets: secrets, now: now, out: &scratch.panic) {
        case .success(let c):
            return Outcome(.timer(seq: c.seq, dueAt: panic.stream(stream)?.dueAt), record: c.event.map { .panicEvent(stream, $0) },
                           undo: before.map { .stream($0) })
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    func endStream(_ stream: StreamID?, caller: Caller, token: String?, reason: PanicEndReason, now: Int64) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        let outcome = newestEvent(of: stream, before, panic.end(stream, by: caller.fd, ownerToken: token, reason: reason,
                                                        secrets: secrets, now: now, out: &scratch.panic))
        if outcome.record != nil {
            budgets.streamEnded(stream, now: caller.monotonicMs)
            if let s = panic.stream(stream), let event = s.latestEvent { tellCircle(event, of: s) }
        }
        return outcome
    }

    /// An escalation or end of a stream started for a circle, to the circle's listeners
    /// (`checkin.panic`) and, as a notice, to the members' subscriptions; nothing for any other
    /// event or stream. (A start is told by `startStream`.) `fromTick`: the tick's own change.
    func tellCircle(_ event: PanicEvent, of stream: PanicStream, fromTick: Bool = false) {
        guard let circle = stream.circle, let news = CirclePanic.of(event, in: stream) else { return }
        checkin.tell(news, of: circle, out: &scratch.checkin)
        switch event.kind {
        case .missedCheckIn: notify(.panicEscalated(stream, circle: circle, at: event.at, ttlMs: noticeTTLMs), fromTick: fromTick)
        case .ended: notify(.panicEnded(stream, circle: circle, at: event.at, ttlMs: noticeTTLMs), fromTick: fromTick)
        default: break
        }
    }

    /// The reply `seq`, and the record of the stream's newest event after an update, status or end
    /// (`before`: the stream's checkpoint before it, to take it back).
    private func newestEvent(of stream: StreamID, _ before: PanicHub.Checkpoint?, _ result: Result<UInt64, PanicFailure>) -> Outcome {
        guard case .success = result, let s = panic.stream(stream) else { return Outcome(.from(result)) }
        return Outcome(.from(result), record: JournalRecord.latestEvent(of: s), undo: before.map { .stream($0) })
    }

    /// The phone is back: it owns the stream again, and learns at once how many contacts watch.
    func resumeStream(_ stream: StreamID?, by me: Int32, token: String) -> Outcome {
        guard let stream else { return Self.forbidden }
        switch panic.resume(stream, by: me, ownerToken: token, secrets: secrets) {
        case .success(let s):
            scratch.panic.append(PanicDelivery(stream: stream, kind: .watchers(count: panic.watcherCount(stream)), recipients: [me]))
            return Outcome(.panicState(s, gap: false))
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    /// A contact watches; with `since`, the events it missed follow the reply, in order, before
    /// any live one: a replay paced by the watcher's reading, never conflated (`V1Application+Replay`).
    func watchStream(_ stream: StreamID?, watcher me: Int32, token: String, since: UInt64?) -> Outcome {
        guard let stream else { return Self.forbidden }
        return watched(stream, watcher: me, panic.watch(stream, watcher: me, watchToken: token, since: since, secrets: secrets,
                                                          out: &scratch.panic))
    }

    /// The reply to a watch, and its replay queued.
    private func watched(_ stream: StreamID, watcher me: Int32, _ result: Result<PanicWatch, PanicFailure>) -> Outcome {
        switch result {
        case .success(let watch):
            replication?.watchersChanged(stream)
            // Always, also without a replay: a watch answered again ends any replay still going.
            scratch.replays.append((me, stream, watch.replay))
            return Outcome(.panicState(watch.stream, gap: watch.gap, box: watch.box))
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    /// A member of the circle the stream was started for watches, with its member token: the
    /// checkin hub says whether the token is a live member of the stream's circle, the panic hub
    /// registers the watcher under it (so revoking the member cuts it). A stream of no circle, a
    /// circle closed since, a revoked or wrong token: `forbidden`, as a wrong watch token.
    func watchStreamAsMember(_ stream: StreamID?, watcher me: Int32, token: String, since: UInt64?) -> Outcome {
        let circle = stream.flatMap { panic.stream($0)?.circle }
        let member = checkin.liveMember(circle, memberToken: token, secrets: secrets)   // hashed whatever the stream
        guard let stream, let circle, let member else { return Self.forbidden }
        return watched(stream, watcher: me, panic.watch(stream, watcher: me, asMember: member.tokenDigest, number: member.id,
                                                          of: circle, since: since, out: &scratch.panic))
    }

    /// Not watching (any more) is the goal, so a malformed or unknown stream is fine too.
    func unwatchStream(_ stream: StreamID?, watcher me: Int32) -> Outcome {
        if let stream {
            panic.unwatch(stream, watcher: me, out: &scratch.panic)
            replication?.watchersChanged(stream)
        }
        return Outcome(.ok)
    }

    func inviteToStream(_ stream: StreamID?, by me: Int32, token: String?) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream)
        switch panic.invite(stream, by: me, ownerToken: token, secrets: secrets) {
        case .success(let watchToken):
            return Outcome(.watchToken(watchToken), record: .panicInvite(stream, secrets.digest(ofToken: watchToken)),
                           undo: before.map { .stream($0) })
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    func revokeFromStream(_ stream: StreamID?, by me: Int32, token: String?, watchToken: String) -> Outcome {
        guard let stream else { return Self.forbidden }
        let before = panic.checkpoint(stream, keepingWatchers: true)
        switch panic.revoke(stream, by: me, ownerToken: token, watchToken: watchToken, secrets: secrets, out: &scratch.panic) {
        case .success(.revoked):
            replication?.watchersChanged(stream)
            return Outcome(.ok, record: .panicRevoke(stream, secrets.digest(ofToken: watchToken)), undo: before.map { .stream($0) })
        case .success(.notLive):
            return Outcome(.ok)  // nothing changed: nothing to journal, nothing to fsync
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }
}

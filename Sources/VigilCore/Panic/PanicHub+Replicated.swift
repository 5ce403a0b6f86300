/// Panic streams changed by a record of the replicated log (docs/CLUSTER.md, "The replicated log
/// (design)"): every node applies the record in stream order, with the timers and deliveries the
/// hub's own operation (`start`, `update`, `setStatus`, `setTimer`, `end`, `revoke`, and `tick`'s
/// escalation, abandonment and removal) would have made. Nothing here checks a token: the writer
/// did, before it published the record. What is checked is what two writers racing on one stream
/// could break: an event applies only as the stream's next seq.
extension PanicHub {
    /// `panicStart`: the stream as the record rebuilds it (`PanicStartRecord.stream()`), owned by
    /// `owner` (the writer's own connection on the writer's node, nil elsewhere: the phone is not
    /// connected there). Capacity is not checked: the writer checked it, and a node must not
    /// refuse a stream another node acknowledged (its count may differ for a moment, while it
    /// removes streams past their grace on its own clock).
    public mutating func applyReplicatedStart(_ started: PanicStream, owner: WatcherID?) -> ReplicatedOutcome {
        guard streams[started.id] == nil else { return .duplicate }
        var stream = started
        stream.owner = owner
        stream.watchers = [:]
        stream.memberWatchers = [:]
        stream.staleArmed = stream.isActive
        insert(stream)
        if let owner { owning[owner, default: []].insert(stream.id) }
        // As `start` files them, from the stream's own times (its `now` was `startedAt`).
        if let end = stream.ended {
            fileGrace(at: Self.saturatingSum(end.at, settings.endedGraceMs), stream.id)
        } else {
            fileStale(at: Self.saturatingSum(stream.lastLocationAt, settings.staleAfterMs), stream.id)
            fileAbandon(at: Self.saturatingSum(stream.updatedAt, settings.abandonAfterMs), stream.id)
            if let due = stream.dueAt { fileTimer(at: due, stream.id) }
        }
        return .applied
    }

    /// `panicEvent`: the stream's next seq, recorded as the writer recorded it (kind and time),
    /// delivered as the operation that made it delivers it: an escalation (`missedCheckIn`) to the
    /// watchers and the owner, anything else to the watchers. A seq the stream holds already is a
    /// duplicate when the held event is this one (an escalation: but for its `sentAt`, see
    /// `PanicEvent.isSameChange`); any other seq is a writer that validated against a stream that
    /// has moved on since.
    public mutating func applyReplicatedEvent(_ id: StreamID, _ event: PanicEvent, out: inout [PanicDelivery]) -> ReplicatedOutcome {
        guard let stream = streams[id] else { return .conflict("the stream is gone") }
        if event.seq <= stream.seq {
            let held = stream.history.event(seq: event.seq)
            return held?.isSameChange(as: event) == true ? .duplicate : .conflict("the stream moved on")
        }
        guard event.seq == stream.seq + 1 else { return .conflict("the stream moved on") }
        guard stream.isActive else { return .conflict("the stream has ended") }
        guard PanicStream.isRestorableTime(event.at), PanicStream.isRestorable(event.kind), PanicStream.fits(event.kind, e2e: stream.isE2E) else {
            return .conflict("the event has a location or time out of range, or a location of the other kind (clear, sealed)")
        }
        guard PanicStream.isInOrder(event) else { return .conflict("the escalation was sent before its time") }
        var needsStaleEntry = false
        withStream(id) { stream in
            let recorded = stream.record(event.kind, now: event.at)
            switch recorded.kind {
            case .location, .sealedLocation:
                needsStaleEntry = !stream.staleArmed      // as `update`: one stale entry at a time
                stream.staleArmed = true
                Self.deliver(recorded, of: stream, out: &out)
            case .missedCheckIn:
                Self.deliverEscalation(recorded, of: stream, out: &out)
            case .status, .ended, .timer:
                Self.deliver(recorded, of: stream, out: &out)
            }
        }
        switch event.kind {
        case .location, .sealedLocation:
            if needsStaleEntry { fileStale(at: Self.saturatingSum(event.at, settings.staleAfterMs), id) }
        case .ended:
            // `end` and tick's abandonment both count the grace from the event's time.
            fileGrace(at: Self.saturatingSum(event.at, settings.endedGraceMs), id)
        case .timer(let due?):
            fileTimer(at: due, id)
        case .timer(nil), .status, .missedCheckIn:
            break
        }
        return .applied
    }

    /// `panicInvite`: one more live watch token, as `invite` adds it (refused on an ended stream
    /// and past `maxWatchTokens`, which a racing invitation may have reached first).
    public mutating func applyReplicatedInvite(_ id: StreamID, _ digest: TokenDigest) -> ReplicatedOutcome {
        guard let stream = streams[id] else { return .conflict("the stream is gone") }
        if stream.watchTokenIndex(digest) != nil { return .duplicate }
        guard stream.isActive else { return .conflict("the stream has ended") }
        guard stream.watchTokens.count < settings.maxWatchTokens else { return .conflict("the stream has its maximum of watch tokens") }
        withStream(id) { $0.watchTokens.append(digest) }
        return .applied
    }

    /// `panicRevoke`, as `revoke` does it: the token dies, the watchers using it are told
    /// (`revoked`) and stop watching, the owner hears the new count. A token not live (revoked
    /// already, or the stream gone) is a duplicate: revoking is idempotent.
    public mutating func applyReplicatedRevoke(_ id: StreamID, _ digest: TokenDigest, out: inout [PanicDelivery]) -> ReplicatedOutcome {
        var cut: [WatcherID] = []
        let revoked = withStream(id) { stream -> Bool in
            guard let killed = Self.killWatchToken(digest, of: &stream, out: &out) else { return false }
            cut = killed
            return true
        }
        for watcher in cut { Self.unindex(&watching, watcher, id) }
        return revoked == true ? .applied : .duplicate
    }

    /// `panicRekey`: the e2e stream's new keys, as `rekey` sets them (its watchers told). The
    /// keys it holds already are a duplicate; a clear or an ended stream, a conflict.
    public mutating func applyReplicatedRekey(_ id: StreamID, _ keys: E2EKeys, out: inout [PanicDelivery]) -> ReplicatedOutcome {
        guard let stream = streams[id] else { return .conflict("the stream is gone") }
        guard stream.isE2E else { return .conflict("the stream is not end-to-end encrypted") }
        if stream.e2e == keys { return .duplicate }
        guard stream.isActive else { return .conflict("the stream has ended") }
        withStream(id) { Self.rekey(&$0, keys, out: &out) }
        return .applied
    }

    /// `panicRemove`: the stream goes with its trail and tokens, silently, as when `tick` removes
    /// it after its grace (its watchers were sent `ended` already). Not added to the removals
    /// `tick` hands back: this one is in the log already.
    public mutating func applyReplicatedRemove(_ id: StreamID) -> ReplicatedOutcome {
        guard let stream = removeStream(id) else { return .duplicate }
        for watcher in stream.watchers.keys { Self.unindex(&watching, watcher, id) }
        if let owner = stream.owner { Self.unindex(&owning, owner, id) }
        return .applied
    }
}

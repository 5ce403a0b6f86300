/// Taking back a change the server could not record (docs/DURABILITY.md, "When the disk fails").
/// None of these produce deliveries: the change's own events were never sent.
extension PanicHub {
    /// A stream's durable state before a change, small and cheap to take: every field a change can
    /// set, and a mark of its history instead of the history (holding the history would make the
    /// change copy all of it). Who owns and who watches is not in it: other requests of the same
    /// turn may change that, and taking a change back leaves it as it is then.
    public struct Checkpoint: Sendable {
        let id: StreamID
        let status: PanicStatus
        let updatedAt: Int64
        let seq: UInt64
        let last: LastLocation
        let ended: PanicEnd?
        let watchTokens: [TokenDigest]
        let staleNotified: Bool
        let staleArmed: Bool
        let dueAt: Int64?
        /// An e2e stream's keys (a rekey replaces them).
        let e2e: E2EKeys?
        let history: PanicHistory.Mark
        /// For a revocation: the watchers before it, to give back the watch it cut.
        let watchers: [WatcherID: TokenDigest]?
    }

    /// Stream `id`'s checkpoint (nil when there is no such stream: a change to it fails).
    /// `keepingWatchers` for a revocation, which cuts watchers off.
    public func checkpoint(_ id: StreamID, keepingWatchers: Bool = false) -> Checkpoint? {
        guard let s = streams[id] else { return nil }
        return Checkpoint(id: id, status: s.status, updatedAt: s.updatedAt, seq: s.seq, last: s.last, ended: s.ended,
                          watchTokens: s.watchTokens, staleNotified: s.staleNotified, staleArmed: s.staleArmed,
                          dueAt: s.dueAt, e2e: s.e2e, history: s.history.mark, watchers: keepingWatchers ? s.watchers : nil)
    }

    /// Puts a stream back at `checkpoint`, taken just before one change (changes of one turn are
    /// taken back newest first, so each finds the stream as its own change left it). The watchers
    /// an undone revocation cut watch again if `connected` says they still are (they were never
    /// told of it).
    ///
    /// Timers: an entry filed for the undone change stays in its heap and is checked against the
    /// stream when it comes due, like any outdated entry; a stream active again gets fresh stale
    /// and abandonment entries (at most one extra of each, gone when it ends), and a timer put
    /// back gets an entry again (a duplicate is skipped once the timer has fired).
    public mutating func revert(to checkpoint: Checkpoint, connected: (WatcherID) -> Bool) {
        let id = checkpoint.id
        var rewatched: [WatcherID] = []
        let wasEnded = withStream(id) { stream -> Bool in
            let wasEnded = stream.ended != nil
            if stream.seq == checkpoint.seq + 1 { stream.history.undoAppend(checkpoint.history) }
            stream.status = checkpoint.status
            stream.updatedAt = checkpoint.updatedAt
            stream.seq = checkpoint.seq
            stream.last = checkpoint.last
            stream.ended = checkpoint.ended
            stream.watchTokens = checkpoint.watchTokens
            stream.staleNotified = checkpoint.staleNotified
            stream.staleArmed = checkpoint.staleArmed
            stream.dueAt = checkpoint.dueAt
            stream.e2e = checkpoint.e2e
            for (watcher, digest) in checkpoint.watchers ?? [:] where stream.watchers[watcher] == nil && connected(watcher) {
                stream.watchers[watcher] = digest
                rewatched.append(watcher)
            }
            return wasEnded
        }
        guard let wasEnded else { return }  // removed since (its grace): nothing to undo
        for watcher in rewatched { watching[watcher, default: []].insert(id) }
        if wasEnded && checkpoint.ended == nil, let stream = streams[id] {
            if stream.staleArmed { fileStale(at: Self.saturatingSum(stream.lastLocationAt, settings.staleAfterMs), id) }
            fileAbandon(at: Self.saturatingSum(stream.updatedAt, settings.abandonAfterMs), id)
        }
        // The timer it had again: its entry may have gone when the heap was rebuilt since.
        if let stream = streams[id], stream.isActive, let due = stream.dueAt { fileTimer(at: due, id) }
    }

    /// Removes a stream that a change of this turn started.
    public mutating func revertStart(_ id: StreamID) {
        guard let stream = removeStream(id) else { return }
        for watcher in stream.watchers.keys { Self.unindex(&watching, watcher, id) }
        if let owner = stream.owner { Self.unindex(&owning, owner, id) }
    }
}

/// Taking back a change the server could not record (docs/DURABILITY.md, "When the disk fails").
extension PanicHub {
    /// Puts stream `id` back as it was before a change of this turn (`before`; nil when the change
    /// started it). Produces no deliveries: the change's own events were never sent.
    ///
    /// Only the durable part goes back (status, seq, history, times, tokens). Who owns and who
    /// watches stays as it is now, since other requests of the same turn may have changed it
    /// (a watch, a close), except that when an undone revocation cut watchers off, those that
    /// `rewatch` says are still connected watch again (they were never told of the revocation).
    ///
    /// Timers: an entry filed for the undone change stays in its heap and is checked against
    /// the stream when it comes due, like any outdated entry; a stream that is active again gets
    /// fresh stale and abandonment entries (at most one extra of each, gone when it ends).
    public mutating func revertStream(_ id: StreamID, to before: PanicStream?, rewatch: ((WatcherID) -> Bool)? = nil) {
        guard let current = streams[id] else { return }  // removed since (its grace): nothing to undo
        guard var restored = before else {
            streams[id] = nil
            for watcher in current.watchers.keys { Self.unindex(&watching, watcher, id) }
            if let owner = current.owner { Self.unindex(&owning, owner, id) }
            return
        }
        let watchedBefore = restored.watchers
        restored.owner = current.owner
        restored.watchers = current.watchers
        if let rewatch {
            for (watcher, digest) in watchedBefore where current.watchers[watcher] == nil && rewatch(watcher) {
                restored.watchers[watcher] = digest
                watching[watcher, default: []].insert(id)
            }
        }
        streams[id] = restored
        if restored.isActive && !current.isActive {
            if restored.staleArmed { fileStale(at: Self.saturatingSum(restored.lastLocationAt, settings.staleAfterMs), id) }
            fileAbandon(at: Self.saturatingSum(restored.updatedAt, settings.abandonAfterMs), id)
        }
    }
}

import VigilCore

/// Reading a stream's held events as arrays, for tests: the daemon reads them one at a time
/// (`PanicHistory.event(seq:)`, a `since` replay paced by the watcher), so these are built on that.
extension PanicHistory {
    /// The events with seq > `seq`, oldest first; nil unless every one of them is held
    /// (`seq + 1` dropped already). `seq` at or past the newest event gives [].
    public func events(after seq: UInt64) -> [PanicEvent]? {
        guard let first = firstSeq else { return seq == 0 ? [] : nil }
        let last = first + UInt64(count) - 1
        if seq >= last { return [] }
        guard seq + 1 >= first else { return nil }
        return ((seq + 1)...last).map { event(seq: $0)! }
    }
}

extension PanicStream {
    /// The events after `seq`, oldest first: [] when `seq` is the current seq, nil when some are no
    /// longer held or `seq` is ahead of the stream.
    public func events(after seq: UInt64) -> [PanicEvent]? {
        guard seq <= self.seq else { return nil }
        return history.events(after: seq)
    }
}

extension PanicWatch {
    /// The replayed events, read from `stream` (empty when there is no replay).
    public var events: [PanicEvent] {
        guard let replay else { return [] }
        return replay.compactMap { stream.event(seq: $0) }
    }
}

import HeapModule

/// The decisions `tick` takes on its own clock, for a node in a cluster, where each must go
/// through the replicated log once (docs/CLUSTER.md, "The replicated log (design)"): the escalation
/// of a missed safety timer, and the end of an abandoned stream. Such a node ticks with
/// `deciding: false` (stale notices and removals after the grace stay local: they follow from
/// times alone), publishes what `dueDecisions(now:)` reports, and applies each record like any
/// other (`applyReplicatedEvent`). Every event's time is its deadline, not the clock's, so nodes
/// that publish the same decision publish the same event, but for an escalation's `sentAt` (each
/// node's clock when it decided): the first to arrive applies, with its `sentAt`, on every node,
/// and the others are duplicates.
extension PanicHub {
    /// The events `tick(now:out:)` would record at `now`, in its order (escalations, then
    /// abandonments), each with the seq it would get. Changes nothing. Costs O(decisions) after a
    /// non-deciding `tick` at `now` (which sets aside the due entries), O(timers) before one.
    public func dueDecisions(now: Int64) -> [StreamEvent] {
        var decisions: [StreamEvent] = []
        var decided = Set<StreamID>()
        for entry in Self.due(undecidedTimers, timerDeadlines, by: now) where !decided.contains(entry.id) {
            guard let stream = streams[entry.id], stream.isActive, let due = stream.dueAt, due == entry.at else { continue }
            let event = PanicEvent(seq: stream.seq + 1, at: max(due, stream.updatedAt), kind: Self.escalation(of: stream, due: due, now: now))
            decisions.append(StreamEvent(stream: entry.id, event: event))
            decided.insert(entry.id)         // escalated now: never abandoned (see `tick`)
        }
        for entry in Self.due(undecidedAbandons, abandonDeadlines, by: now) where !decided.contains(entry.id) {
            guard let stream = streams[entry.id], stream.isActive, !stream.isEscalated else { continue }
            let due = Self.saturatingSum(stream.updatedAt, settings.abandonAfterMs)
            guard due <= now else { continue }
            decisions.append(StreamEvent(stream: entry.id, event: PanicEvent(seq: stream.seq + 1, at: due, kind: .ended(.abandoned))))
            decided.insert(entry.id)
        }
        return decisions
    }

    /// Whether `entry` is its stream's current safety timer (the stream active, its `dueAt` the entry's).
    func isCurrentTimer(_ entry: Deadline) -> Bool {
        guard let stream = streams[entry.id], stream.isActive else { return false }
        return stream.dueAt == entry.at
    }

    /// The entries set aside and those of `heap` due by `now`, in the order `tick` pops them.
    /// The heap is read whole only when its earliest entry is due, which a non-deciding tick at
    /// `now` has just prevented.
    private static func due(_ waiting: [Deadline], _ heap: Heap<Deadline>, by now: Int64) -> [Deadline] {
        var entries = waiting
        if let first = heap.min, first.at <= now { entries += heap.unordered.filter { $0.at <= now } }
        return entries.sorted()
    }
}

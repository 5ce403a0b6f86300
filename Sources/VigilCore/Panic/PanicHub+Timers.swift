import HeapModule

/// The panic hub's clock: safety timers, stale notices, abandonment, and removal of ended streams
/// after their grace, each from a heap of deadlines, so a tick costs O(log n) per due entry and nothing for
/// the streams that are not due.
///
/// Every deadline follows from a stream's own times (its last location, its last event, its
/// end), never from when `tick` happened to run, so a hub replayed from the journal, or another
/// node with the same records, reaches the same events.
extension PanicHub {
    /// In order: escalates each active stream whose safety timer has passed (`missedCheckIn`: the
    /// stream turns red, the event goes to every watcher with the last location); tells the
    /// watchers of each active stream whose last location is `staleAfterMs`
    /// old or older (once per silence; a new location re-arms it); ends each active stream whose
    /// owner has sent nothing (no location, status change or end) for `abandonAfterMs`; then removes
    /// the ended streams whose grace has passed: their watchers stop watching (silently: they were
    /// sent `ended` already) and their tokens die.
    ///
    /// An abandoned stream ends like any other: the `ended` event (reason `abandoned`, the next
    /// seq) goes to its watchers, and it stays readable for `endedGraceMs`. The event's time is the
    /// deadline, `updatedAt + abandonAfterMs`, not `now`, so it is the same wherever and however
    /// late it is computed. Returned here as well (also for streams nobody watches), because the
    /// server must journal each one: the end of a stream is part of its durable state. The same
    /// holds for an escalation, whose time is its deadline (or the stream's last event, if that
    /// came later: a stream's events never go back in time), and which comes first in the list;
    /// it also carries `now` as when it was sent (`sentAt`, never before its time), so a watcher
    /// can tell how late the alarm went out.
    /// An escalated stream is never abandoned: it stays open until its owner ends it.
    @discardableResult
    public mutating func tick(now: Int64, out: inout [PanicDelivery]) -> [StreamEvent] {
        var removed: [StreamID] = []
        return tick(now: now, out: &out, removed: &removed)
    }

    /// `tick`, also appending to `removed` the id of every stream removed (its grace over), which
    /// the server journals so that the removal reaches the disk (see docs/DURABILITY.md, "Data that leaves").
    ///
    /// `deciding: false` is the tick of a node in a cluster, where escalations and abandonments
    /// go through the replicated log once instead of being taken by every node's clock
    /// (docs/CLUSTER.md): it makes neither, and keeps each one that comes due aside for
    /// `dueDecisions(now:)` to report until its record, applied with
    /// `applyReplicatedEvent`, makes it moot. Stale notices and removals after the grace are
    /// taken as always: they follow from the stream's times alone and are the same on every node.
    /// Returns nothing then.
    @discardableResult
    public mutating func tick(now: Int64, out: inout [PanicDelivery], removed: inout [StreamID], deciding: Bool = true) -> [StreamEvent] {
        var changed = escalateMissedCheckIns(now: now, out: &out, deciding: deciding)
        noteStaleStreams(now: now, out: &out)
        changed += endAbandonedStreams(now: now, out: &out, deciding: deciding)
        removeEndedStreams(dueBy: now)
        removed += removedSinceTick
        removedSinceTick.removeAll(keepingCapacity: true)
        return changed
    }

    /// An entry fires only if it is the stream's current deadline: a timer moved or cancelled
    /// since leaves its entry behind, to be skipped here (the new deadline has an entry of its own).
    /// Not `deciding`, an entry that would fire waits in `undecidedTimers` instead (and one
    /// waiting there goes once its stream no longer has that deadline).
    private mutating func escalateMissedCheckIns(now: Int64, out: inout [PanicDelivery], deciding: Bool) -> [StreamEvent] {
        if !undecidedTimers.isEmpty {
            let waiting = undecidedTimers
            undecidedTimers.removeAll()
            for entry in waiting where isCurrentTimer(entry) { timerDeadlines.insert(entry) }   // judged again below
        }
        guard (timerDeadlines.min?.at ?? .max) <= now else { return [] }   // the common case: allocates nothing
        var escalated: [StreamEvent] = []
        while let top = timerDeadlines.min, top.at <= now {
            _ = timerDeadlines.popMin()
            guard deciding else {
                if isCurrentTimer(top) && !undecidedTimers.contains(where: { $0.id == top.id }) { undecidedTimers.append(top) }
                continue
            }
            withStream(top.id) { stream in
                guard stream.isActive, let due = stream.dueAt, due == top.at else { return }
                let event = stream.record(Self.escalation(of: stream, due: due, now: now), now: max(due, stream.updatedAt))
                Self.deliverEscalation(event, of: stream, out: &out)
                escalated.append(StreamEvent(stream: stream.id, event: event))
            }
        }
        return escalated
    }

    /// The escalation of `stream` for its deadline `due`, decided at `now`. Sent at `now`, or at
    /// the event's own time if the clock is behind it (it went back since the stream's last
    /// event): the alarm is never reported as sent before it was due.
    static func escalation(of stream: PanicStream, due: Int64, now: Int64) -> PanicEventKind {
        .missedCheckIn(dueAt: due, last: stream.last, sentAt: max(now, due, stream.updatedAt))
    }

    /// An escalation goes to every watcher, and to the owner's connection too if it has one (the
    /// phone learns that its contacts were alerted).
    static func deliverEscalation(_ event: PanicEvent, of stream: PanicStream, out: inout [PanicDelivery]) {
        var recipients = stream.watchers.keys.sorted()
        if let owner = stream.owner, stream.watchers[owner] == nil {
            recipients.append(owner)
            recipients.sort()
        }
        if !recipients.isEmpty { out.append(PanicDelivery(stream: stream.id, kind: .event(event), recipients: recipients)) }
    }

    private mutating func noteStaleStreams(now: Int64, out: inout [PanicDelivery]) {
        let staleAfterMs = settings.staleAfterMs          // `body` may not read the hub (see withStream)
        while let top = staleDeadlines.min, top.at <= now {
            _ = staleDeadlines.popMin()
            var refileAt: Int64?
            withStream(top.id) { stream in
                guard stream.isActive else { return }                // ended: no notice
                let due = Self.saturatingSum(stream.lastLocationAt, staleAfterMs)
                if due > now {                                       // a location came since this entry was filed
                    refileAt = due
                    return
                }
                stream.staleArmed = false                            // the next location files a new entry
                guard !stream.staleNotified else { return }
                stream.staleNotified = true
                let recipients = stream.watchers.keys.sorted()
                if !recipients.isEmpty {
                    out.append(PanicDelivery(stream: stream.id, kind: .stale(since: stream.lastLocationAt), recipients: recipients))
                }
            }                                                        // gone: no notice either
            if let refileAt { fileStale(at: refileAt, top.id) }
        }
    }

    /// Each active stream keeps one abandonment entry, filed at its start (or restore) and never
    /// moved by its events: when the entry comes due and the stream has had an event since, it is
    /// filed again at `updatedAt + abandonAfterMs`. A stream that speaks costs one heap operation
    /// per `abandonAfterMs`, not one per event.
    ///
    /// Not `deciding`, a stream that would be abandoned waits in `undecidedAbandons` instead; one
    /// waiting there goes once it ended or was escalated, and goes back to the heap when an event
    /// since moved its deadline (as an entry is filed again here).
    private mutating func endAbandonedStreams(now: Int64, out: inout [PanicDelivery], deciding: Bool) -> [StreamEvent] {
        let abandonAfterMs = settings.abandonAfterMs, graceMs = settings.endedGraceMs
        var ended: [StreamEvent] = []
        if !undecidedAbandons.isEmpty {
            let waiting = undecidedAbandons
            undecidedAbandons.removeAll()
            for entry in waiting { abandonDeadlines.insert(entry) }     // judged again below, like any due entry
        }
        while let top = abandonDeadlines.min, top.at <= now {
            _ = abandonDeadlines.popMin()
            if !deciding {
                guard let stream = streams[top.id], stream.isActive, !stream.isEscalated else { continue }
                let due = Self.saturatingSum(stream.updatedAt, abandonAfterMs)
                if due > now {
                    fileAbandon(at: due, top.id)
                } else if !undecidedAbandons.contains(where: { $0.id == top.id }) {
                    undecidedAbandons.append(top)
                }
                continue
            }
            var refileAt: Int64?
            var endedAt: Int64?
            withStream(top.id) { stream in
                guard stream.isActive else { return }                // ended by its owner: nothing to do
                guard !stream.isEscalated else { return }            // open until its owner ends it
                let due = Self.saturatingSum(stream.updatedAt, abandonAfterMs)
                if due > now {
                    refileAt = due
                    return
                }
                let event = stream.record(.ended(.abandoned), now: due)
                Self.deliver(event, of: stream, out: &out)
                ended.append(StreamEvent(stream: stream.id, event: event))
                endedAt = due
            }
            if let refileAt { fileAbandon(at: refileAt, top.id) }
            if let endedAt { fileGrace(at: Self.saturatingSum(endedAt, graceMs), top.id) }
        }
        return ended
    }

    mutating func removeEndedStreams(dueBy now: Int64) {
        while let top = graceDeadlines.min, top.at <= now {
            _ = graceDeadlines.popMin()
            // An entry outlives an end that was taken back (`revertStream`): only an ended stream
            // whose own grace is over goes.
            guard let end = streams[top.id]?.ended, Self.saturatingSum(end.at, settings.endedGraceMs) <= now,
                  let stream = removeStream(top.id) else { continue }
            removedSinceTick.append(top.id)
            for watcher in stream.watchers.keys { Self.unindex(&watching, watcher, top.id) }
            if let owner = stream.owner { Self.unindex(&owning, owner, top.id) }
        }
    }

    mutating func fileStale(at: Int64, _ id: StreamID) {
        nextOrder += 1
        staleDeadlines.insert(Deadline(at: at, order: nextOrder, id: id))
    }

    /// Also drops, now and then, the entries of streams that ended or went since they were filed:
    /// they would otherwise wait up to `abandonAfterMs` at the bottom of the heap, and a day of
    /// short streams would pile them up. Rebuilding when they reach twice the streams held costs
    /// O(n) once per n starts.
    mutating func fileAbandon(at: Int64, _ id: StreamID) {
        if abandonDeadlines.count >= 2 * max(streams.count, 512) {
            abandonDeadlines = Heap(abandonDeadlines.unordered.filter { streams[$0.id]?.isActive == true })
        }
        nextOrder += 1
        abandonDeadlines.insert(Deadline(at: at, order: nextOrder, id: id))
    }

    /// Entries outlive the deadlines they were filed for (a moved timer leaves its old one), so
    /// the heap is rebuilt with only the current deadlines once it holds twice the streams held:
    /// an owner moving a timer every second costs O(1) amortised, not a heap entry per move.
    mutating func fileTimer(at: Int64, _ id: StreamID) {
        if timerDeadlines.count >= 2 * max(streams.count, 512) {
            timerDeadlines = Heap(timerDeadlines.unordered.filter { entry in
                guard let stream = streams[entry.id] else { return false }
                return stream.isActive && stream.dueAt == entry.at
            })
        }
        nextOrder += 1
        timerDeadlines.insert(Deadline(at: at, order: nextOrder, id: id))
    }

    mutating func fileGrace(at: Int64, _ id: StreamID) {
        nextOrder += 1
        graceDeadlines.insert(Deadline(at: at, order: nextOrder, id: id))
    }
}

/// Durable state for the panic hub: streams out for a snapshot, and back in at startup.
///
/// Only the streams are state; who owns and who watches are connections, which a restart ends.
/// Timers are not saved either: they follow from each stream's times and are re-armed here.
extension PanicHub {
    /// Every stream held (active and in grace), ordered by id so a snapshot's bytes depend only
    /// on the hub's content. The values carry their owner and watchers, which encoders ignore.
    public func exportStreams() -> [PanicStream] {
        streams.keys.sorted().compactMap { streams[$0] }
    }

    /// The ids of every stream held, in `exportStreams`' order: a snapshot taken in slices
    /// fetches each with `stream(_:)` when its slice comes, holding no copy of the others.
    public var streamIDs: [StreamID] { streams.keys.sorted() }

    /// Puts streams back with no owner connection and no watchers, re-arming their timers: an
    /// active stream's stale notice at `lastLocationAt + staleAfterMs` (already due after a long
    /// downtime: the next `tick` then notes the silence, telling nobody since nobody watches) and
    /// its abandonment at `updatedAt + abandonAfterMs` (after a downtime past it, the next `tick`
    /// ends it at that time, and the server journals the end as for any tick), an ended stream's
    /// removal at `ended.at + endedGraceMs`, and a safety timer at its `dueAt` (a deadline that
    /// passed while the server was down fires at the first `tick`, as it would have then). Ended streams whose grace has passed
    /// by `now` are removed at once, as `tick` would have done. Produces no deliveries.
    ///
    /// Meant for a hub that holds no streams yet; a stream with an id already held replaces it.
    /// Timers are filed in id order, so the same input gives the same hub. `settings.maxStreams`
    /// is not applied (acknowledged streams are never dropped for a lowered limit), and each
    /// stream keeps the history capacity it was started with.
    public mutating func restoreStreams(_ restored: [PanicStream], now: Int64) {
        for original in restored.sorted(by: { $0.id < $1.id }) {
            var stream = original
            stream.owner = nil
            stream.watchers = [:]
            stream.staleArmed = false
            if let end = stream.ended {
                fileGrace(at: Self.saturatingSum(end.at, settings.endedGraceMs), stream.id)
            } else {
                stream.staleArmed = true
                fileStale(at: Self.saturatingSum(stream.lastLocationAt, settings.staleAfterMs), stream.id)
                fileAbandon(at: Self.saturatingSum(stream.updatedAt, settings.abandonAfterMs), stream.id)
                if let due = stream.dueAt { fileTimer(at: due, stream.id) }
            }
            insert(stream)
        }
        removeEndedStreams(dueBy: now)
    }

    /// `a + b`, pinned to the Int64 range instead of trapping (stored times are bounded by
    /// `PanicStream.restorableMagnitude`, settings by the operator: this is the last line).
    public static func saturatingSum(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }
}

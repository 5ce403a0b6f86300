import VigilCore
import VigilGeo
import VigilLoop

/// Cluster subscriptions (docs/PROTOCOL.md, "Cluster subscriptions"): `subscribe` with
/// `"view":"clusters"`, and the `clusters.changed` each subscriber gets at most once per
/// `pins.cluster_interval_ms`.
extension V1Application {
    /// Replaces the connection's subscription (of either view) with one to the counts of `area`.
    /// Rate-limited like any subscribe (a zoom is a subscribe); not journaled.
    func subscribeClusters(_ caller: Caller, area: GeoArea, categories: UInt64?) -> Outcome {
        if let refused = admit(budgets.admitSubscribe(caller.address, now: caller.monotonicMs), rate: .addressSubscribes) { return refused }
        let result = hub.subscribeClusters(caller.fd, area: area, categories: categories, now: caller.monotonicMs)
        return Outcome(.clusters(precision: result.precision, cells: result.cells))
    }

    /// Sends the `clusters.changed` that are due. Runs at the end of the turn, after the journal
    /// has recorded (or taken back) the turn's changes and after the turn's own replies and events
    /// went out, so a subscriber is never told of a change that was taken back, and hears of its
    /// new subscription's reply first. Each message is the subscriber's own (its cells); a
    /// subscriber with output still unsent (a slow reader, or simply this turn's replies, which
    /// the loop writes after this step) is skipped and tried again a tick later (its changed
    /// cells wait, bounded by its cover), so a slow reader costs no queue growth.
    func flushClusters() {
        guard !hub.clusterSubscriptions.isEmpty else { return }
        let now = monotonicMilliseconds()
        var (due, encoding) = hub.takeDueClusters(now: now)
        for update in due {
            guard let connection = server.connection(fd: update.subscriber) else { continue }
            if connection.queuedBytes > 0 {
                hub.postponeClusters(update.subscriber, cells: update.cells, now: now, sent: false)
                continue
            }
            replyWriter.reset()
            let written = hub.clustersChangedJSON(update, encoding: &encoding, maxBytes: maxReplyBytes, into: &replyWriter)
            let result = replyWriter.withUnsafeBytes { connection.send(.text, payload: $0, traffic: .mapEvent) }
            // The interval counts from this message, not from the flush's start (see `told`).
            let sentAt = monotonicMilliseconds()
            hub.clustersSent(update.subscriber, at: sentAt)
            if written < update.cells.count {
                hub.postponeClusters(update.subscriber, cells: Array(update.cells[written...]), now: sentAt, sent: true)
            }
            if result == .queued {
                server.counters.framesOut += 1
                stats.deliveries += 1
            }
        }
    }
}

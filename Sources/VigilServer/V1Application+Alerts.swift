import VigilCore
import VigilState

/// Notices to the owner and members of a circle who have no open connection (docs/design/alerts.md).
///
/// A handler that makes a change with a notice in it calls `notify`; the notice waits with the
/// turn's other changes and is posted to the sender only once the journal took the turn (so a
/// notice never goes out for a change that was taken back, and an `ok` the journal stands
/// behind stands behind its notice: a restart rebuilds it from the restored state, `restoreNotices`).
/// The tick's own changes (escalations, abandonments) are kept whatever the journal does, and so
/// are their notices.
extension V1Application {
    /// How long a notice is attempted (`push.ttl_s`).
    var noticeTTLMs: Int64 { Int64(server.config.push.ttlSeconds) * 1000 }

    /// Starts the sender when a channel is configured.
    func setUpAlerts() {
        let push = server.config.push
        guard push.vapid != nil || push.relay != nil else { return }
        let sender = AlertSender(push: push, loop: server.loop, logger: server.logger)
        sender.lookup = { [unowned self] circle, id in self.checkin.circle(circle)?.subscriptions.first { $0.id == id } }
        sender.settled = { [unowned self] settlement in
            if self.checkin.recordSettlement(settlement) { self.log?.append(.noticeSettled(settlement)) }
        }
        sender.gone = { [unowned self] circle, id in
            if let changed = self.checkin.removeGoneSubscription(circle, id, now: Self.wallClockMs()) { self.log?.append(.circlePut(changed)) }
        }
        alerts = sender
        server.addStopStep { [unowned sender] in sender.close() }
    }

    /// A notice caused by the change being applied.
    func notify(_ notice: Notice, fromTick: Bool = false) {
        guard alerts != nil else { return }
        if fromTick { tickNotices.append(notice) } else { turnNotices.append(notice) }
    }

    /// End of the turn, after the journal's commit: the turn's notices go to the sender (only
    /// when the turn was recorded), and what is due is started.
    func sendNotices(recorded: Bool) {
        guard let alerts else { return }
        if !recorded { turnNotices.removeAll(keepingCapacity: true) }
        let now = Self.wallClockMs()
        for notices in [tickNotices, turnNotices] {
            for notice in notices { alerts.post(notice, subscriptions: checkin.circle(notice.circle)?.subscriptions ?? [], now: now) }
        }
        tickNotices.removeAll(keepingCapacity: true)
        turnNotices.removeAll(keepingCapacity: true)
        alerts.pump(now: now)
    }

    /// After a restart: every notice the restored state implies, less what the journal says was
    /// settled (the circles' settlements), posted again; what was attempted and not settled is attempted again
    /// (at least once, with the same notice id for the receiver to drop a duplicate).
    func restoreNotices() {
        guard let alerts else { return }
        for settlement in checkin.exportSettlements() { alerts.restore(settlement) }
        let now = Self.wallClockMs()
        for circle in checkin.exportCircles() {
            for notice in Notice.implied(by: circle, ttlMs: noticeTTLMs) { alerts.post(notice, subscriptions: circle.subscriptions, now: now) }
        }
        for stream in panic.exportStreams() {
            guard let id = stream.circle, let circle = checkin.circle(id) else { continue }
            for notice in Notice.implied(by: stream, circle: id, ttlMs: noticeTTLMs) {
                alerts.post(notice, subscriptions: circle.subscriptions, now: now)
            }
        }
    }
}

extension V1Application {
    /// Once a second, from the tick: deliveries past their notice's time to live are settled as
    /// expired, and settlements too old for any restart to need are forgotten.
    func pruneNotices(now: Int64) {
        guard let alerts, now >= nextNoticePruneMs else { return }
        nextNoticePruneMs = now + 1000
        alerts.prune(now: now)
        checkin.forgetSettlements(before: now - noticeTTLMs)
    }
}

extension V1Application {
    /// The notices' series for `/metrics` (docs/OPERATIONS.md): none when no channel is configured.
    /// Every label comes from a fixed set; no endpoint, handle or id is ever one.
    func alertMetrics(_ sync: inout MetricsSync) {
        guard let alerts else { return }
        let c = alerts.counters
        for channel in AlertCounters.Channel.allCases {
            sync.counter("vigil_notice_requests_total", labels: ["channel": channel.rawValue], c.sent[channel, default: 0],
                         help: "Requests sent for notices: Web Push messages and relay webhooks (first attempts and retries).")
        }
        sync.counter("vigil_notice_retries_total", c.retries, help: "Notice requests that were a retry of an earlier attempt.")
        for reason in AlertCounters.failureReasons {
            sync.counter("vigil_notice_failures_total", labels: ["reason": reason], c.failed[reason, default: 0],
                         help: "Notice attempts that did not deliver, by reason (the service's answer or the client's failure).")
        }
        for settlement in DeliverySettlement.allCases {
            sync.counter("vigil_notice_deliveries_total", labels: ["result": settlement.name], c.settled[settlement, default: 0],
                         help: "Deliveries of a notice to one subscription that are done, by how they ended.")
        }
        sync.counter("vigil_notice_deliveries_refused_total", c.refusedPending,
                     help: "Deliveries not queued because push.max_pending were waiting.")
        sync.counter("vigil_notice_delay_seconds_total", seconds: Double(c.deliveredDelayMs) / 1000,
                     help: "From the change that caused a notice to the service's acceptance, summed over delivered deliveries.")
        sync.gauge("vigil_notice_deliveries_pending", alerts.board.pendingCount, help: "Deliveries waiting or in flight.")
        sync.gauge("vigil_notice_deliveries_in_flight", alerts.board.inFlightCount, help: "Deliveries whose request is in flight.")
        if let http = alerts.httpCounters {
            sync.gauge("vigil_notice_http_connections", http.connections, help: "Connections of the notices' HTTP client, open or opening.")
            sync.gauge("vigil_notice_http_queued", http.queued, help: "Notice requests waiting for a connection.")
        }
    }
}

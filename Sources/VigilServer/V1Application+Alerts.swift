import HeapModule
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
        if !recorded {
            turnNotices.removeAll(keepingCapacity: true)
            turnAcks.removeAll(keepingCapacity: true)
        }
        let now = Self.wallClockMs()
        for ack in turnAcks { alerts.acknowledged(ack, steps: escalationSteps.count) }
        let posted = !tickNotices.isEmpty || !turnNotices.isEmpty
        for notices in [tickNotices, turnNotices] {
            for notice in notices { post(notice, now: now) }
        }
        tickNotices.removeAll(keepingCapacity: true)
        turnNotices.removeAll(keepingCapacity: true)
        turnAcks.removeAll(keepingCapacity: true)
        // Requests are built in a turn of their own: this turn's replies and news (the `ok` to
        // panic.start, the members' checkin.panic) go out first, not after a circle's encryptions.
        if posted { server.loop.requestTurn() } else { alerts.pump(now: now) }
    }

    /// The ladder's steps (`push.escalation`).
    var escalationSteps: [PushConfig.EscalationStep] { server.config.push.escalation }

    /// Queues a notice for its circle's subscriptions of the step's channels (`push.first_channels`
    /// for the notice as first sent), less those of holders who acknowledged it; a danger notice
    /// as first sent also starts its ladder.
    func post(_ notice: Notice, now: Int64) {
        guard let alerts, let circle = checkin.circle(notice.circle) else { return }
        let step = Int(notice.id.step)
        let channels = Set((step == 0 ? server.config.push.firstChannels : escalationSteps[step - 1].channels)
            .compactMap(AlertCounters.Channel.init(rawValue:)))
        let acked = Set(checkin.acks(of: notice.circle).filter { $0.notice == notice.id.base }.map(\.by))
        let subscriptions = circle.subscriptions.filter { !acked.contains($0.holder) && channels.contains(AlertCounters.Channel($0.target)) }
        alerts.post(notice, subscriptions: subscriptions, now: now)
        if step == 0, Self.climbs(notice), let first = escalationSteps.first {
            ladder.insert(LadderEntry(at: PanicHub.saturatingSum(notice.at, Int64(first.afterSeconds) * 1000), order: nextLadderOrder,
                                      notice: notice, step: 1))
            nextLadderOrder &+= 1
        }
    }

    /// Danger: a panic's start or escalation, a member's question. An end or an answer is news,
    /// not a call for help, and has no ladder.
    static func climbs(_ notice: Notice) -> Bool {
        switch notice.kind {
        case .panicStarted, .panicEscalated, .checkinRequested: return true
        case .panicEnded, .checkinAnswered: return false
        }
    }

    /// From the tick: each ladder step that came due is sent, unless someone the notice went to
    /// acknowledged it, its stream ended, its circle is gone or its time to live passed; then
    /// the next step is scheduled. Derived from the notice, the acknowledgements and the time
    /// alone, so a restart (which posts the notices again) neither loses a step nor repeats one
    /// whose deliveries were settled.
    func climbLadder(now: Int64) {
        while let top = ladder.min, top.at <= now {
            ladder.removeMin()
            let notice = top.notice
            let outcome: String
            if now >= notice.expiresAt || checkin.circle(notice.circle) == nil {
                outcome = "expired"
            } else if checkin.isAcknowledged(notice.id, in: notice.circle) {
                outcome = "acknowledged"
            } else if let stream = notice.stream, panic.stream(stream)?.isActive != true {
                outcome = "ended"
            } else {
                outcome = "sent"
            }
            alerts?.counters.escalations[outcome, default: 0] += 1
            guard outcome == "sent" else { continue }
            post(Notice(id: notice.id.atStep(UInt8(top.step)), circle: notice.circle, stream: notice.stream, status: notice.status,
                        audience: notice.audience, expiresAt: notice.expiresAt), now: now)
            if top.step < escalationSteps.count {
                let next = escalationSteps[top.step]
                ladder.insert(LadderEntry(at: PanicHub.saturatingSum(notice.at, Int64(next.afterSeconds) * 1000), order: nextLadderOrder,
                                          notice: notice, step: top.step + 1))
                nextLadderOrder &+= 1
            }
        }
    }

    /// Whether `notice` is about circle `id`: the circle itself, or one of the circle's streams.
    func noticeBelongs(_ notice: NoticeID, to id: CircleID) -> Bool {
        if notice.kind.isAboutStream {
            return panic.stream(StreamID(high: notice.subjectHigh, low: notice.subjectLow))?.circle == id
        }
        return notice.subjectHigh == id.high && notice.subjectLow == id.low
    }

    /// After a restart: every notice the restored state implies, less what the journal says was
    /// settled (the circles' settlements), posted again; what was attempted and not settled is attempted again
    /// (at least once, with the same notice id for the receiver to drop a duplicate).
    func restoreNotices() {
        guard let alerts else { return }
        for settlement in checkin.exportSettlements() { alerts.restore(settlement) }
        let now = Self.wallClockMs()
        for circle in checkin.exportCircles() {
            for notice in Notice.implied(by: circle, ttlMs: noticeTTLMs) { post(notice, now: now) }
        }
        for stream in panic.exportStreams() {
            guard let id = stream.circle else { continue }
            for notice in Notice.implied(by: stream, circle: id, ttlMs: noticeTTLMs) { post(notice, now: now) }
        }
    }
}

extension V1Application {
    /// Once a second, from the tick: deliveries past their notice's time to live are settled as
    /// expired, and settlements too old for any restart to need are forgotten.
    func pruneNotices(now: Int64) {
        guard let alerts else { return }
        climbLadder(now: now)
        guard now >= nextNoticePruneMs else { return }
        nextNoticePruneMs = now + 1000
        alerts.prune(now: now)
        checkin.forgetSettlements(before: now - noticeTTLMs)
        checkin.forgetAcks(before: now - noticeTTLMs)
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
        for outcome in AlertCounters.escalationOutcomes {
            sync.counter("vigil_notice_escalations_total", labels: ["outcome": outcome], c.escalations[outcome, default: 0],
                         help: "Ladder steps (push.escalation) that came due: sent, or not sent because the notice was acknowledged, its stream ended, or it expired.")
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

/// A ladder step waiting for its time (`V1Application.climbLadder`).
struct LadderEntry: Comparable {
    let at: Int64
    let order: UInt64
    let notice: Notice
    /// The step to send (1: the ladder's first).
    let step: Int

    static func < (a: LadderEntry, b: LadderEntry) -> Bool { (a.at, a.order) < (b.at, b.order) }
    static func == (a: LadderEntry, b: LadderEntry) -> Bool { a.at == b.at && a.order == b.order }
}

extension V1Application {
    /// A cluster's decision (an escalation, an abandoned stream's end) applied from the stream,
    /// that this node's publish put there: its notice is this node's to send. Every node
    /// publishes a decision it sees due under one message id and JetStream keeps the first, with
    /// its `Vigil-Node`, so exactly one node sends each such notice (no election of our own).
    func noticeOfDecision(_ record: JournalRecord) {
        guard case .panicEvent(let id, let event) = record, let stream = panic.stream(id), let circle = stream.circle else { return }
        switch event.kind {
        case .missedCheckIn: notify(.panicEscalated(stream, circle: circle, at: event.at, ttlMs: noticeTTLMs), fromTick: true)
        case .ended: notify(.panicEnded(stream, circle: circle, at: event.at, ttlMs: noticeTTLMs), fromTick: true)
        default: break
        }
    }
}

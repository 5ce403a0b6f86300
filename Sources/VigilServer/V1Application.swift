import Glibc
import HeapModule
import VigilBytes
import VigilCore
import VigilGeo
import VigilLoop
import VigilState
import VigilWire

/// `/v1`: the live map (`MapHub`), panic-location streams (`PanicHub`) and check-in circles
/// (`CheckinHub`) behind one endpoint.
///
/// A message goes: rate limits → `RequestDecoder` → `dispatch` (one exhaustive switch; the
/// handlers, by family, are in `V1Application+Pins`, `+Subscribe`, `+Panic` and `+Checkin`) → an `Outcome`
/// (the reply, and the journal record of what changed) plus the deliveries the hubs produced →
/// `apply`, the one place that journals and queues. Nothing is sent during the turn: the
/// end-of-turn step (`endOfTurn`) fans the outbox out, then writes the journal, before the loop
/// flushes (docs/ARCHITECTURE.md).
///
/// Subscribers, watchers and owners are named by their connection's fd, unique among open
/// connections; the hubs forget a connection when it closes, before the fd can be reused.
public final class V1Application: WebSocketApplication {
    /// What a handler returns: the reply to its request, the journal record of what changed
    /// (nil when nothing did), and how to take the change back should the record not reach the
    /// journal (`takeBackUnrecorded`). Its deliveries are in `scratch`.
    struct Outcome: Sendable {
        var reply: Reply
        var record: JournalRecord?
        var undo: Undo?

        init(_ reply: Reply, record: JournalRecord? = nil, undo: Undo? = nil) {
            self.reply = reply
            self.record = record
            self.undo = record == nil ? nil : undo
        }
    }

    public internal(set) var hub: MapHub
    public internal(set) var panic: PanicHub
    public internal(set) var checkin: CheckinHub
    private let decoder: RequestDecoder
    let secrets: any Secrets
    let limits: ServerMessages.Limits
    /// The ways of reaching people this server is configured for (`push:`): what
    /// `checkin.register` accepts subscriptions for.
    public let alertChannels: AlertChannels
    /// The server outlives the application it builds and mounts (it holds it in its table for the
    /// application's whole life), so the reference is not counted: `unowned(unsafe)` spares the strong-retain check plain `unowned`
    /// does on every use (1.3% of the daemon's samples at fan-out saturation, all in `send`).
    unowned(unsafe) let server: Server
    private var sessions = V1Sessions()
    /// The rates of every session's buckets (the same for all, so not kept per session).
    private var sessionRates: V1SessionRates {
        let settings = hub.settings
        return V1SessionRates(writes: .perMinute(settings.writesPerMinute, capacity: settings.writeBurst),
                              messages: .perMinute(server.config.messagesPerSecond * 60, capacity: server.config.messageBurst),
                              subscribes: .perMinute(server.config.subscribesPerSecond * 60, capacity: server.config.subscribeBurst))
    }
    /// Budgets per client address (a keyed hash of it) that a reconnect does not reset; their
    /// clock is the monotonic one.
    var budgets: AddressBudgets
    /// The deliveries of the operation being applied (the hubs' `out:`).
    var scratch = Deliveries()
    var outbox = Outbox()
    /// What the application counts (the operator's metrics read it).
    var stats = V1Stats()
    /// Replies and welcomes: one reused buffer, copied into the recipient's queue.
    var replyWriter = JSONWriter(capacity: 4096)
    /// Events: each written straight into the chunk that all its recipients then share.
    /// Events are written one after the other into 32 KiB arenas (`EventFrames`): a turn's run of
    /// events for one subscriber is one contiguous range, one output queue entry. The memory a slow
    /// reader can keep alive through them is bounded in `ByteStream.append(shared:from:to:)`.
    var eventWriter = V1Application.makeEventWriter()
    static let eventArenaBytes = 32 * 1024
    /// The event writer: 32 KiB arenas, a first guess of 4 header bytes (`vigil-bench` fans out with one too).
    public static func makeEventWriter() -> JSONWriter { JSONWriter(arenaCapacity: eventArenaBytes, headroom: 4) }
    /// `since` replays in progress, paced by each watcher's reading (`V1Application+Replay`).
    var replays = PanicReplays()
    /// Replay bytes queued in this turn so far (`replayTurnBytes` bounds them).
    var replayBytesThisTurn = 0
    /// The last `state` encoded for a reply in this turn's fan-out (`encodedState`).
    var stateCache: (stream: PanicStream, json: ByteChunk)?
    /// True while `fanOut` walks a batch (it may not re-enter).
    var fanningOut = false
    /// The largest reply (a subscribe's pin list is cut to fit, and says `truncated`): half a
    /// connection's output budget, at most 1 MiB, so a reply never closes an honest client.
    let maxReplyBytes: Int
    /// Answers kept for idempotency keys (`V1Application+Idempotency`).
    var kept: IdempotencyTable
    /// Lookups of the answers kept in this turn: forgotten if the journal does not take it.
    var keptThisTurn: [[UInt8]] = []
    /// Where changes are recorded (nil: state in memory only).
    var log: (any ChangeLog)?
    private(set) var persistence: Persistence?
    /// This turn's changes not recorded yet, to take back if the journal cannot record them.
    var pending = PendingChanges()
    /// Set on a cluster node: changes go through the replicated log (`V1Application+Cluster`).
    var replication: ReplicationNode?
    /// Sends notices to subscriptions (`V1Application+Alerts`); nil when no channel is configured.
    var alerts: AlertSender?
    /// Notices of this turn's requests, posted once the journal took the turn; and of the tick's
    /// changes, posted whatever it did.
    var turnNotices: [Notice] = []
    var tickNotices: [Notice] = []
    /// Acknowledgements of this turn: their holders' other deliveries are cancelled once recorded.
    var turnAcks: [NoticeAck] = []
    /// Danger notices' escalation steps, by when they come due (`climbLadder`).
    var ladder = Heap<LadderEntry>()
    var nextLadderOrder: UInt64 = 0
    var nextNoticePruneMs: Int64 = 0

    init(server: Server, settings: PinSettings, panic: PanicSettings, secrets: any Secrets) {
        self.server = server
        self.hub = MapHub(settings: settings)
        self.budgets = AddressBudgets(settings: server.config.addressBudgets)
        self.kept = IdempotencyTable(settings: server.config.idempotency)
        self.panic = PanicHub(settings: panic)
        self.checkin = CheckinHub(settings: server.config.checkin)
        self.decoder = RequestDecoder(settings: settings, panic: panic, checkin: server.config.checkin)
        self.secrets = secrets
        self.alertChannels = server.config.push.channels
        self.maxReplyBytes = min(server.config.maxOutputBufferBytes / 2, 1 << 20)
        self.limits = ServerMessages.Limits(maxMessageBytes: server.config.maxMessageBytes,
                                            messagesPerSecond: server.config.messagesPerSecond,
                                            messageBurst: server.config.messageBurst,
                                            panic: panic, checkin: server.config.checkin)
        server.addTickStep { [unowned self] in self.tick() }
        setUpAlerts()
    }

    /// Takes over the state recovered from disk and records every change from now on.
    func attach(_ p: Persistence) {
        hub = p.recovered.map
        panic = p.recovered.panic
        checkin = p.recovered.checkin
        // Restored votes keep their voter numbers: new voters must not reuse one (a restored
        // pin's voters are no longer tied to any address, so they simply stay counted).
        budgets = AddressBudgets(settings: server.config.addressBudgets, firstVoter: p.recovered.highestVoteSession + 1)
        persistence = p
        log = p
        restoreKeptAnswers(p)
        server.addTickStep { [unowned self, unowned p] in p.tick(map: self.hub, panic: self.panic, checkin: self.checkin) }
        server.addStopStep { [unowned self, unowned p] in
            p.beforeFinalSnapshot()
            p.shutdown(map: self.hub, panic: self.panic, checkin: self.checkin)
        }
        // What came due while vigild was down (safety timers that passed, abandoned streams)
        // happens now, before the first client is served: a contact watching at once sees it,
        // and its records are in the journal before anything else is.
        tick()
        _ = log?.commitTurn()
        // Notices the restored state implies and the journal does not say were settled: sent
        // (again) now, at least once.
        restoreNotices()
        sendNotices(recorded: true)
    }

    /// Whether changes reach the disk now (a cluster node's reach the stream).
    var stateMode: StateMode {
        if replication != nil { return .replicated }
        guard log != nil else { return .memoryOnly }
        return persistence?.outage == nil ? .writable : .unavailable
    }

    /// The state directory's series for `/metrics` (journal and snapshot timings and failures).
    func persistenceMetrics(_ sync: inout MetricsSync) {
        guard let p = persistence else { return }
        let j = p.journalStats, s = p.snapshotStats
        sync.counter("vigil_journal_records_total", j.records, help: "Records appended to the journal.")
        sync.counter("vigil_journal_writes_total", j.writes, help: "Writes of a turn's journal records to the kernel.")
        sync.counter("vigil_journal_bytes_total", j.bytes, help: "Bytes written to the journal.")
        sync.counter("vigil_journal_fsyncs_total", j.fsyncs, help: "fdatasync calls on the journal.")
        sync.counter("vigil_journal_fsync_seconds_total", seconds: Double(j.fsyncNanoseconds) / 1e9,
                     help: "Time spent in journal fdatasync calls.")
        sync.counter("vigil_snapshots_total", s.written, help: "Periodic snapshots written.")
        sync.counter("vigil_snapshot_failures_total", s.failures, help: "Periodic snapshots that failed (the journal keeps the state).")
        sync.counter("vigil_snapshot_seconds_total", seconds: Double(s.milliseconds) / 1000,
                     help: "Time from the start of a periodic snapshot to its file in place, summed.")
        sync.gauge("vigil_snapshot_last_bytes", s.lastBytes, help: "Size of the last periodic snapshot.")
        for kind in ["no_space", "quota", "file_too_big", "io", "other"] {
            sync.counter("vigil_storage_errors_total", labels: ["kind": kind], p.storageErrors[kind, default: 0],
                         help: "Failed writes, fsyncs and file creations of the state directory, by cause.")
        }
        sync.counter("vigil_state_outages_total", p.outages, help: "Times the state became unavailable (changes refused until the disk took writes again).")
    }

    /// Wall-clock Unix milliseconds: pin and stream times are client-visible dates.
    static func wallClockMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    // MARK: sessions

    /// Whether `fd` is a `/v1` connection.
    func hasSession(_ fd: Int32) -> Bool { sessions[fd] != nil }

    public func opened(_ connection: Connection) {
        sessions[connection.fd] = V1Session(sessionRates, nowMs: monotonicMilliseconds())
        replication?.speculative.opened(connection.fd)
        // The session id is random and shown once; nothing refers to it later, so it is not kept.
        outbox.append(.welcome(connection.fd, session: Base64URL.encode(secrets.randomBytes(16))))
    }

    public func closed(_ connection: Connection) {
        replication?.watchersChanged(panic.streamsWatched(by: connection.fd))
        hub.unsubscribe(connection.fd)
        panic.disconnected(connection.fd, out: &scratch.panic)
        checkin.disconnected(connection.fd)
        replays.closed(connection.fd)
        outbox.append(deliveries: &scratch)
        sessions[connection.fd] = nil
        replication?.speculative.closed(connection.fd)
        // Called from a flush too (a failed write), after this turn's fan-out: make sure another
        // turn sends what the hubs just produced.
        server.loop.requestTurn()
    }

    public func received(_ connection: Connection, kind: MessageKind, payload: UnsafeRawBufferPointer) {
        let fd = connection.fd
        guard var session = sessions[fd], !session.closing else { return }
        let now = monotonicMilliseconds()
        defer { sessions[fd] = session }
        if session.messages.take(sessionRates.messages, nowMs: now) != nil {
            // Abuse, not a mistake: a client this far over the message rate is closed (1008),
            // after whatever was already produced for it this turn.
            session.closing = true
            stats.refused(.sessionMessages)
            outbox.append(.close(fd, .policyViolation, reason: "message rate limit"))
            return
        }
        guard kind == .text else {
            outbox.append(.reply(fd, ref: nil, .error(RequestError("bad_message", "messages are JSON text; binary messages are not accepted"))))
            return
        }
        let request: ClientRequest
        switch decoder.decode(payload) {
        case .success(let r):
            request = r
            stats.requests[r.operation.metricIndex] += 1
        case .failure(let rejected):
            outbox.append(.reply(fd, ref: rejected.ref, .error(rejected.error)))
            return
        }
        // A repeat changes nothing: answered before any limit or the disk's state is consulted
        // (on a cluster node, a repeat of a write still on its way waits for its answer).
        if let claim = request.idem {
            if answerFromKept(claim, fd: fd, ref: request.ref) { return }
            if let replication, waitForInFlight(claim, fd: fd, ref: request.ref, replication: replication) { return }
        }
        if request.operation.changesState, let replication, !replication.log.writable {
            // Not connected to the stream (or not caught up with it): nothing is acknowledged
            // that the stream does not hold (docs/CLUSTER.md, "Losing NATS").
            stats.refusedUnrecorded += 1
            outbox.append(.reply(fd, ref: request.ref, .error(.unavailable(retryAfterMs: replication.log.retryAfterMs))))
            return
        }
        if request.operation.changesState, let retry = log?.refusalRetryAfterMs() {
            // The change could not be recorded: refused before it is made (docs/DURABILITY.md).
            stats.refusedUnrecorded += 1
            outbox.append(.reply(fd, ref: request.ref, .error(.unavailable(retryAfterMs: retry))))
            return
        }
        if request.operation.isWrite, let retry = session.writes.take(sessionRates.writes, nowMs: now) {
            stats.refused(.sessionWrites)
            outbox.append(.reply(fd, ref: request.ref,
                                 .error(RequestError("rate_limited", "too many writes; retry after \(retry) ms", retryAfterMs: retry))))
            return
        }
        if request.operation.isSubscribe, let retry = session.subscribes.take(sessionRates.subscribes, nowMs: now) {
            stats.refused(.sessionSubscribes)
            outbox.append(.reply(fd, ref: request.ref,
                                 .error(RequestError("rate_limited", "too many subscribes; retry after \(retry) ms", retryAfterMs: retry))))
            return
        }
        if let replication, request.operation.changesMembership { replication.speculative.membershipChanged(fd) }
        let caller = Caller(fd: fd, address: connection.addressKey, monotonicMs: now)
        let first = outbox.count
        let outcome = dispatch(request.operation, caller: caller, now: Self.wallClockMs())
        if let replication, let record = outcome.record {
            replicate(outcome, record: record, caller: caller, ref: request.ref, replication: replication, claim: request.idem)
            return
        }
        apply(outcome, to: fd, ref: request.ref)
        if let claim = request.idem, replication == nil { keepAnswer(outcome.reply, claim: claim, caller: caller) }
        if log != nil { pending.note(request.operation, outcome, items: first..<outbox.count) }
    }

    /// The one place an operation's effects land: its record in the journal, its reply and then
    /// its deliveries in the outbox.
    private func apply(_ outcome: Outcome, to fd: Int32, ref: JSONValue?) {
        if let record = outcome.record { log?.append(record) }
        outbox.append(.reply(fd, ref: ref, outcome.reply))
        outbox.append(deliveries: &scratch)
    }

    /// nil when a per-address budget admits the request; else its refusal, counted.
    func admit(_ admission: AddressAdmission, rate: Refusal) -> Outcome? {
        guard let kind = Refusal.of(admission, rate: rate), let error = admission.error else { return nil }
        stats.refused(kind)
        return Outcome(.error(error))
    }

    /// Who sent a request: its connection, its address's key for the budgets, and the monotonic
    /// time the budgets count in.
    struct Caller {
        let fd: Int32
        let address: AddressKey
        let monotonicMs: Int64
    }

    /// Every operation of protocol version 1, by family. `now` is the wall clock (client-visible times).
    func dispatch(_ operation: ClientOperation, caller: Caller, now: Int64) -> Outcome {
        let me = caller.fd
        switch operation {
        case .subscribe(let area, let categories, let viewer):
            return subscribe(caller, area: area, categories: categories, viewer: viewer)
        case .subscribeClusters(let area, let categories):
            return subscribeClusters(caller, area: area, categories: categories)
        case .unsubscribe:
            return unsubscribe(me)
        case .pinCreate(let draft):
            return createPin(draft, caller: caller, now: now)
        case .pinUpdate(let id, let token, let changes):
            return updatePin(id, token: token, changes: changes, now: now)
        case .pinDelete(let id, let token):
            return deletePin(id, token: token, caller: caller)
        case .pinVote(let id, let value):
            return votePin(id, value: value, caller: caller)
        case .panicStart(let status, let location, let note, let watchers, let timer, let circle):
            return startStream(caller, status: status, origin: .clear(location, note: note), watchers: watchers, timer: timer,
                               circle: circle, now: now)
        case .panicStartE2E(let status, let e2e, let watchers, let timer, let circle):
            return startStream(caller, status: status, origin: .e2e(e2e), watchers: watchers, timer: timer, circle: circle, now: now)
        case .panicUpdate(let stream, let token, let location):
            return updateStream(stream, by: me, token: token, location: location, now: now)
        case .panicUpdateSealed(let stream, let token, let update):
            return updateStreamSealed(stream, by: me, token: token, update: update, now: now)
        case .panicRekey(let stream, let token, let keys):
            return rekeyStream(stream, by: me, token: token, keys: keys)
        case .panicStatus(let stream, let token, let status):
            return setStreamStatus(stream, by: me, token: token, status: status, now: now)
        case .panicEnd(let stream, let token, let reason):
            return endStream(stream, caller: caller, token: token, reason: reason, now: now)
        case .panicResume(let stream, let token):
            return resumeStream(stream, by: me, token: token)
        case .panicWatch(let stream, let token, let since):
            return watchStream(stream, watcher: me, token: token, since: since)
        case .panicWatchAsMember(let stream, let token, let since):
            return watchStreamAsMember(stream, watcher: me, token: token, since: since)
        case .panicUnwatch(let stream):
            return unwatchStream(stream, watcher: me)
        case .panicInvite(let stream, let token):
            return inviteToStream(stream, by: me, token: token)
        case .panicRevoke(let stream, let token, let watchToken):
            return revokeFromStream(stream, by: me, token: token, watchToken: watchToken)
        case .panicTimer(let stream, let token, let timer):
            return setStreamTimer(stream, by: me, token: token, timer: timer, now: now)
        case .checkin(let op):
            return checkinOperation(op, caller: caller, now: now)
        }
    }

    // MARK: the turn

    /// The end of the loop turn: record the turn's changes durably (the journal's write, and its
    /// fsync when due), then send everything the turn produced; the loop flushes after. Recording
    /// comes first so that a turn the journal could not record is taken back before anyone hears
    /// of it.
    public func endOfTurn() {
        let recorded = log?.commitTurn() != false
        if !recorded { takeBackUnrecorded(); forgetUnrecordedAnswers() }
        pending.clear()
        keptThisTurn.removeAll(keepingCapacity: true)
        sendNotices(recorded: recorded)
        if let replication { announceWatchers(replication) }
        fanOut()
        continueReplays()
        flushClusters()
    }

    /// The journal failed this turn: each change of the turn is undone (newest first), its reply
    /// becomes `unavailable` and its events are dropped, as are the replies of reads that may
    /// have shown it. What the tick changed stays: ends and removals that follow from time,
    /// which a restart derives again (docs/DURABILITY.md, "When the disk fails").
    private func takeBackUnrecorded() {
        let now = monotonicMilliseconds()
        var retry = StorageOutage.minRetryAfterMs
        let withdrawn = pending.takeBackAll { undo in
            if let undo { takeBack(undo, now: now) } else { assertionFailure("a change without its undo") }
            retry = log?.refusalRetryAfterMs() ?? retry
            stats.refusedUnrecorded += 1
        }
        outbox.withdraw(withdrawn, answer: .unavailable(retryAfterMs: retry))
    }

    /// Takes one change back (its news never sent): the journal's failure and a cluster node's
    /// speculative write overtaken by the stream both use it.
    func takeBack(_ undo: Undo, now: Int64) {
        switch undo {
        case .pinCreated(let id):
            hub.revertPin(id, to: nil)
            budgets.pinRemoved(id, now: now)
        case .pin(let id, let before):
            hub.revertPin(id, to: before)
        case .vote(let id, let voter, let previous, let flagged):
            hub.revertVote(id, voter: voter, previous: previous, flagged: flagged)
        case .streamStarted(let id):
            panic.revertStart(id)
            budgets.streamEnded(id, now: now)
        case .stream(let checkpoint):
            panic.revert(to: checkpoint, connected: { [sessions] in sessions[$0] != nil })
        case .circle(let checkpoint):
            checkin.revert(to: checkpoint, connected: { [sessions] in sessions[$0] != nil })
        case .memberRevoked(let circle, let streams):
            checkin.revert(to: circle, connected: { [sessions] in sessions[$0] != nil })
            for checkpoint in streams { panic.revert(to: checkpoint, connected: { [sessions] in sessions[$0] != nil }) }
        }
    }

    /// Every tick: pins that expired and panic streams' timers (safety timers that passed, stale
    /// notices, abandoned streams ended, ended streams' grace); their deliveries go out with this
    /// turn. An escalation or an abandonment is an event like an owner's change, so it is
    /// journaled too (a restart then neither loses nor repeats it); expiry needs no record (restore drops
    /// expired pins by their times). Each frees its creator's address budget. A stream removed
    /// after its grace is journaled (`panicRemove`): restore would drop it by its times anyway, but
    /// the record is what the snapshot schedule's scrub of older files follows (docs/DURABILITY.md).
    private func tick() {
        let now = Self.wallClockMs()
        let monotonic = monotonicMilliseconds()
        for pin in hub.expire(now: now, out: &scratch.pins) { budgets.pinRemoved(pin.id, now: monotonic) }
        var removed: [StreamID] = []  // empty on almost every tick: allocates nothing then
        // A cluster node leaves escalations and abandonments to the stream (`publishDecisions`).
        for changed in panic.tick(now: now, out: &scratch.panic, removed: &removed, deciding: replication == nil) {
            log?.append(.panicEvent(changed.stream, changed.event))
            if case .ended = changed.event.kind { budgets.streamEnded(changed.stream, now: monotonic) }
            if let stream = panic.stream(changed.stream) { tellCircle(changed.event, of: stream, fromTick: true) }
        }
        for id in removed { log?.append(.panicRemove(id)) }
        for id in checkin.tick(now: now, out: &scratch.checkin) { log?.append(.circleRemove(id)) }
        if let replication { publishDecisions(now: now, replication: replication) }
        outbox.append(deliveries: &scratch)
        _ = budgets.sweep(now: monotonic)
        kept.sweep(now: now)
        pruneNotices(now: now)
    }
}

/// Capability tokens and randomness from OpenSSL.
public struct OpenSSLSecrets: Secrets {
    public init() {}
    public func randomBytes(_ count: Int) -> [UInt8] { SecureRandom.bytes(count: count) }
    public func digest(ofToken token: String) -> TokenDigest { TokenDigest(bytes: Crypto.sha256(Array(token.utf8))) }
}

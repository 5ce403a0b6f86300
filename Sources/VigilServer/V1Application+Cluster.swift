import Logging
import VigilCluster
import VigilCore
import VigilLoop
import VigilNATS
import VigilState
import VigilWire

/// `/v1` as a node of a cluster (docs/CLUSTER.md, "The replicated log").
///
/// Every change goes through the stream, and every node applies the stream in order; the writer
/// too, but it does not wait for the stream to *see* its own change: a write is validated and
/// applied here at once (speculatively), published, and held — its reply and its events — until
/// the consumer reaches it. Then:
/// - it is this node's write, the oldest unconfirmed one on its entity, and still in place: it
///   is confirmed; the held reply and events go out. This is the common case, and it keeps a
///   client's pipelined writes on one pin or stream (a phone streaming its location) working.
/// - anything else (another node's write, or one of ours that was taken back): every
///   speculative write of ours on that entity is taken back first (newest first, with the undo
///   the journal path uses), then the record is applied with its precondition
///   (`ReplicatedApply`): exactly what every other node does, so all converge on the stream's
///   order. A write of ours applied that way is answered with the real outcome: `ok`, or
///   `conflict` when another node's change came first.
/// Nothing is sent that the stream does not hold: a publish that fails takes the write (and
/// those made on top of it) back and answers `unavailable`.
final class ClusterNode {
    /// What one record is about: writes on one entity are ordered by the stream; writes on two
    /// never conflict.
    enum Entity: Hashable {
        case pin(PinID)
        case stream(StreamID)
        case circle(CircleID)
        /// A kept answer (`answerKept`): never a message's own record (it travels after the
        /// change it answers, `ReplicatedLog.change`), so never the entity of a write.
        case keptAnswer
    }

    /// A write of this node applied here and not yet seen in the stream.
    struct Write {
        let entity: Entity
        let undo: Undo?
        let fd: Int32
        let ref: JSONValue?
        let reply: Reply
        /// Its events, sent when it is confirmed (dropped when it is taken back).
        var deliveries: Deliveries
        /// The connection serial and close count when it was made: a recipient or writer whose
        /// fd was closed and reused since is not the one meant (see `isStillMeant`).
        let serial: UInt64
        let closes: UInt64
        /// The writer's connection, for a start or a creation applied from the stream: it owns
        /// the stream or circle then.
        let owner: Int32?
        /// When it was published (monotonic): an answer still owed after `answerWithinMs` is
        /// given up (`expireUnanswered`).
        let atMs: Int64
        var takenBack = false
        /// Its idempotency key's answer on its way with it, and the repeats waiting for it.
        var idem: InFlightAnswer? = nil
    }

    /// Writes with an idempotency key awaiting the stream: lookup → write number (a repeat that
    /// comes meanwhile waits for that write's answer, `V1Application+Idempotency`).
    var inFlight: [[UInt8]: UInt64] = [:]

    let log: any ReplicationLog
    /// This node's writes awaiting the stream, by the number in their message id.
    var writes: [UInt64: Write] = [:]
    /// The numbers of those writes, per entity, oldest first.
    var byEntity: [Entity: [UInt64]] = [:]
    /// Serial of the connection on each fd (grown on demand; 8 bytes per fd, cluster mode only).
    var serials: [UInt64] = []
    var nextSerial: UInt64 = 1
    var closes: UInt64 = 0
    /// Per fd, the serial of its last subscribe, unsubscribe, watch, unwatch, resume, open, join
    /// or leave. A connection that changed what it follows after a
    /// write was made got the write's state in that reply (the write is in place since it was
    /// made): its held events are not for it (`isStillMeant`).
    var memberships: [UInt64] = []
    /// The fds that changed what they follow, or closed, while writes were pending: each once
    /// (`listed`), those of no pending write pruned (`pruneChanged`). At a confirmation only these
    /// can be recipients the write's events are no longer meant for (`markStale`).
    private(set) var changedFDs: [Int32] = []
    private var listed: [Bool] = []
    private var pruneAbove = 64
    /// Marks the stale recipients of the write being confirmed: `staleMarks[fd] == staleStamp`.
    private var staleMarks: [UInt64] = []
    private var staleStamp: UInt64 = 0
    /// How long a write may wait for the stream before its writer is told `unavailable`: far
    /// longer than a NATS leader election (about 7 s, see the tests), far shorter than a client
    /// waits for ever.
    static let answerWithinMs: Int64 = 30_000
    /// The monotonic clock (ms) `answerWithinMs` is measured on (a test's own clock in tests).
    var clock: () -> Int64 = monotonicMilliseconds
    /// Counted for `/healthz` and `/metrics`.
    var confirmed = 0
    var conflicts = 0
    var takenBack = 0
    var applied = 0
    /// Watcher counts of the other nodes (`ClusterPresence`).
    var presence = ClusterPresence()
    /// The cluster's snapshot store (nil with an in-memory log), and when this node last
    /// published to it (monotonic ms).
    var snapshots: SnapshotStore?
    var lastPublishedMs: Int64?
    /// Decisions of the tick published lately (message id → when), not to publish them every tick.
    var decisionsPublished: [String: Int64] = [:]

    init(log: any ReplicationLog) {
        self.log = log
    }

    func opened(_ fd: Int32) {
        let i = Int(fd)
        if i >= serials.count { serials.append(contentsOf: repeatElement(0, count: max(i + 1 - serials.count, 64))) }
        serials[i] = nextSerial
        nextSerial += 1
        if i < memberships.count { memberships[i] = 0 }
    }

    func membershipChanged(_ fd: Int32) {
        let i = Int(fd)
        if i >= memberships.count { memberships.append(contentsOf: repeatElement(0, count: max(i + 1 - memberships.count, 64))) }
        memberships[i] = nextSerial
        nextSerial += 1
        noteChanged(fd)
    }

    /// Lists `fd` among the changed ones if a pending write may hold events for it.
    private func noteChanged(_ fd: Int32) {
        guard !writes.isEmpty, fd >= 0 else { return }
        let i = Int(fd)
        if i >= listed.count { listed.append(contentsOf: repeatElement(false, count: max(i + 1 - listed.count, 64))) }
        guard !listed[i] else { return }
        listed[i] = true
        changedFDs.append(fd)
        if changedFDs.count > pruneAbove { pruneChanged() }
    }

    /// Drops the listed fds every pending write's events are still meant for (all of them once
    /// nothing is pending): the list holds only what changed since the oldest pending write.
    func pruneChanged() {
        if writes.isEmpty {
            for fd in changedFDs { listed[Int(fd)] = false }
            changedFDs.removeAll(keepingCapacity: true)
        } else {
            // The oldest write has the lowest serial and close count: what is still meant for it
            // is still meant for every later one.
            var oldest = writes.first!.value
            for write in writes.values where write.serial < oldest.serial { oldest = write }
            changedFDs.removeAll { fd in
                guard isStillMeant(fd, for: oldest) else { return false }
                listed[Int(fd)] = false
                return true
            }
        }
        pruneAbove = max(64, changedFDs.count * 2)
    }

    /// Marks the fds among the changed ones that `write`'s events are no longer for; false when
    /// there are none. O(changed), whatever the number of recipients.
    func markStale(for write: Write) -> Bool {
        staleStamp += 1
        var any = false
        for fd in changedFDs where !isStillMeant(fd, for: write) {
            let i = Int(fd)
            if i >= staleMarks.count { staleMarks.append(contentsOf: repeatElement(0, count: max(i + 1 - staleMarks.count, 64))) }
            staleMarks[i] = staleStamp
            any = true
        }
        return any
    }

    /// `number` answered or given up: no longer pending (nil if it was not).
    func settle(_ number: UInt64) -> Write? {
        guard let write = writes.removeValue(forKey: number) else { return nil }
        byEntity[write.entity]?.removeAll { $0 == number }
        if byEntity[write.entity]?.isEmpty == true { byEntity[write.entity] = nil }
        if writes.isEmpty { pruneChanged() }
        return write
    }

    /// Emptied delivery lists, their capacity kept, for the next held write (`replicate`).
    private var spareDeliveries: [Deliveries] = []

    /// Delivery lists for a write to hold: a spare one, or new ones.
    func takeSpareDeliveries() -> Deliveries {
        spareDeliveries.popLast() ?? Deliveries()
    }

    /// `deliveries`' storage kept for a later write (a few at most); `deliveries` is left empty.
    func recycle(_ deliveries: inout Deliveries) {
        var lists = Deliveries()
        swap(&lists, &deliveries)
        guard spareDeliveries.count < 16 else { return }
        lists.pins.removeAll(keepingCapacity: true)
        lists.panic.removeAll(keepingCapacity: true)
        lists.checkin.removeAll(keepingCapacity: true)
        spareDeliveries.append(lists)
    }

    var spareDeliveryCount: Int { spareDeliveries.count }

    /// Whether `fd` was marked by the last `markStale`.
    func isMarkedStale(_ fd: Int32) -> Bool {
        let i = Int(fd)
        return i >= 0 && i < staleMarks.count && staleMarks[i] == staleStamp
    }

    /// Whether a held event of `write` is still for `fd`: the same connection, following the
    /// same things as when the write was made.
    func isStillMeant(_ fd: Int32, for write: Write) -> Bool {
        guard isSame(fd, as: write) else { return false }
        let i = Int(fd)
        return i >= memberships.count || memberships[i] < write.serial
    }

    func closed(_ fd: Int32) {
        closes += 1
        if Int(fd) < serials.count { serials[Int(fd)] = 0 }
        noteChanged(fd)
    }

    /// Whether `fd` is still the connection that was open when `write` was made.
    func isSame(_ fd: Int32, as write: Write) -> Bool {
        isSame(fd, serial: write.serial, closes: write.closes)
    }

    /// Whether `fd` is still the connection that was open when `nextSerial` was `serial` and
    /// `closes` was `closes`.
    func isSame(_ fd: Int32, serial: UInt64, closes: UInt64) -> Bool {
        if closes == self.closes { return true }
        let i = Int(fd)
        return i < serials.count && serials[i] != 0 && serials[i] < serial
    }

    /// The subject a record is published under: `NAME.pins.<geohash, 3 characters>`, or
    /// `NAME.panic.<8 hex>` / `NAME.checkin.<8 hex>` of a digest of the id (an id is a secret
    /// and must not show in NATS's monitoring).
    func subject(for record: JournalRecord, cell: String?) -> String {
        let name = log.settings.name
        switch Self.entity(of: record) {
        case .pin: return "\(name).pins.\(cell.map { String($0.prefix(3)) } ?? "_")"
        case .stream(let id): return "\(name).panic.\(Self.shortDigest(id.description))"
        case .circle(let id): return "\(name).checkin.\(Self.shortDigest(id.description))"
        case .keptAnswer: return "\(name).idem"
        }
    }

    static func shortDigest(_ text: String, bytes: Int = 4) -> String {
        Hex.lowercase(Crypto.sha256(Array(text.utf8)).prefix(bytes))
    }

    /// `/healthz`'s `cluster` object: whether writes are taken, how far this node has applied
    /// the stream, and what it has published and confirmed.
    func health(into w: inout JSONWriter) {
        w.key("cluster")
        w.beginObject()
        w.field("name", log.settings.name)
        w.field("node", log.settings.nodeID)
        log.health(into: &w)
        w.field("pending_writes", Int64(writes.count))
        w.field("confirmed", Int64(confirmed))
        w.field("applied", Int64(applied))
        w.field("conflicts", Int64(conflicts))
        w.field("taken_back", Int64(takenBack))
        w.endObject()
    }

    static func entity(of record: JournalRecord) -> Entity {
        switch record {
        case .pinPut(let pin): return .pin(pin.id)
        case .pinRemove(let id), .pinVote(let id, _, _): return .pin(id)
        case .panicStart(let start): return .stream(start.id)
        case .panicEvent(let id, _), .panicInvite(let id, _), .panicRevoke(let id, _), .panicRemove(let id), .panicRekey(let id, _):
            return .stream(id)
        case .circlePut(let circle): return .circle(circle.id)
        case .circleRemove(let id): return .circle(id)
        case .noticeSettled(let s): return .circle(s.circle)
        case .noticeAcked(let a): return .circle(a.circle)
        case .answerKept: return .keptAnswer
        }
    }

    /// The first voter number of this node: its own range of 2^40 numbers, chosen by a digest of
    /// its id, so that a vote recorded on one node never collides with another node's voter.
    static func voterBase(nodeID: String) -> UInt64 {
        let d = Crypto.sha256(Array(nodeID.utf8))
        let tag = (UInt64(d[0]) << 16 | UInt64(d[1]) << 8 | UInt64(d[2])) & 0x7F_FFFF
        return (tag << 40) + 1
    }
}

extension V1Application {
    /// A validated change on a cluster node: held, published, answered when the stream has it.
    func replicate(_ outcome: Outcome, record: JournalRecord, caller: Caller, ref: JSONValue?, cluster: ClusterNode,
                   claim: IdempotencyClaim? = nil) {
        let entity = ClusterNode.entity(of: record)
        // The write owns its events' lists until it is confirmed or taken back; the handlers go
        // on filling `scratch`, which gets the emptied lists of an earlier write (their capacity
        // kept: no new storage per write once a few writes have been confirmed).
        var held = cluster.takeSpareDeliveries()
        swap(&held, &scratch)
        var cell: String?
        var base: UInt64?
        var owner: Int32?
        switch (record, outcome.undo) {
        case (.pinPut(let pin), .pin(_, let before)?):
            cell = pin.cell.string
            base = UInt64(bitPattern: before.updatedAt)
        case (.pinPut(let pin), _):
            cell = pin.cell.string
        case (_, .pin(_, let before)?):
            cell = before.cell.string
        case (.pinVote(let id, _, _), .vote(_, _, _, let flagged)?):
            cell = (hub.store[id] ?? flagged)?.cell.string
        case (.panicStart, _):
            owner = caller.fd
        case (.circlePut, .circle(let checkpoint)?), (.circlePut, .memberRevoked(let checkpoint, _)?):
            if let before = checkpoint.before { base = before.revision } else { owner = caller.fd }
        default:
            break
        }
        let (messageID, number) = cluster.log.nextMessageID()
        cluster.writes[number] = ClusterNode.Write(entity: entity, undo: outcome.undo, fd: caller.fd, ref: ref, reply: outcome.reply,
                                                   deliveries: held, serial: cluster.nextSerial, closes: cluster.closes, owner: owner,
                                                   atMs: cluster.clock())
        cluster.byEntity[entity, default: []].append(number)
        let inFlight = claim.flatMap { inFlightAnswer(outcome.reply, claim: $0, caller: caller) }
        if let inFlight {
            cluster.writes[number]?.idem = inFlight
            cluster.inFlight[inFlight.lookup] = number
        }
        cluster.log.publish(record, kept: inFlight?.kept, subject: cluster.subject(for: record, cell: cell), messageID: messageID, base: base) {
            [unowned self, unowned cluster] result in
            if case .failure = result { self.giveUp(number, cluster: cluster) }
        }
    }

    /// A write the stream did not take, or has not handed back in `answerWithinMs`: taken back
    /// with those made on top of it, answered `unavailable`. (If the stream has it after all, the
    /// consumer applies it later like anyone else's.)
    private func giveUp(_ number: UInt64, cluster: ClusterNode) {
        guard let entity = cluster.writes[number]?.entity else { return }
        takeBackSpeculative(entity, cluster: cluster)
        guard let write = cluster.settle(number) else { return }
        answer(write, .error(.unavailable(retryAfterMs: cluster.log.retryAfterMs)), cluster: cluster)
        server.loop.requestTurn()
    }

    /// Every speculative write of ours on `entity`, newest first, put back as it was before.
    func takeBackSpeculative(_ entity: ClusterNode.Entity, cluster: ClusterNode) {
        guard let numbers = cluster.byEntity[entity] else { return }
        let now = monotonicMilliseconds()
        for number in numbers.reversed() {
            guard var write = cluster.writes[number], !write.takenBack else { continue }
            if let undo = write.undo { takeBack(undo, now: now) }
            write.takenBack = true
            cluster.writes[number] = nil  // alone with its lists: emptied in place
            cluster.recycle(&write.deliveries)
            cluster.writes[number] = write
            cluster.takenBack += 1
        }
    }

    /// One record of the stream, in order (see `ClusterNode`).
    func applyFromStream(_ entry: ReplicatedLog.Entry, cluster: ClusterNode) {
        guard let record = entry.record else { return }
        let entity = ClusterNode.entity(of: record)
        var own: (UInt64, ClusterNode.Write)?
        if let number = cluster.log.ownWriteNumber(entry.messageID), let takenBack = cluster.writes[number]?.takenBack {
            let confirmed = !takenBack && cluster.byEntity[entity]?.first == number
            // Marked while the write is pending: settling the last one forgets what changed.
            let anyStale = confirmed && cluster.markStale(for: cluster.writes[number]!)
            var write = cluster.settle(number)!
            if confirmed {
                // Confirmed: the change is in place since it was made. Its lists, alone now,
                // are filtered in place and then kept for a later write.
                cluster.confirmed += 1
                var deliveries = Deliveries()
                swap(&deliveries, &write.deliveries)
                if anyStale { forgetStale(&deliveries, cluster: cluster) }
                if let keptAnswer = entry.kept { kept.insert(keptAnswer, address: write.idem?.address, now: Self.wallClockMs()) }
                answer(write, write.reply, cluster: cluster)
                outbox.append(deliveries: &deliveries)
                cluster.recycle(&deliveries)
                return
            }
            own = (number, write)
        }
        takeBackSpeculative(entity, cluster: cluster)
        if case .panicRevoke(let stream, _) = record { cluster.presence.changed.insert(stream) }
        // A revoked member's watchers of the circle's streams may be cut (`ReplicatedApply`).
        if case .circlePut(let circle) = record { for stream in panic.streams(of: circle.id) { cluster.presence.changed.insert(stream.id) } }
        let ownerFD = own.flatMap { (_, write) in write.owner.flatMap { cluster.isSame($0, as: write) ? $0 : nil } }
        let outcome = ReplicatedApply.apply(record, base: entry.base, owner: ownerFD, map: &hub, panic: &panic, checkin: &checkin,
                                            pins: &scratch.pins, panicOut: &scratch.panic, checkinOut: &scratch.checkin)
        cluster.applied += 1
        // Every node keeps the answer of a change it applied (or held already): a repeat sent to
        // any of them is answered from it. A change refused (`conflict`) leaves no answer.
        if let keptAnswer = entry.kept, outcome == .applied || outcome == .duplicate {
            kept.insert(keptAnswer, address: own?.1.idem?.address, now: Self.wallClockMs())
        }
        if outcome == .applied {
            releaseBudgets(after: record)
            if entry.messageID?.hasPrefix("decision-") == true, entry.publisher == cluster.log.settings.nodeID {
                noticeOfDecision(record)
            }
        }
        if let (_, write) = own {
            switch outcome {
            case .applied, .duplicate:
                answer(write, write.reply, cluster: cluster)
            case .conflict(let why):
                cluster.conflicts += 1
                answer(write, .error(RequestError("conflict", "another change came first: \(why); read the current state and try again")),
                       cluster: cluster)
            }
        }
        outbox.append(deliveries: &scratch)
    }

    /// The writer's reply, unless its connection is gone (or its fd now someone else's).
    private func answer(_ write: ClusterNode.Write, _ reply: Reply, cluster: ClusterNode) {
        if let idem = write.idem { answerWaiters(idem, reply, cluster: cluster) }
        guard cluster.isSame(write.fd, as: write) else { return }
        outbox.append(.reply(write.fd, ref: write.ref, reply))
    }

    /// Drops the recipients `markStale` marked: closed (perhaps given to a new connection) since
    /// the write, or changed what they follow since (their reply showed the write already).
    /// Called only when some are marked; the lists are the write's own, changed in place.
    private func forgetStale(_ deliveries: inout Deliveries, cluster: ClusterNode) {
        for i in deliveries.pins.indices { deliveries.pins[i].recipients.removeAll(where: cluster.isMarkedStale) }
        for i in deliveries.panic.indices { deliveries.panic[i].recipients.removeAll(where: cluster.isMarkedStale) }
        for i in deliveries.checkin.indices { deliveries.checkin[i].recipients.removeAll(where: cluster.isMarkedStale) }
        deliveries.pins.removeAll { $0.recipients.isEmpty }
        deliveries.panic.removeAll { $0.recipients.isEmpty }
        deliveries.checkin.removeAll { $0.recipients.isEmpty }
    }
}

extension V1Application {
    /// Makes this `/v1` a node of the cluster `settings` names: changes go through the stream,
    /// which is consumed from the sequence after `startAfter` (what the restored state holds).
    func joinCluster(_ settings: ClusterSettings, startAfter: UInt64, highestVoter: UInt64, logger: Logger) throws {
        let replicated = try ReplicatedLog(settings: settings, startAfter: startAfter, loop: server.loop, logger: logger) {
            [unowned self] entry in
            guard let cluster = self.cluster else { return }
            self.applyFromStream(entry, cluster: cluster)
        }
        let node = ClusterNode(log: replicated)
        node.snapshots = SnapshotStore(jetStream: replicated.jetStream, settings: SnapshotStoreSettings(
            clusterName: settings.name, maxSnapshotBytes: settings.maxSnapshotBytes, replicas: settings.replicas))
        cluster = node
        replicated.needsSnapshot = { [unowned self] first, last in self.fetchSnapshot(first: first, last: last, logger: logger) }
        replicated.onPresence { [unowned self] payload in self.presenceReceived(payload) }
        server.stateDigests.clusterSequence = { [unowned replicated] in replicated.appliedSequence }
        if let p = persistence {
            p.clusterSequence = { [unowned replicated] in replicated.appliedSequence }
            p.takeBacks = { [unowned self] in self.cluster?.takenBack ?? 0 }
            p.beforeFinalSnapshot = { [unowned self] in self.takeBackAllSpeculative() }
            p.snapshotWritten = { [unowned self] bytes, sequence in self.publishSnapshot(bytes, sequence: sequence, logger: logger) }
        }
        try replicated.start()
        server.addStopStep { [unowned replicated] in replicated.stop() }
        joined(cluster!, highestVoter: highestVoter)
    }

    /// What every node does on joining, whatever its log: its own voter numbers, the presence
    /// tick, no local journal (the stream is the journal; snapshots go on).
    func joined(_ node: ClusterNode, highestVoter: UInt64) {
        cluster = node
        log = nil
        let base = ClusterNode.voterBase(nodeID: node.log.settings.nodeID)
        let own = highestVoter >= base && highestVoter - base < (1 << 40) ? highestVoter + 1 : base
        budgets = AddressBudgets(settings: server.config.addressBudgets, firstVoter: own)
        server.addTickStep { [unowned self] in self.clusterTick() }
    }
}

extension V1Application {
    /// Another node's watcher count of a stream changed: the owner, if it is connected here,
    /// hears the new total.
    func presenceReceived(_ payload: [UInt8]) {
        guard let cluster, let stream = cluster.presence.received(payload, ownNode: cluster.log.settings.nodeID,
                                                                   nowMs: monotonicMilliseconds()) else { return }
        tellOwnerWatchers(stream)
    }

    private func tellOwnerWatchers(_ stream: StreamID) {
        guard let owner = panic.ownerConnection(of: stream) else { return }
        // The count in a delivery is this node's; the fan-out adds the other nodes' (see `send`).
        outbox.append(.panic(PanicDelivery(stream: stream, kind: .watchers(count: panic.watcherCount(stream)), recipients: [owner])))
        server.loop.requestTurn()
    }

    /// End of a turn: this node's counts that changed, to the others.
    func announceWatchers(_ cluster: ClusterNode) {
        guard !cluster.presence.changed.isEmpty else { return }
        for stream in cluster.presence.changed {
            announce(stream, count: panic.watcherCount(stream), cluster: cluster)
        }
        cluster.presence.changed.removeAll(keepingCapacity: true)
    }

    private func announce(_ stream: StreamID, count: Int, cluster: ClusterNode) {
        cluster.log.publishPresence(ClusterPresence.encode(node: cluster.log.settings.nodeID, stream: stream, count: count))
    }

    /// The writes the stream has not handed back within `answerWithinMs`, given up.
    func expireUnanswered(cluster: ClusterNode) {
        let now = cluster.clock()
        for (number, write) in cluster.writes where now - write.atMs > ClusterNode.answerWithinMs {
            giveUp(number, cluster: cluster)
        }
    }

    /// Every tick: writes waiting too long given up; all non-zero watcher counts again every `refreshMs` (a node that joined or lost
    /// messages learns them), and other nodes' counts that stopped being refreshed dropped.
    private func clusterTick() {
        guard let cluster else { return }
        expireUnanswered(cluster: cluster)
        let now = monotonicMilliseconds()
        guard now >= cluster.presence.nextRefreshMs else { return }
        cluster.presence.nextRefreshMs = now + ClusterPresence.refreshMs
        panic.forEachWatchedStream { stream, count in announce(stream, count: count, cluster: cluster) }
        for stream in cluster.presence.expire(nowMs: now) { tellOwnerWatchers(stream) }
    }
}

extension V1Application {
    /// A node in a cluster does not take the tick's decisions on its own (a missed safety timer's
    /// escalation, an abandoned stream's end): it publishes them, and every node applies them
    /// from the stream. Nodes that notice the same decision publish the same record (but for an
    /// escalation's `sentAt`, each node's clock) under the same message id (JetStream keeps one
    /// within its duplicate window; a copy that still arrives is a `duplicate`, `sentAt` aside),
    /// and one overtaken by the owner's own change is a `conflict` everywhere. A decision is published again if it is not applied within 10 s.
    func publishDecisions(now: Int64, cluster: ClusterNode) {
        let monotonic = monotonicMilliseconds()
        if !cluster.decisionsPublished.isEmpty {
            cluster.decisionsPublished = cluster.decisionsPublished.filter { monotonic - $0.value < 10_000 }
        }
        guard cluster.log.writable else { return }
        for decision in panic.dueDecisions(now: now) {
            let id = "decision-\(ClusterNode.shortDigest(decision.stream.description, bytes: 12))-\(decision.event.seq)"
            guard cluster.decisionsPublished[id] == nil else { continue }
            cluster.decisionsPublished[id] = monotonic
            let record = JournalRecord.panicEvent(decision.stream, decision.event)
            cluster.log.publish(record, kept: nil, subject: cluster.subject(for: record, cell: nil), messageID: id, base: nil) {
                [unowned cluster] result in
                if case .failure = result { cluster.decisionsPublished[id] = nil }
            }
        }
    }

    /// A record from the stream applied here: what it ended or removed gives its creator's
    /// address budget back, if this node holds it (a node's own writes did that when validated).
    func releaseBudgets(after record: JournalRecord) {
        let now = monotonicMilliseconds()
        switch record {
        case .panicEvent(let id, let event):
            if case .ended = event.kind { budgets.streamEnded(id, now: now) }
        case .pinRemove(let id):
            budgets.pinRemoved(id, now: now)
        case .pinVote(let id, _, _):
            if hub.store[id] == nil { budgets.pinRemoved(id, now: now) }
        default:
            break
        }
    }

    /// Every write of this node not yet confirmed by the stream, taken back (before the final
    /// snapshot: it must hold only what the stream holds; those that made it are applied from
    /// the stream after the restart).
    func takeBackAllSpeculative() {
        guard let cluster else { return }
        for entity in Array(cluster.byEntity.keys) { takeBackSpeculative(entity, cluster: cluster) }
    }
}

extension V1Application {
    /// A snapshot this node wrote, to the cluster's snapshot store (at most every
    /// `cluster.snapshot_publish_interval_s`; a newer one already there is left in place).
    func publishSnapshot(_ bytes: [UInt8], sequence: UInt64, logger: Logger) {
        guard let cluster, let store = cluster.snapshots, !store.isPutting else { return }
        let settings = cluster.log.settings
        let now = monotonicMilliseconds()
        if let last = cluster.lastPublishedMs, now - last < Int64(settings.snapshotPublishIntervalSeconds) * 1000 { return }
        guard bytes.count <= settings.maxSnapshotBytes else {
            logger.warning("cluster: the snapshot is larger than cluster.max_snapshot_bytes; not published",
                           metadata: ["bytes": "\(bytes.count)"])
            return
        }
        cluster.lastPublishedMs = now
        let metadata = SnapshotMetadata(clusterSequence: sequence, nodeID: settings.nodeID, formatVersion: Int(SnapshotCodec.version),
                                        takenAtMs: Self.wallClockMs())
        do throws(SnapshotStoreError) {
            try store.put(bytes, metadata: metadata) { result in
                switch result {
                case .success(let published):
                    logger.info("cluster: snapshot published", metadata: ["sequence": "\(sequence)", "bytes": "\(bytes.count)",
                                                                         "purged": "\(published.purgedMessages)"])
                case .failure(.superseded):
                    break  // another node's newer one is there
                case .failure(let error):
                    cluster.lastPublishedMs = nil  // the next snapshot tries again
                    logger.warning("cluster: snapshot not published", metadata: ["error": "\(error)"])
                }
            }
        } catch {
            cluster.lastPublishedMs = nil
            logger.warning("cluster: snapshot not published", metadata: ["error": "\(error)"])
        }
    }

    /// The stream no longer holds what comes after this node's state (a new node, or one back
    /// after longer than the stream's retention): restore the cluster's newest snapshot, if it
    /// reaches the stream's first sequence (and is not past its last: that would be another
    /// history's, from before the stream was created again), and go on from it.
    func fetchSnapshot(first: UInt64, last: UInt64, logger: Logger) {
        guard let cluster, let log = cluster.log as? ReplicatedLog, let store = cluster.snapshots else { return }
        do throws(SnapshotStoreError) {
            try store.getNewest { [unowned self, unowned log] result in
                switch result {
                case .success(.snapshot(let stored)) where stored.metadata.clusterSequence > last:
                    logger.error("cluster: the newest cluster snapshot is past the stream's last sequence: it belongs to another history of the stream (delete the bucket OBJ_<NAME>_SNAPSHOTS); retrying",
                                 metadata: ["snapshot_sequence": "\(stored.metadata.clusterSequence)", "stream_last": "\(last)"])
                    log.snapshotUnavailable()
                case .success(.snapshot(let stored)) where stored.metadata.clusterSequence + 1 >= first:
                    do {
                        try self.restore(stored.bytes, logger: logger)
                        logger.notice("cluster: state restored from a cluster snapshot",
                                      metadata: ["sequence": "\(stored.metadata.clusterSequence)", "node": "\(stored.metadata.nodeID)"])
                        log.resume(after: stored.metadata.clusterSequence)
                    } catch {
                        logger.error("cluster: the cluster snapshot does not decode; retrying", metadata: ["error": "\(error)"])
                        log.snapshotUnavailable()
                    }
                case .success(.snapshot(let stored)):
                    logger.error("cluster: the newest cluster snapshot is older than the stream's start; retrying (publish one from a node that is up to date)",
                                 metadata: ["snapshot_sequence": "\(stored.metadata.clusterSequence)", "stream_first": "\(first)"])
                    log.snapshotUnavailable()
                case .success(.none):
                    logger.error("cluster: no cluster snapshot is published yet; retrying")
                    log.snapshotUnavailable()
                case .failure(let error):
                    logger.error("cluster: the cluster snapshot could not be read; retrying", metadata: ["error": "\(error)"])
                    log.snapshotUnavailable()
                }
            }
        } catch {
            logger.error("cluster: the cluster snapshot could not be read; retrying", metadata: ["error": "\(error)"])
            log.snapshotUnavailable()
        }
    }

    /// The hubs replaced by a snapshot's state. Connections' subscriptions and watches lived in
    /// the old hubs: every `/v1` connection is closed (1013, try again later) so that clients subscribe
    /// again and see the restored state.
    private func restore(_ bytes: [UInt8], logger: Logger) throws {
        let snapshot = try SnapshotCodec.decode(bytes)
        let image = StateImage(snapshot)
        let now = Self.wallClockMs()
        let (map, restoredPanic) = image.restore(pinSettings: hub.settings, panicSettings: panic.settings, now: now)
        let circles = image.restoreCircles(settings: checkin.settings, now: now)
        for case let connection? in server.connections where hasSession(connection.fd) {
            connection.close(code: .tryAgainLater, reason: "state restored from the cluster; reconnect")
        }
        hub = map
        panic = restoredPanic
        checkin = circles
        kept = IdempotencyTable(settings: kept.settings)
        for answer in image.keptAnswers { kept.insert(answer, address: nil, now: now) }
        cluster?.inFlight.removeAll()
        cluster?.writes.removeAll()
        cluster?.byEntity.removeAll()
        cluster?.pruneChanged()
    }
}

extension ClientOperation {
    /// Whether it changes what the connection follows (pins, counts, a stream, a circle).
    var changesMembership: Bool {
        switch self {
        case .subscribe, .subscribeClusters, .unsubscribe, .panicWatch, .panicWatchAsMember, .panicUnwatch, .panicResume: return true
        case .checkin(.open), .checkin(.join), .checkin(.leave): return true
        default: return false
        }
    }
}

import Logging
import VigilReplication
import VigilCore
import VigilLoop
import VigilNATS
import VigilState
import VigilWire

/// `/v1` as a node of a cluster (docs/CLUSTER.md, "The replicated log"): the replicated log, the
/// node's writes held until the stream confirms them (`SpeculativeWrites`, carried out by
/// `V1Application+Replication.swift`), the other nodes' watcher counts, the tick's decisions and
/// the cluster's snapshots. Its state changes only through its methods.
final class ReplicationNode {
    let log: any ReplicationLog
    /// This node's writes awaiting the stream: changed only by `V1Application+Replication.swift`.
    var speculative = SpeculativeWrites()
    /// Watcher counts of the other nodes, and this node's that changed in this turn.
    private(set) var presence = WatcherPresence()
    /// The cluster's snapshot store (nil with an in-memory log), and when this node last
    /// published to it (monotonic ms).
    let snapshots: SnapshotStore?
    private var lastPublishedMs: Int64?
    /// Decisions of the tick published lately (message id → when), not to publish them every tick.
    private var decisionsPublished: [String: Int64] = [:]
    /// The monotonic clock (ms) the write deadline is measured on (a test's own clock in tests).
    var clock: () -> Int64 = monotonicMilliseconds

    init(log: any ReplicationLog, snapshots: SnapshotStore? = nil) {
        self.log = log
        self.snapshots = snapshots
    }

    /// How long a write may wait for the stream before its writer is told `unavailable`
    /// (`cluster.write_deadline_ms`, W): longer than a NATS leader election (at most about 9 s)
    /// plus one acknowledgement timeout, so that a write held through one election is confirmed.
    var answerWithinMs: Int64 { Int64(log.settings.writeDeadlineMs) }

    // MARK: watcher counts

    /// This node's watcher count of `stream` may have changed: announced at the end of the turn.
    func watchersChanged(_ stream: StreamID) { presence.changed.insert(stream) }

    func watchersChanged<S: Sequence>(_ streams: S) where S.Element == StreamID { presence.changed.formUnion(streams) }

    /// The streams whose count changed in this turn, taken (the set is emptied).
    func takeChangedWatchers() -> [StreamID] {
        guard !presence.changed.isEmpty else { return [] }
        let streams = Array(presence.changed)
        presence.changed.removeAll(keepingCapacity: true)
        return streams
    }

    /// Another node's count: the stream whose total changed, or nil.
    func presenceReceived(_ payload: [UInt8], nowMs: Int64) -> StreamID? {
        presence.received(payload, ownNode: log.settings.nodeID, nowMs: nowMs)
    }

    func remoteWatchers(_ stream: StreamID) -> Int { presence.remoteWatchers(stream) }

    /// Whether every count is due to be announced again (then the next time is set), and the
    /// streams whose remote counts expired.
    func presenceTick(nowMs: Int64) -> (refresh: Bool, expired: [StreamID]) {
        guard nowMs >= presence.nextRefreshMs else { return (false, []) }
        presence.nextRefreshMs = nowMs + WatcherPresence.refreshMs
        return (true, presence.expire(nowMs: nowMs))
    }

    // MARK: decisions

    /// Whether decision `id` is to be published now (not published in the last 10 s).
    func shouldPublishDecision(_ id: String, nowMs: Int64) -> Bool {
        if !decisionsPublished.isEmpty { decisionsPublished = decisionsPublished.filter { nowMs - $0.value < 10_000 } }
        guard decisionsPublished[id] == nil else { return false }
        decisionsPublished[id] = nowMs
        return true
    }

    /// Its publish failed: the next tick publishes it again.
    func decisionNotPublished(_ id: String) { decisionsPublished[id] = nil }

    // MARK: snapshots

    /// Whether a snapshot is to be published now (at most every `snapshot_publish_interval_s`);
    /// then it counts as published unless `snapshotNotPublished` follows.
    func startSnapshotPublish(nowMs: Int64) -> Bool {
        guard let store = snapshots, !store.isPutting else { return false }
        if let last = lastPublishedMs, nowMs - last < Int64(log.settings.snapshotPublishIntervalSeconds) * 1000 { return false }
        lastPublishedMs = nowMs
        return true
    }

    /// The next snapshot tries again.
    func snapshotNotPublished() { lastPublishedMs = nil }

    /// The subject a record is published under: `NAME.pins.<geohash, 3 characters>`, or
    /// `NAME.panic.<8 hex>` / `NAME.checkin.<8 hex>` of a digest of the id (an id is a secret
    /// and must not show in NATS's monitoring).
    func subject(for record: JournalRecord, cell: String?) -> String {
        let name = log.settings.name
        switch ChangeEntity(record) {
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
        let counts = speculative.counts
        w.key("cluster")
        w.beginObject()
        w.field("name", log.settings.name)
        w.field("node", log.settings.nodeID)
        log.health(into: &w)
        w.field("pending_writes", Int64(speculative.pendingCount))
        w.field("confirmed", Int64(counts.confirmed))
        w.field("applied", Int64(counts.applied))
        w.field("conflicts", Int64(counts.conflicts))
        w.field("taken_back", Int64(counts.takenBack))
        w.field("expired", Int64(counts.expired))
        w.endObject()
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
    /// Makes this `/v1` a node of the cluster `settings` names: changes go through the stream,
    /// which is consumed from the sequence after `startAfter` (what the restored state holds).
    func joinReplication(_ settings: ReplicationSettings, startAfter: UInt64, highestVoter: UInt64, logger: Logger) throws {
        let replicated = try ReplicatedLog(settings: settings, startAfter: startAfter, loop: server.loop, logger: logger) {
            [unowned self] entry in
            guard let replication = self.replication else { return }
            self.applyFromStream(entry, replication: replication)
        }
        let node = ReplicationNode(log: replicated, snapshots: SnapshotStore(jetStream: replicated.jetStream, settings: SnapshotStoreSettings(
            replicationName: settings.name, maxSnapshotBytes: settings.maxSnapshotBytes, replicas: settings.replicas)))
        replication = node
        replicated.needsSnapshot = { [unowned self, unowned replicated] first, last in
            self.fetchSnapshot(first: first, last: last, log: replicated, logger: logger)
        }
        replicated.onPresence { [unowned self] payload in self.presenceReceived(payload) }
        server.stateDigests.replicatedSequence = { [unowned replicated] in replicated.appliedSequence }
        if let p = persistence {
            p.replicatedSequence = { [unowned replicated] in replicated.appliedSequence }
            p.takeBacks = { [unowned self] in self.replication?.speculative.counts.takenBack ?? 0 }
            p.beforeFinalSnapshot = { [unowned self] in self.takeBackAllSpeculative() }
            p.snapshotWritten = { [unowned self] bytes, sequence in self.publishSnapshot(bytes, sequence: sequence, logger: logger) }
        }
        try replicated.start()
        server.addStopStep { [unowned replicated] in replicated.stop() }
        joined(node, highestVoter: highestVoter)
    }

    /// What every node does on joining, whatever its log: its own voter numbers, the presence
    /// tick, no local journal (the stream is the journal; snapshots go on).
    func joined(_ node: ReplicationNode, highestVoter: UInt64) {
        replication = node
        log = nil
        let base = ReplicationNode.voterBase(nodeID: node.log.settings.nodeID)
        let own = highestVoter >= base && highestVoter - base < (1 << 40) ? highestVoter + 1 : base
        budgets = AddressBudgets(settings: server.config.addressBudgets, firstVoter: own)
        server.addTickStep { [unowned self] in self.replicationNodeTick() }
    }
}

extension V1Application {
    /// Another node's watcher count of a stream changed: the owner, if it is connected here,
    /// hears the new total.
    func presenceReceived(_ payload: [UInt8]) {
        guard let replication, let stream = replication.presenceReceived(payload, nowMs: monotonicMilliseconds()) else { return }
        tellOwnerWatchers(stream)
    }

    private func tellOwnerWatchers(_ stream: StreamID) {
        guard let owner = panic.ownerConnection(of: stream) else { return }
        // The count in a delivery is this node's; the fan-out adds the other nodes' (see `send`).
        outbox.append(.panic(PanicDelivery(stream: stream, kind: .watchers(count: panic.watcherCount(stream)), recipients: [owner])))
        server.loop.requestTurn()
    }

    /// End of a turn: this node's counts that changed, to the others.
    func announceWatchers(_ replication: ReplicationNode) {
        for stream in replication.takeChangedWatchers() {
            announce(stream, count: panic.watcherCount(stream), replication: replication)
        }
    }

    private func announce(_ stream: StreamID, count: Int, replication: ReplicationNode) {
        replication.log.publishPresence(WatcherPresence.encode(node: replication.log.settings.nodeID, stream: stream, count: count))
    }

    /// Every tick: writes waiting too long given up; all non-zero watcher counts again every `refreshMs` (a node that joined or lost
    /// messages learns them), and other nodes' counts that stopped being refreshed dropped.
    private func replicationNodeTick() {
        guard let replication else { return }
        replicationTick(replication)
        let (refresh, expired) = replication.presenceTick(nowMs: monotonicMilliseconds())
        guard refresh else { return }
        panic.forEachWatchedStream { stream, count in announce(stream, count: count, replication: replication) }
        for stream in expired { tellOwnerWatchers(stream) }
    }
}

extension V1Application {
    /// A node in a cluster does not take the tick's decisions on its own (a missed safety timer's
    /// escalation, an abandoned stream's end): it publishes them, and every node applies them
    /// from the stream. Nodes that notice the same decision publish the same record (but for an
    /// escalation's `sentAt`, each node's clock) under the same message id (JetStream keeps one
    /// within its duplicate window; a copy that still arrives is a `duplicate`, `sentAt` aside),
    /// and one overtaken by the owner's own change is a `conflict` everywhere. A decision is published again if it is not applied within 10 s.
    func publishDecisions(now: Int64, replication: ReplicationNode) {
        let monotonic = monotonicMilliseconds()
        guard replication.log.writable else { return }
        for decision in panic.dueDecisions(now: now) {
            let id = "decision-\(ReplicationNode.shortDigest(decision.stream.description, bytes: 12))-\(decision.event.seq)"
            guard replication.shouldPublishDecision(id, nowMs: monotonic) else { continue }
            let record = JournalRecord.panicEvent(decision.stream, decision.event)
            replication.log.publish(record, kept: nil, subject: replication.subject(for: record, cell: nil), messageID: id, base: nil) {
                [unowned replication] result in
                if case .failure = result { replication.decisionNotPublished(id) }
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
        case .pinPut, .panicStart, .panicInvite, .panicRevoke, .panicRemove, .panicRekey, .circlePut, .circleRemove,
             .noticeSettled, .noticeAcked, .answerKept:
            break  // nothing ended or removed that holds a budget
        }
    }
}

extension V1Application {
    /// A snapshot this node wrote, to the cluster's snapshot store (at most every
    /// `cluster.snapshot_publish_interval_s`; a newer one already there is left in place).
    func publishSnapshot(_ bytes: [UInt8], sequence: UInt64, logger: Logger) {
        guard let replication, let store = replication.snapshots, !store.isPutting else { return }
        let settings = replication.log.settings
        guard bytes.count <= settings.maxSnapshotBytes else {
            logger.warning("cluster: the snapshot is larger than cluster.max_snapshot_bytes; not published",
                           metadata: ["bytes": "\(bytes.count)"])
            return
        }
        guard replication.startSnapshotPublish(nowMs: monotonicMilliseconds()) else { return }
        let metadata = SnapshotMetadata(replicatedSequence: sequence, nodeID: settings.nodeID, formatVersion: Int(SnapshotCodec.version),
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
                    replication.snapshotNotPublished()
                    logger.warning("cluster: snapshot not published", metadata: ["error": "\(error)"])
                }
            }
        } catch {
            replication.snapshotNotPublished()
            logger.warning("cluster: snapshot not published", metadata: ["error": "\(error)"])
        }
    }

    /// The stream no longer holds what comes after this node's state (a new node, or one back
    /// after longer than the stream's retention): restore the cluster's newest snapshot, if it
    /// reaches the stream's first sequence (and is not past its last: that would be another
    /// history's, from before the stream was created again), and go on from it.
    func fetchSnapshot(first: UInt64, last: UInt64, log: ReplicatedLog, logger: Logger) {
        guard let store = replication?.snapshots else { return }
        do throws(SnapshotStoreError) {
            try store.getNewest { [unowned self, unowned log] result in
                switch result {
                case .success(.snapshot(let stored)) where stored.metadata.replicatedSequence > last:
                    logger.error("cluster: the newest cluster snapshot is past the stream's last sequence: it belongs to another history of the stream (delete the bucket OBJ_<NAME>_SNAPSHOTS); retrying",
                                 metadata: ["snapshot_sequence": "\(stored.metadata.replicatedSequence)", "stream_last": "\(last)"])
                    log.snapshotUnavailable()
                case .success(.snapshot(let stored)) where stored.metadata.replicatedSequence + 1 >= first:
                    do {
                        try self.restore(stored.bytes, logger: logger)
                        logger.notice("cluster: state restored from a cluster snapshot",
                                      metadata: ["sequence": "\(stored.metadata.replicatedSequence)", "node": "\(stored.metadata.nodeID)"])
                        log.resume(after: stored.metadata.replicatedSequence)
                    } catch {
                        logger.error("cluster: the cluster snapshot does not decode; retrying", metadata: ["error": "\(error)"])
                        log.snapshotUnavailable()
                    }
                case .success(.snapshot(let stored)):
                    logger.error("cluster: the newest cluster snapshot is older than the stream's start; retrying (publish one from a node that is up to date)",
                                 metadata: ["snapshot_sequence": "\(stored.metadata.replicatedSequence)", "stream_first": "\(first)"])
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
        replication?.speculative.reset()
    }
}

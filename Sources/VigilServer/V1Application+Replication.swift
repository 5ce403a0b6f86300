import VigilReplication
import VigilLoop
import VigilCore
import VigilState

/// The one place a cluster node's held writes (`SpeculativeWrites`) meet the loop: events go in,
/// the actions that come out are carried out here, in order.
extension V1Application {
    /// A validated change on a cluster node: held, published, answered when the stream has it.
    func replicate(_ outcome: Outcome, record: JournalRecord, caller: Caller, ref: JSONValue?, replication: ReplicationNode,
                   claim: IdempotencyClaim? = nil) {
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
            break  // the subject needs no cell, and nothing else is the writer's (the pairs are many; none is missed)
        }
        let (messageID, number) = replication.log.nextMessageID()
        let inFlight = claim.flatMap { inFlightAnswer(outcome.reply, claim: $0, caller: caller) }
        let publication = SpeculativeWrites.Publication(record: record, kept: inFlight?.kept,
                                                        subject: replication.subject(for: record, cell: cell), messageID: messageID, base: base)
        // The write owns its events' lists until it is confirmed or taken back; the handlers go on
        // filling `scratch`, which gets the emptied lists of an earlier write.
        let publish = replication.speculative.hold(number, entity: ChangeEntity(record), undo: outcome.undo, fd: caller.fd, ref: ref,
                                               reply: outcome.reply, events: &scratch, owner: owner, publication: publication,
                                               idem: inFlight, nowMs: replication.clock())
        perform([publish], replication: replication)
    }

    /// One record of the stream, in order (see `SpeculativeWrites`).
    func applyFromStream(_ entry: ReplicatedLog.Entry, replication: ReplicationNode) {
        guard let record = entry.record else { return }
        var actions: [SpeculativeWrites.Action] = []
        var deliveries = Deliveries()
        let step = replication.speculative.streamed(replication.log.ownWriteNumber(entry.messageID), entity: ChangeEntity(record),
                                                kept: entry.kept, into: &actions, deliveries: &deliveries)
        perform(actions, replication: replication)
        guard case .apply(let own, let ownerFD) = step else {
            outbox.append(deliveries: &deliveries)
            replication.speculative.recycle(&deliveries)
            return
        }
        if case .panicRevoke(let stream, _) = record { replication.watchersChanged(stream) }
        // A revoked member's watchers of the circle's streams may be cut (`ReplicatedApply`).
        if case .circlePut(let circle) = record { replication.watchersChanged(panic.streams(of: circle.id).map(\.id)) }
        let outcome = ReplicatedApply.apply(record, base: entry.base, owner: ownerFD, map: &hub, panic: &panic, checkin: &checkin,
                                            pins: &scratch.pins, panicOut: &scratch.panic, checkinOut: &scratch.checkin)
        // Every node keeps the answer of a change it applied (or held already): a repeat sent to
        // any of them is answered from it. A change refused (`conflict`) leaves no answer.
        if let keptAnswer = entry.kept, outcome == .applied || outcome == .duplicate {
            kept.insert(keptAnswer, address: own?.idem?.address, now: Self.wallClockMs())
        }
        if outcome == .applied {
            releaseBudgets(after: record)
            if entry.messageID?.hasPrefix("decision-") == true, entry.publisher == replication.log.settings.nodeID {
                noticeOfDecision(record)
            }
        }
        if let own {
            actions.removeAll(keepingCapacity: true)
            replication.speculative.settled(own, outcome, into: &actions)
            perform(actions, replication: replication)
        }
        outbox.append(deliveries: &scratch)
    }

    /// The tick: held writes past the deadline given up, attempts due published again.
    func replicationTick(_ replication: ReplicationNode) {
        var actions: [SpeculativeWrites.Action] = []
        replication.speculative.tick(nowMs: replication.clock(), deadlineMs: replication.answerWithinMs, retryAfterMs: replication.log.retryAfterMs,
                                 into: &actions)
        perform(actions, replication: replication)
        if !actions.isEmpty { server.loop.requestTurn() }
    }

    /// Every write of this node not yet confirmed by the stream, taken back (before the final
    /// snapshot: it must hold only what the stream holds).
    func takeBackAllSpeculative() {
        guard let replication else { return }
        var actions: [SpeculativeWrites.Action] = []
        replication.speculative.takeBackAll(into: &actions)
        perform(actions, replication: replication)
    }

    /// A repeat of a write of this node still on its way through the stream: it waits for that
    /// write's answer (true), or is `idem_conflict` for another request (true); false when no
    /// write with its key is in flight here.
    func waitForInFlight(_ claim: IdempotencyClaim, fd: Int32, ref: JSONValue?, replication: ReplicationNode) -> Bool {
        switch replication.speculative.wait(lookup: IdempotencySeal.lookup(key: claim.key), requestDigest: IdempotencySeal.requestDigest(claim),
                                        fd: fd, ref: ref) {
        case .none:
            return false
        case .conflict:
            stats.idemConflicts += 1
            outbox.append(.reply(fd, ref: ref, .error(Self.idemConflict)))
            return true
        case .waiting:
            return true
        }
    }

    /// The actions, in order.
    private func perform(_ actions: [SpeculativeWrites.Action], replication: ReplicationNode) {
        guard !actions.isEmpty else { return }
        let now = monotonicMilliseconds()
        for action in actions {
            switch action {
            case .publish(let number, let p):
                replication.log.publish(p.record, kept: p.kept, subject: p.subject, messageID: p.messageID, base: p.base) {
                    [unowned self, unowned replication] result in
                    guard case .failure(let error) = result else { return }
                    var actions: [SpeculativeWrites.Action] = []
                    replication.speculative.publishFailed(number, error, nowMs: replication.clock(), ackTimeoutMs: Int64(replication.log.settings.ackTimeoutMs),
                                                      deadlineMs: replication.answerWithinMs, retryAfterMs: replication.log.retryAfterMs, into: &actions)
                    self.perform(actions, replication: replication)
                    if !actions.isEmpty { self.server.loop.requestTurn() }
                }
            case .takeBack(let undo):
                takeBack(undo, now: now)
            case .reply(let fd, let ref, let reply):
                outbox.append(.reply(fd, ref: ref, reply))
            case .repeated(let fd, let ref, let members):
                stats.idemRepeats += 1
                outbox.append(.reply(fd, ref: ref, .repeated(members: members)))
            case .keep(let answer, let address):
                kept.insert(answer, address: address, now: Self.wallClockMs())
            case .countRepublished:
                replication.log.countRepublished()
            }
        }
    }

    /// The cluster's part of `/metrics`.
    func replicationMetrics(_ sync: inout MetricsSync) {
        guard let replication else { return }
        replication.log.metrics(&sync)
        sync.counter("vigil_cluster_writes_expired_total", replication.speculative.counts.expired,
                     help: "Held writes answered unavailable because the stream did not confirm them within cluster.write_deadline_ms.")
        sync.gauge("vigil_cluster_pending_writes", replication.speculative.pendingCount, help: "This node's writes awaiting the stream.")
    }
}

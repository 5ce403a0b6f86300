import VigilCore

/// The live counterpart of `StateImage.apply`: one record of the replicated log applied to the
/// hubs of a running node, with the deliveries the original operation made (docs/CLUSTER.md,
/// "The replicated log (design)"). Every node, the writer included, calls it for every record in
/// stream order; the writer validated the request with the hub's own operation, took the change
/// back, published the record, and learns here whether it applied (`ReplicatedOutcome`).
///
/// The outcome depends only on the record, `base` and the hubs' durable state, so every node
/// reaches the same one: two writers that validated against the same state are ordered by the
/// stream, the first applies everywhere and the second is a `conflict` everywhere. A record
/// delivered again is a `duplicate` (or, where the thing it changed is gone since, a `conflict`):
/// either way nothing changes and nothing is delivered.
public enum ReplicatedApply {
    /// Applies `record` to the hubs, appending deliveries to `pins`, `panicOut` and `checkinOut`.
    ///
    /// - `base`: for an edit, the state the writer validated against: the pin's `updatedAt`
    ///   (`UInt64(bitPattern:)`) for a `pinPut`, the circle's `revision` for a `circlePut`; nil
    ///   for a create. Ignored by the other records.
    /// - `owner`: the writer's own connection, on the writer's node only (nil elsewhere): it owns
    ///   a stream a `panicStart` starts, and listens to a circle a `circlePut` creates.
    ///
    /// Rules by record (each in its hub's `…+Replicated.swift`):
    /// - `pinPut`: create (absent; capacity not checked) or edit (`updatedAt == base`, not near
    ///   expiry: `ReplicatedTiming`; votes kept as held);
    /// - `pinRemove`: removed if held; `pinVote`: `MapHub.vote`'s rules;
    /// - `panicStart`: inserted if absent (capacity not checked); `panicEvent`: the next seq only;
    /// - `panicInvite`: active and under `maxWatchTokens`; `panicRevoke`, `panicRemove`: if live;
    /// - `circlePut`: create (absent; capacity not checked) or edit (`revision == base`, not near its
    ///   idle removal); `circleRemove`: if held.
    ///
    /// Streams of a circle (docs/PROTOCOL.md, "Circles as standing contacts") join the two hubs as
    /// the writer's own operation did: a start, an escalation or an end applied is told to the
    /// circle's listeners (`checkin.panic`), and a `circlePut` that removes a member cuts that
    /// member's watchers of the circle's streams, on every node.
    ///
    /// Capacity (`maxPins`, `maxCircles`) is the writer's to check: a node's count depends on its
    /// own clock (expiry, idle removal), so refusing here would split nodes at the limit.
    public static func apply(_ record: JournalRecord, base: UInt64?, owner: WatcherID?,
                             map: inout MapHub, panic: inout PanicHub, checkin: inout CheckinHub,
                             pins: inout [PinDelivery], panicOut: inout [PanicDelivery],
                             checkinOut: inout [CheckinDelivery]) -> ReplicatedOutcome {
        switch record {
        case .pinPut(let pin):
            return map.applyReplicatedPut(pin, base: base, out: &pins)
        case .pinRemove(let id):
            return map.applyReplicatedRemove(id, out: &pins)
        case .pinVote(let id, let voter, let value):
            return map.applyReplicatedVote(id, voter: voter, value: value, out: &pins)
        case .panicStart(let start):
            guard let stream = try? start.stream() else { return .conflict("the stream's start is out of range") }
            let outcome = panic.applyReplicatedStart(stream, owner: owner)
            if outcome == .applied, let circle = stream.circle { checkin.tell(.started(stream), of: circle, out: &checkinOut) }
            return outcome
        case .panicEvent(let id, let event):
            let outcome = panic.applyReplicatedEvent(id, event, out: &panicOut)
            if outcome == .applied, let stream = panic.stream(id), let circle = stream.circle,
               let news = CirclePanic.of(event, in: stream) {
                checkin.tell(news, of: circle, out: &checkinOut)
            }
            return outcome
        case .panicInvite(let id, let digest):
            return panic.applyReplicatedInvite(id, digest)
        case .panicRevoke(let id, let digest):
            return panic.applyReplicatedRevoke(id, digest, out: &panicOut)
        case .panicRekey(let id, let keys):
            return panic.applyReplicatedRekey(id, keys, out: &panicOut)
        case .panicRemove(let id):
            return panic.applyReplicatedRemove(id)
        case .circlePut(let circle):
            let held = checkin.circle(circle.id)
            let outcome = checkin.applyReplicatedPut(circle, base: base, owner: owner, out: &checkinOut)
            if outcome == .applied, let held {
                for member in held.members where !circle.members.contains(where: { $0.id == member.id }) {
                    panic.cutMember(member.tokenDigest, of: circle.id, out: &panicOut)
                }
            }
            return outcome
        case .circleRemove(let id):
            return checkin.applyReplicatedRemove(id, out: &checkinOut)
        case .noticeSettled(let settlement):
            // The node that sent the notice settled it; the others keep it, for a restart of theirs.
            return checkin.recordSettlement(settlement) ? .applied : .duplicate
        case .noticeAcked(let ack):
            return checkin.recordAck(ack) != nil ? .applied : .duplicate
        case .answerKept:
            // Kept answers are not replicated (docs/CLUSTER.md): a node's own table holds them.
            return .duplicate
        }
    }
}

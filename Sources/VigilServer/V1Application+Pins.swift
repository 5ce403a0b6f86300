import VigilCore
import VigilState

/// `pin.create`, `pin.update`, `pin.delete`, `pin.vote` (docs/PROTOCOL.md, "Pins").
///
/// A wrong edit token and an unknown pin get the same `forbidden`; an id that is not a UUID
/// (decoded as nil) is answered like an unknown pin.
extension V1Application {
    /// Counted against the caller's address (pins created per hour, live pins) as well as the store.
    func createPin(_ draft: PinDraft, caller: Caller, now: Int64) -> Outcome {
        if let refused = admit(budgets.admitPinCreate(caller.address, now: caller.monotonicMs), rate: .addressPinCreates) { return refused }
        let token = secrets.newToken()
        let id = PinID(random: secrets.randomBytes(16))
        switch hub.create(draft, id: id, editDigest: secrets.digest(ofToken: token), now: now, out: &scratch.pins) {
        case .success(let pin):
            budgets.pinCreated(pin.id, by: caller.address, now: caller.monotonicMs)
            return Outcome(.pinCreated(pin, editToken: token), record: .pinPut(pin), undo: .pinCreated(pin.id))
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }

    func updatePin(_ id: PinID?, token: String, changes: PinChanges, now: Int64) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.forbidden))) }
        let before = hub.store[id]  // the update replaces the pin: holding this copies nothing
        // Every edit moves `updated_at` on, by a millisecond at least: a cluster node's record
        // names the version it edited by it (`ReplicationNode`), so two edits never share one.
        let now = before.map { max(now, $0.updatedAt + 1) } ?? now
        let result = hub.update(id, digest: secrets.digest(ofToken: token), changes: changes, now: now, out: &scratch.pins)
        guard case .success(let pin) = result, let before else { return Outcome(.from(result)) }
        return Outcome(.pin(pin), record: .pinPut(pin), undo: .pin(id, before: before))
    }

    func deletePin(_ id: PinID?, token: String, caller: Caller) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.forbidden))) }
        switch hub.delete(id, digest: secrets.digest(ofToken: token), out: &scratch.pins) {
        case .success(let pin):
            budgets.pinRemoved(pin.id, now: caller.monotonicMs)
            return Outcome(.pinDeleted(pin.id), record: .pinRemove(pin.id), undo: .pin(pin.id, before: pin))
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }

    /// One vote per address per pin (the address's voter number, which a reconnect keeps). The
    /// record is the vote itself, the pin's removal when the vote flagged it away, or nothing when
    /// the same vote came again.
    func votePin(_ id: PinID?, value: Int8, caller: Caller) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.notFound))) }
        guard let voter = budgets.voter(for: caller.address, now: caller.monotonicMs) else {
            stats.refused(.addressUntracked)
            return Outcome(.error(AddressAdmission.overLimit(.trackedAddresses).error!))
        }
        // Read through a temporary: a copy of the pin held across the vote would make it copy the
        // pin's vote table.
        let previous = hub.store[id]?.votes[voter]
        switch hub.vote(id, voter: voter, value: value, out: &scratch.pins) {
        case .success(let vote):
            if vote.change == .flagged { budgets.pinRemoved(id, now: caller.monotonicMs) }
            // In a cluster a vote that flags is published as the vote: every node applies the
            // threshold itself (and tells its subscribers `flagged`, not `deleted`).
            let record = replication != nil && vote.change == .flagged ? .pinVote(id, voter: voter, value: value) : JournalRecord.afterVote(vote)
            return Outcome(.pin(vote.pin), record: record,
                           undo: .vote(id, voter: voter, previous: previous, flagged: vote.change == .flagged ? vote.pin : nil))
        case .failure(let failure):
            return Outcome(.error(.from(failure)))
        }
    }
}

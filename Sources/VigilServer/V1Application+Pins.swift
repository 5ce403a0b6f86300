import VigilCore
import VigilState

/// `pin.create`, `pin.update`, `pin.delete`, `pin.vote` (docs/PROTOCOL.md, "Pins").
///
/// A wrong edit token and an unknown pin get the same `forbidden`; an id that is not a UUID
/// (decoded as nil) is answered like an unknown pin.
extension V1Application {
    func createPin(_ draft: PinDraft, now: Int64) -> Outcome {
        let token = secrets.newToken()
        let id = PinID(random: secrets.randomBytes(16))
        switch hub.create(draft, id: id, editDigest: secrets.digest(ofToken: token), now: now, out: &scratch.pins) {
        case .success(let pin): return Outcome(.pinCreated(pin, editToken: token), record: .pinPut(pin))
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }

    func updatePin(_ id: PinID?, token: String, changes: PinChanges, now: Int64) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.forbidden))) }
        let result = hub.update(id, digest: secrets.digest(ofToken: token), changes: changes, now: now, out: &scratch.pins)
        guard case .success(let pin) = result else { return Outcome(.from(result)) }
        return Outcome(.pin(pin), record: .pinPut(pin))
    }

    func deletePin(_ id: PinID?, token: String) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.forbidden))) }
        switch hub.delete(id, digest: secrets.digest(ofToken: token), out: &scratch.pins) {
        case .success(let pin): return Outcome(.pinDeleted(pin.id), record: .pinRemove(pin.id))
        case .failure(let failure): return Outcome(.error(.from(failure)))
        }
    }

    /// The record is the pin as the hub now holds it, or its removal when the vote flagged it away.
    func votePin(_ id: PinID?, value: Int8, voter: UInt64, now: Int64) -> Outcome {
        guard let id else { return Outcome(.error(.from(PinFailure.notFound))) }
        let result = hub.vote(id, session: voter, value: value, now: now, out: &scratch.pins)
        guard case .success = result else { return Outcome(.from(result)) }
        return Outcome(.from(result), record: .pinState(id, in: hub))
    }
}

import VigilCore
import VigilState

/// Writes that are safe to retry (docs/PROTOCOL.md): a request with an `idem` key whose answer is
/// kept gets that answer again, marked `"repeat":true`, and nothing is applied again; the same key
/// with another request is `idem_conflict`.
///
/// Where it sits in a turn: a request with a key is looked up right after it is decoded (before
/// the rate limits and the disk's state: a repeat changes nothing). A write that succeeds keeps
/// its answer, sealed, in `kept` and journals it (`answerKept`) after its change, in the same
/// turn, so both are committed or neither: if the journal fails the turn, the answers kept in it
/// are forgotten with the changes, and the replies of repeats that showed them are withdrawn like
/// a read's. Only `ok` answers are kept: a client may fix a refused request and send it again
/// under the same key.
///
/// Standalone only: a cluster node does not keep answers (docs/CLUSTER.md, "Idempotency keys").
extension V1Application {
    static let idemConflict = RequestError("idem_conflict", field: "idem",
                                           "this idem key was used for a different request; choose a new key for a new write")

    /// Answers `request` from a kept answer if its key has one; true when it did (the request is
    /// then done).
    func answerFromKept(_ claim: IdempotencyClaim, fd: Int32, ref: JSONValue?) -> Bool {
        let lookup = IdempotencySeal.lookup(key: claim.key)
        guard let answer = kept.answer(lookup, now: Self.wallClockMs()) else { return false }
        guard answer.requestDigest == IdempotencySeal.requestDigest(claim),
              let members = IdempotencySeal.open(answer, key: claim.key) else {
            stats.idemConflicts += 1
            outbox.append(.reply(fd, ref: ref, .error(Self.idemConflict)))
            return true
        }
        stats.idemRepeats += 1
        let first = outbox.count
        outbox.append(.reply(fd, ref: ref, .repeated(members: members)))
        // Shown before the journal took the first answer: withdrawn with it if it does not.
        if keptThisTurn.contains(lookup) { pending.noteReader(first..<outbox.count) }
        return true
    }

    /// Keeps the answer of a write with a key (not an error: those are not kept), sealed under
    /// the key, and journals it after the change.
    func keepAnswer(_ reply: Reply, claim: IdempotencyClaim, caller: Caller) {
        var w = JSONWriter(capacity: 512)
        guard let members = ServerMessages.keptMembers(of: reply, into: &w) else { return }
        let now = Self.wallClockMs()
        guard let answer = IdempotencySeal.keep(members, claim: claim, nonce: secrets.randomBytes(IdempotencySeal.nonceBytes), now: now),
              kept.insert(answer, address: caller.address, now: now) else { return }
        if let log {
            log.append(.answerKept(answer))
            keptThisTurn.append(answer.lookup)
        }
    }

    /// The turn was not recorded: its kept answers go with its changes.
    func forgetUnrecordedAnswers() {
        for lookup in keptThisTurn { kept.forget(lookup) }
    }

    /// Answers restored from the state directory (no address: they count only against `max_keys`),
    /// and the table's export for every snapshot.
    func restoreKeptAnswers(_ p: Persistence) {
        let now = Self.wallClockMs()
        for answer in p.recovered.keptAnswers { kept.insert(answer, address: nil, now: now) }
        p.keptAnswers = { [unowned self] in self.kept.export(now: Self.wallClockMs()) }
    }
}

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
/// On a cluster node (docs/CLUSTER.md, "Idempotency keys") the answer is sealed when the write is
/// made and published in the same stream message as its record; every node keeps it as it applies
/// the record, and a repeat that reaches the writing node before the stream confirmed the write
/// waits for the write's answer (`InFlightAnswer`).
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
        guard let (_, answer) = seal(reply, claim: claim), kept.insert(answer, address: caller.address, now: answer.createdAt) else { return }
        if let log {
            log.append(.answerKept(answer))
            keptThisTurn.append(answer.lookup)
        }
    }

    /// On a cluster node: the answer a write with a key will keep, sealed now to travel with its
    /// record (nil for an error, which is not kept).
    func inFlightAnswer(_ reply: Reply, claim: IdempotencyClaim, caller: Caller) -> InFlightAnswer? {
        guard let (members, answer) = seal(reply, claim: claim) else { return nil }
        return InFlightAnswer(lookup: answer.lookup, members: members, kept: answer, address: caller.address)
    }

    /// The reply's members as a repeat shows them, and the answer that keeps them sealed under
    /// the client's key with a fresh nonce, given now; nil for an error.
    private func seal(_ reply: Reply, claim: IdempotencyClaim) -> (members: [UInt8], answer: KeptAnswer)? {
        var w = JSONWriter(capacity: 512)
        guard let members = ServerMessages.keptMembers(of: reply, into: &w),
              let answer = IdempotencySeal.keep(members, claim: claim, nonce: secrets.randomBytes(IdempotencySeal.nonceBytes),
                                                now: Self.wallClockMs()) else { return nil }
        return (members, answer)
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

/// A cluster node's write with an idempotency key, on its way through the stream: its answer
/// (sealed, published with the record) and, until the write is answered, its members in the
/// clear for the repeats that wait (`waiters`): they are in memory only, for that long.
struct InFlightAnswer {
    struct Waiter {
        let fd: Int32
        let ref: JSONValue?
        /// The connection's identity when it started waiting (`ConnectionEpochs.isSame`).
        let epoch: ConnectionEpochs.Mark
    }

    let lookup: [UInt8]
    let members: [UInt8]
    let kept: KeptAnswer
    let address: AddressKey
    var waiters: [Waiter] = []
}

/// Pins changed by a record of the replicated log (docs/CLUSTER.md, "The replicated log
/// (design)"): every node, the writer included, applies the record to its own hub in stream order
/// and tells its own subscribers exactly what `create`, `update`, `delete` or `vote` would have
/// told them. The writer validated the request against the pin as it was (`base`); the
/// preconditions here make two writers that validated against the same pin reach the same end
/// on every node: the first record in the stream wins, the second is a conflict.
extension MapHub {
    /// `pinPut`. With `base` nil it is a create; otherwise an edit validated against the pin whose
    /// `updatedAt` (`UInt64(bitPattern:)`) is `base`. The writer gives an edit an `updatedAt` past
    /// `base`, so a record can be told from the state it was validated against.
    public mutating func applyReplicatedPut(_ pin: Pin, base: UInt64?, out: inout [PinDelivery]) -> ReplicatedOutcome {
        guard let held = store[pin.id] else {
            guard base == nil else { return .conflict("the pin is gone") }
            // `maxPins` is not checked: the writer checked it, and this node's count depends on
            // its own expiry clock, so at the limit (a flood keeps it there) nodes would disagree.
            // Writers racing at the limit can pass it by the creates in flight; none is refused
            // here that another node kept.
            // The writer's number (`sequence`), not this store's next one: the writer's store
            // counted the create it validated and took back, so numbering afresh would give the
            // writer's node and the others different numbers, hence different snapshots. Two
            // writers may give one number twice; creation order then falls back to the id, on
            // every node alike. A pin with no number (0) gets this store's next one.
            if pin.sequence == 0 { store.insert(pin) } else { store.restore([pin]) }
            guard let stored = store[pin.id] else { return .conflict("the pin is gone") }
            deliver(.added, encoded(stored), out: &out)
            return .applied
        }
        // Votes move only through `pinVote` records, so a pin voted on since its put is the same put.
        if held.updatedAt == pin.updatedAt && Self.sameExceptVotes(held, pin) { return .duplicate }
        guard let base, UInt64(bitPattern: held.updatedAt) == base else {
            return .conflict(base == nil ? "the pin exists already" : "the pin changed since")
        }
        // A pin due to expire (nearly) before the edit was made is gone on a node whose clock has
        // expired it: refusing it everywhere keeps every node's answer the same.
        guard held.expiresAt > pin.updatedAt + ReplicatedTiming.deadlineMarginMs else { return .conflict("the pin has expired") }
        var edited = pin
        edited.votes = held.votes
        edited.up = held.up          // sets `json` to nil: the held pin's counts are what it shows
        edited.down = held.down
        edited.sequence = held.sequence
        store.replace(edited)
        deliverTransition(from: held, to: encoded(edited), out: &out)
        return .applied
    }

    /// `pinRemove` (a delete; a flag travels as its `pinVote`): removed for everyone who saw it,
    /// like `delete`. A pin not held was removed already, or expired here: nothing to do.
    public mutating func applyReplicatedRemove(_ id: PinID, out: inout [PinDelivery]) -> ReplicatedOutcome {
        guard let pin = store.remove(id) else { return .duplicate }
        deliver(.removed(.deleted), pin, out: &out)
        return .applied
    }

    /// `pinVote`: `vote` itself, whose rules (the voter limit, the same vote again, the flag
    /// threshold) depend only on the pin, so every node reaches the writer's result. A vote that
    /// flags the pin removes it (`removed(flagged)`) on every node.
    public mutating func applyReplicatedVote(_ id: PinID, voter: UInt64, value: Int8, out: inout [PinDelivery]) -> ReplicatedOutcome {
        guard value == 1 || value == -1 else { return .conflict("a vote is +1 or -1") }
        switch vote(id, voter: voter, value: value, out: &out) {
        case .failure(.tooManyVoters): return .conflict("the pin has its maximum of voters")
        case .failure: return .conflict("the pin is gone")
        case .success(let outcome): return outcome.change == .unchanged ? .duplicate : .applied
        }
    }

    /// Equal in everything a put carries but the votes (and their counts).
    static func sameExceptVotes(_ a: Pin, _ b: Pin) -> Bool {
        var b = b
        b.votes = a.votes
        b.up = a.up
        b.down = a.down
        return a == b
    }
}

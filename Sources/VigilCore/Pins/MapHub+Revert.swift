/// Taking back a change the server could not record (docs/DURABILITY.md, "When the disk fails").
/// None of these produce deliveries: the change's own events were never sent, so subscribers
/// saw neither the change nor its undoing.
extension MapHub {
    /// Puts pin `id` back as it was before an update or delete (`before`), or removes it when
    /// the change created it (nil).
    public mutating func revertPin(_ id: PinID, to before: Pin?) {
        if let before {
            store.restore([before])
        } else {
            store.remove(id)
        }
    }

    /// Takes back `voter`'s vote on pin `id`: its vote goes back to `previous` (nil: none). A vote
    /// that flagged the pin away puts `flagged` (the pin as the vote left it) back first.
    /// In place: the pin's vote table is never copied.
    public mutating func revertVote(_ id: PinID, voter: UInt64, previous: Int8?, flagged: Pin?) {
        if let flagged { store.restore([flagged]) }
        store.restoreVote(id, voter: voter, to: previous)
    }
}

extension PinStore {
    /// `Pin.restoreVote` on the held pin, in place (a vote moves the pin in no index).
    mutating func restoreVote(_ id: PinID, voter: UInt64, to value: Int8?) {
        pins[id]?.restoreVote(voter, to: value)
    }
}

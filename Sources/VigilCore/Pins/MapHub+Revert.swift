/// Taking back a change the server could not record (docs/DURABILITY.md, "When the disk fails").
extension MapHub {
    /// Puts pin `id` back as it was before a change of this turn: `before`, or no pin when the
    /// change created it. Produces no deliveries: the change's own events were never sent, so
    /// subscribers saw neither the change nor its undoing.
    public mutating func revertPin(_ id: PinID, to before: Pin?) {
        if let before {
            store.restore([before])
        } else {
            store.remove(id)
        }
    }
}

/// The outcome of `MapChecker` over every sampled subscriber.
public struct MapCheckResult: Sendable {
    public var subscribers = 0
    public var epochs = 0
    /// Events on this run's pins that were checked.
    public var eventsChecked: UInt64 = 0
    /// Snapshot entries on this run's pins that were checked.
    public var snapshotPins: UInt64 = 0
    /// Changes that were certain to be delivered in their epoch (each must have been received).
    public var certainChanges: UInt64 = 0
    /// Events and snapshot entries on pins this run did not create (another client's): ignored.
    public var foreign: UInt64 = 0
    /// Events and snapshot entries on abandoned pins (see `PinHistory`): not checked.
    public var unchecked: UInt64 = 0
    /// Changes a subscriber should have received and did not.
    public var lost: UInt64 = 0
    /// Events that should not have been sent: wrong kind, wrong version, duplicate, out of order,
    /// stale, outside the area, or with no subscription.
    public var wrong: UInt64 = 0
    /// Snapshot entries that are wrong, and pins missing from a snapshot.
    public var snapshotErrors: UInt64 = 0
    public var errors: CheckErrors

    public init(maxErrors: Int = 20) {
        errors = CheckErrors(limit: maxErrors)
    }

    public func summary(name: String = "map viewport") -> CheckSummary {
        CheckSummary(name: name, checked: subscribers, errors: errors, counters: [
            ("epochs", UInt64(epochs)), ("events", eventsChecked), ("snapshot pins", snapshotPins),
            ("certain", certainChanges), ("lost", lost), ("wrong", wrong), ("snapshot errors", snapshotErrors),
            ("foreign", foreign), ("unchecked", unchecked),
        ])
    }
}

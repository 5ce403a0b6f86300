/// Why a pin left a subscriber's view (the `reason` of `pin.removed`).
public enum RemovalReason: String, Sendable {
    case deleted, moved, flagged
}

/// What a subscriber is told about a pin.
public enum PinEventKind: Equatable, Sendable {
    case added
    case updated
    case removed(RemovalReason)
    case expired
}

/// One event and everyone who must receive it. The server encodes `pin` once and sends the same
/// bytes to every recipient.
public struct PinDelivery: Sendable {
    public var kind: PinEventKind
    public var pin: Pin
    public var recipients: [SubscriptionIndex.SubscriberID]
}

/// Why a pin operation was refused (the protocol maps each to an error code).
public enum PinFailure: Error, Equatable, Sendable {
    /// Wrong edit token, or no such pin: deliberately the same.
    case forbidden
    /// Voting on a pin that does not exist (or has expired).
    case notFound
    /// The store holds `PinSettings.maxPins`.
    case capacityExceeded
    /// A new voter on a pin that has `PinSettings.maxVotersPerPin` voters already.
    case tooManyVoters
}

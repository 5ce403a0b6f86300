import VigilCore
import VigilGeo

/// A pin as a subscriber saw it: its id and the version index its stamp and votes show
/// (`ScannedPin.observedVersion`; -1 when it showed none).
public struct ObservedPin: Equatable, Sendable {
    public var pin: PinID
    private var version32: Int32

    public init(pin: PinID, observedVersion: Int) {
        self.pin = pin
        self.version32 = Int32(clamping: observedVersion)
    }

    public var observedVersion: Int { Int(version32) }
}

/// One pin event a subscriber received. 24 bytes, because a sampled subscriber may keep
/// millions of them until the end of the run.
public struct MapEvent: Equatable, Sendable {
    // Stored largest first, so the layout packs to 16 + 4 + 1 bytes.
    public var pin: PinID
    private var version32: Int32
    public var kind: PinEventKind

    public init(kind: PinEventKind, pin: PinID, observedVersion: Int) {
        self.kind = kind
        self.pin = pin
        self.version32 = Int32(clamping: observedVersion)
    }

    /// The version index the event's pin object shows (moves + up + down; -1 when none). For
    /// `removed(deleted)` that is the state *before* the delete.
    public var observedVersion: Int { Int(version32) }
}

/// How a subscription epoch ended, which decides which changes it was certain to receive.
public enum EpochEnd: Equatable, Sendable {
    /// Still current when the run ended. Only valid when the subscriber has received everything
    /// the server sent it: end the run with a request on each sampled connection (unsubscribe)
    /// and wait for its reply, or every in-flight event counts as lost.
    case open
    /// A later `subscribe` or `unsubscribe` was sent at `sentNs` and its reply received. Every
    /// event that arrived before that reply belongs to this epoch (one TCP stream, and the server
    /// replies before it sends any event the new subscription causes).
    case request(sentNs: UInt64)
    /// The connection closed: its last events may have been dropped with its queue, so no change
    /// is certain; what did arrive must still be a correct prefix.
    case connectionLost
}

/// One subscription of a sampled subscriber, from the reply of its `subscribe` to the reply of
/// the next request that replaced it.
public struct MapEpoch: Sendable {
    public var area: GeoArea
    /// The `viewer` the subscribe carried (nil: none).
    public var viewer: GeoPoint?
    /// When the `subscribe` was sent (before its bytes were written).
    public var subscribeSentNs: UInt64
    /// When its reply was received.
    public var replyNs: UInt64
    public var end: EpochEnd
    /// The reply's pins (only pins whose id parsed; see `SubscriberLog`).
    public var snapshot: [ObservedPin]
    /// The reply said `"truncated":true`: pins may be missing from it legitimately.
    public var truncated: Bool
    /// Every pin event received after the reply and before the next request's reply, in order.
    public var events: [MapEvent]

    public init(area: GeoArea, subscribeSentNs: UInt64, replyNs: UInt64, end: EpochEnd = .open,
                snapshot: [ObservedPin], truncated: Bool = false, events: [MapEvent] = [], viewer: GeoPoint? = nil) {
        self.area = area
        self.viewer = viewer
        self.subscribeSentNs = subscribeSentNs
        self.replyNs = replyNs
        self.end = end
        self.snapshot = snapshot
        self.truncated = truncated
        self.events = events
    }

    /// The latest time an op may have been acknowledged and still be certain to show in this
    /// epoch (nil: no op is certain).
    var certainAckBefore: UInt64? {
        switch end {
        case .open: return .max
        case .request(let sentNs): return sentNs
        case .connectionLost: return nil
        }
    }
}

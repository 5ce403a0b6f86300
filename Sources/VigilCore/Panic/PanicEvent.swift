/// How urgent the person says things are: `red` (in danger now) or `amber` (uneasy, watch me).
public enum PanicStatus: String, Sendable {
    case red, amber
}

/// Why a stream ended: the person is safe, or the alarm was a mistake (both said by the owner);
/// or the owner sent nothing for `PanicSettings.abandonAfterMs` (said by the hub's clock).
public enum PanicEndReason: String, Sendable {
    case safe, cancelled, abandoned

    /// Whether an owner may end a stream with this reason (`panic.end`); `abandoned` is the hub's.
    public var isGivenByOwner: Bool { self != .abandoned }
}

/// One fix from the phone. Range checks (latitude, longitude, non-negative accuracy) happen at decode.
public struct PanicLocation: Equatable, Sendable {
    public var lat: Double
    public var lon: Double
    public var accuracyM: Double?
    public var heading: Double?
    public var speedMps: Double?

    public init(lat: Double, lon: Double, accuracyM: Double? = nil, heading: Double? = nil, speedMps: Double? = nil) {
        self.lat = lat
        self.lon = lon
        self.accuracyM = accuracyM
        self.heading = heading
        self.speedMps = speedMps
    }
}

/// What happened in a stream. Each kind takes the stream's next sequence number.
public enum PanicEventKind: Equatable, Sendable {
    case location(PanicLocation)
    /// A location of an end-to-end encrypted stream, sealed by the owner's device for this
    /// event's seq and the point's status: opaque bytes, never coordinates
    /// (docs/PROTOCOL.md, "End-to-end encrypted streams").
    case sealedLocation(SealedPoint)
    case status(PanicStatus)
    case ended(PanicEndReason)
    /// The owner set, moved or cleared (nil) the safety timer: the time by which they check in
    /// (extend it or end the stream), unix ms.
    case timer(dueAt: Int64?)
    /// The safety timer's deadline passed with no check-in: the hub set the stream red on its own.
    /// Carries the last location and its time, so that the event alone tells a watcher where to look.
    ///
    /// The event's `at` is the deadline (or the stream's last event, if that came later): a time
    /// that follows from the stream alone. `sentAt` is when the alarm was raised: the clock of the
    /// tick that noticed the deadline (or of the cluster node that decided it), never before
    /// `at`. `sentAt - at` is how late it went out: a tick (50 ms) normally, the downtime when the
    /// deadline passed while vigild was down. Recorded with the event (journal, snapshot,
    /// replicated log), so a replay and a restart show the same `sentAt`.
    case missedCheckIn(dueAt: Int64, last: LastLocation, sentAt: Int64)
}

/// A safety timer as the owner asks for it: a delay from now, a time, or off.
public enum PanicTimer: Equatable, Sendable {
    case inSeconds(Int64)
    case at(Int64)
    case cancel

    /// The deadline it asks for at `now` (nil: no timer).
    public func dueAt(now: Int64) -> Int64? {
        switch self {
        case .inSeconds(let s): return now + s * 1000
        case .at(let at): return at
        case .cancel: return nil
        }
    }
}

/// One event of a stream. `seq` is contiguous per stream, starting at 1 (the first location), so a
/// watcher that knows the last seq it saw can ask for exactly what it missed.
public struct PanicEvent: Equatable, Sendable {
    public var seq: UInt64
    /// Unix milliseconds, from the hub's clock when the event was applied.
    public var at: Int64
    public var kind: PanicEventKind

    public init(seq: UInt64, at: Int64, kind: PanicEventKind) {
        self.seq = seq
        self.at = at
        self.kind = kind
    }

    /// Whether `other` records the same change: equal, or the same escalation decided at another
    /// moment. Nodes of a cluster that notice one deadline each decide it on their own clock, so
    /// their records differ in `sentAt` alone; the first applied holds on every node.
    public func isSameChange(as other: PanicEvent) -> Bool {
        if self == other { return true }
        guard seq == other.seq, at == other.at,
              case .missedCheckIn(let due, let last, _) = kind,
              case .missedCheckIn(let otherDue, let otherLast, _) = other.kind else { return false }
        return due == otherDue && last == otherLast
    }
}

/// An event and the stream it belongs to: what the server journals (`JournalRecord.panicEvent`)
/// for a change the hub made on its own, such as the end of an abandoned stream.
public struct StreamEvent: Equatable, Sendable {
    public var stream: StreamID
    public var event: PanicEvent

    public init(stream: StreamID, event: PanicEvent) {
        self.stream = stream
        self.event = event
    }
}

/// What a status change or a timer change did to its stream: recorded an event (journal it), or nothing (the
/// status it had already: nothing to journal or sync; the reply still carries the current seq).
public enum PanicChange: Equatable, Sendable {
    case recorded(PanicEvent)
    case unchanged(seq: UInt64)

    /// The stream's seq after the operation: the reply's `seq`.
    public var seq: UInt64 {
        switch self {
        case .recorded(let event): return event.seq
        case .unchanged(let seq): return seq
        }
    }

    /// The event to journal, if anything changed.
    public var event: PanicEvent? {
        if case .recorded(let event) = self { return event }
        return nil
    }
}

/// What a revocation did: killed a live watch token (journal it), or nothing (the token was
/// never issued, or was revoked already: nothing to journal or sync; the reply is `ok` all the same).
public enum PanicRevocation: Equatable, Sendable {
    case revoked
    case notLive
}


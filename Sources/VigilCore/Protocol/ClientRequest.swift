import VigilGeo

/// A decoded, validated client message.
public struct ClientRequest: Sendable {
    /// The client's `ref` (a string or a number), echoed in the reply.
    public var ref: JSONValue?
    public var operation: ClientOperation
    /// The request's idempotency key and canonical form (`"idem"`; only operations that change
    /// state take one, see `RequestDecoder.idempotentOperations`).
    public var idem: IdempotencyClaim? = nil
}

/// The operations of protocol version 1 (docs/PROTOCOL.md).
public enum ClientOperation: Equatable, Sendable {
    /// `viewer`: the subscriber's own position, for pins with a range only (never stored or logged).
    case subscribe(area: GeoArea, categories: UInt64?, viewer: GeoPoint? = nil)
    /// `subscribe` with `"view":"clusters"`: counts per cell instead of pins (pins with a range are
    /// never counted, so a viewer position has no use there).
    case subscribeClusters(area: GeoArea, categories: UInt64?)
    case unsubscribe
    case pinCreate(PinDraft)
    /// `id` is nil when the text is not a UUID: such a pin cannot exist, and the answer is the same as for an unknown one.
    case pinUpdate(id: PinID?, token: String, changes: PinChanges)
    case pinDelete(id: PinID?, token: String)
    case pinVote(id: PinID?, value: Int8)
    /// Panic streams. `stream` is nil when the text is not a stream id (answered like an unknown one).
    /// `circle`: the check-in circle the stream is started for, with its owner token.
    case panicStart(status: PanicStatus, location: PanicLocation, note: String?, watchers: Int, timer: PanicTimer?,
                    circle: CircleToken? = nil)
    /// `panic.start` of an end-to-end encrypted stream: its first point sealed, its keys' public side.
    case panicStartE2E(status: PanicStatus, e2e: E2EStart, watchers: Int, timer: PanicTimer?, circle: CircleToken? = nil)
    case panicUpdate(stream: StreamID?, ownerToken: String?, location: PanicLocation)
    /// `panic.update` of an end-to-end encrypted stream: a sealed location, for the seq and status it names.
    case panicUpdateSealed(stream: StreamID?, ownerToken: String?, update: SealedUpdate)
    /// `panic.rekey`: an e2e stream's new key id and member boxes.
    case panicRekey(stream: StreamID?, ownerToken: String?, keys: E2EKeys)
    case panicStatus(stream: StreamID?, ownerToken: String?, status: PanicStatus)
    case panicEnd(stream: StreamID?, ownerToken: String?, reason: PanicEndReason)
    case panicResume(stream: StreamID?, ownerToken: String)
    case panicWatch(stream: StreamID?, watchToken: String, since: UInt64?)
    /// `panic.watch` with a member token of the circle the stream was started for, instead of a watch token.
    case panicWatchAsMember(stream: StreamID?, memberToken: String, since: UInt64?)
    case panicUnwatch(stream: StreamID?)
    case panicInvite(stream: StreamID?, ownerToken: String?)
    case panicRevoke(stream: StreamID?, ownerToken: String?, watchToken: String)
    /// `timer` is never `.cancel` in `panicStart`.
    case panicTimer(stream: StreamID?, ownerToken: String?, timer: PanicTimer)
    /// Check-in circles (`CheckinOperation`).
    case checkin(CheckinOperation)

    /// The operation's place in `names`, for counters kept in arrays.
    public var metricIndex: Int {
        switch self {
        case .subscribe, .subscribeClusters: return 0
        case .unsubscribe: return 1
        case .pinCreate: return 2
        case .pinUpdate: return 3
        case .pinDelete: return 4
        case .pinVote: return 5
        case .panicStart, .panicStartE2E: return 6
        case .panicUpdate, .panicUpdateSealed: return 7
        case .panicStatus: return 8
        case .panicEnd: return 9
        case .panicResume: return 10
        case .panicWatch, .panicWatchAsMember: return 11
        case .panicUnwatch: return 12
        case .panicInvite: return 13
        case .panicRevoke: return 14
        case .panicTimer: return 15
        case .panicRekey: return 16
        case .checkin(let c): return 17 + c.index
        }
    }

    /// The operation's name on the wire (`op`).
    public var name: String { Self.names[metricIndex] }

    /// Every operation name, indexed by `metricIndex`.
    public static let names = ["subscribe", "unsubscribe", "pin.create", "pin.update", "pin.delete", "pin.vote",
                               "panic.start", "panic.update", "panic.status", "panic.end", "panic.resume",
                               "panic.watch", "panic.unwatch", "panic.invite", "panic.revoke", "panic.timer", "panic.rekey"]
        + CheckinOperation.names

    /// Both views of `subscribe`: they share its rate limits.
    /// Whether it changes what the connection follows (pins, counts, a stream, a circle): on a
    /// node of a cluster the held events of earlier writes are then no longer for it (its reply
    /// showed them already).
    public var changesMembership: Bool {
        switch self {
        case .subscribe, .subscribeClusters, .unsubscribe, .panicWatch, .panicWatchAsMember, .panicUnwatch, .panicResume: return true
        case .checkin(let c): return c.changesMembership
        case .pinCreate, .pinUpdate, .pinDelete, .pinVote, .panicStart, .panicStartE2E, .panicUpdate, .panicUpdateSealed,
             .panicRekey, .panicStatus, .panicEnd, .panicInvite, .panicRevoke, .panicTimer:
            return false
        }
    }

    public var isSubscribe: Bool {
        switch self {
        case .subscribe, .subscribeClusters: return true
        case .unsubscribe, .pinCreate, .pinUpdate, .pinDelete, .pinVote, .panicStart, .panicStartE2E, .panicUpdate,
             .panicUpdateSealed, .panicRekey, .panicStatus, .panicEnd, .panicResume, .panicWatch, .panicWatchAsMember,
             .panicUnwatch, .panicInvite, .panicRevoke, .panicTimer, .checkin:
            return false
        }
    }

    /// Writes count against the per-session write limit: pin changes, and creating streams or
    /// tokens. A panic stream's own updates do not: a person in danger is never rate limited
    /// below the message limit.
    public var isWrite: Bool {
        switch self {
        // A rekey too: it is rare (a member revoked), and each is a critical (synced) record.
        case .pinCreate, .pinUpdate, .pinDelete, .pinVote, .panicStart, .panicStartE2E, .panicInvite, .panicRekey: return true
        case .checkin(let c): return c.isWrite
        case .subscribe, .subscribeClusters, .unsubscribe, .panicUpdate, .panicUpdateSealed, .panicStatus, .panicEnd,
             .panicResume, .panicWatch, .panicWatchAsMember, .panicUnwatch, .panicRevoke, .panicTimer:
            return false
        }
    }

    /// Operations that may change durable state (a journal record): refused while the server
    /// cannot record changes (`unavailable`). A superset of `isWrite`: a stream's own updates
    /// are not rate limited, but they are journaled.
    public var changesState: Bool {
        switch self {
        case .pinCreate, .pinUpdate, .pinDelete, .pinVote, .panicStart, .panicStartE2E, .panicUpdate, .panicUpdateSealed,
             .panicStatus, .panicEnd, .panicInvite, .panicRevoke, .panicTimer, .panicRekey:
            return true
        case .subscribe, .subscribeClusters, .unsubscribe, .panicResume, .panicWatch, .panicWatchAsMember, .panicUnwatch:
            return false
        case .checkin(let c):
            return c.changesState
        }
    }
}

/// A check-in circle named in a panic operation, with the token that opens it there (the owner
/// token for `panic.start`). `circle` is nil when the text is not a circle id: answered like an
/// unknown circle (`forbidden`).
public struct CircleToken: Equatable, Sendable {
    public var circle: CircleID?
    public var token: String

    public init(circle: CircleID?, token: String) {
        self.circle = circle
        self.token = token
    }
}

/// A request that failed, with the `ref` it carried (when it could be read) for the error reply.
public struct RejectedRequest: Error, Sendable {
    public var ref: JSONValue?
    public var error: RequestError
}

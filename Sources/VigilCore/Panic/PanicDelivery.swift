/// A connection, as the server numbers it. The panic hub uses it for owners and watchers alike.
public typealias WatcherID = Int32

/// Something the server must send: one message, encoded once, to every recipient.
public struct PanicDelivery: Sendable {
    public enum Kind: Equatable, Sendable {
        /// A stream event, to every watcher of the stream.
        case event(PanicEvent)
        /// No location for `staleAfterMs`, to every watcher; `since` is the last location's time.
        case stale(since: Int64)
        /// The recipients' watch token was revoked: they no longer watch the stream.
        case revoked
        /// How many connections now watch the stream, to its owner connection.
        case watchers(count: Int)
        /// An end-to-end encrypted stream's key was replaced (`panic.rekey`): the new key id, and
        /// for a member watching as a circle member its own new box (nil: none for it, or a
        /// watcher with a watch token, whose key comes from its link). One recipient each.
        case rekeyed(kid: E2EKeyID, box: SealedBytes?)
    }

    public var stream: StreamID
    public var kind: Kind
    /// Never empty; sorted, so the hub's output is repeatable.
    public var recipients: [WatcherID]

    public init(stream: StreamID, kind: Kind, recipients: [WatcherID]) {
        self.stream = stream
        self.kind = kind
        self.recipients = recipients
    }
}

/// What `PanicHub.watch` answers: the stream's state for the reply, and what follows it.
public struct PanicWatch: Sendable {
    /// The stream as it is now (the reply's `state`).
    public var stream: PanicStream
    /// The seqs the watcher missed, all held: to be sent after the reply, in order (nil: none).
    public var replay: ClosedRange<UInt64>?
    /// `since` asked for events the history no longer holds: nothing is replayed, the state is the truth.
    public var gap: Bool
    /// For a circle member watching an end-to-end encrypted stream: its own key box, and no other
    /// member's (the reply's `box`). Nil otherwise.
    public var box: SealedBytes?

    public init(stream: PanicStream, replay: ClosedRange<UInt64>?, gap: Bool, box: SealedBytes? = nil) {
        self.stream = stream
        self.replay = replay
        self.gap = gap
        self.box = box
    }
}

/// Why a panic operation was refused.
public enum PanicFailure: Error, Equatable, Sendable {
    /// Wrong token, no right to steer, or no such stream: deliberately one answer, so a caller
    /// cannot learn whether a stream exists without a token for it.
    case forbidden
    /// The stream has ended: no more updates, status changes, invitations or ends.
    case ended
    /// `maxStreams` streams are held already.
    case capacityExceeded
    /// Only the reserved share of `maxStreams` is left, and the start was not eligible for it
    /// (`PanicHub.start`'s `reserveEligible`).
    case reserveOnly
    /// The stream would hold more than `maxWatchTokens` watch tokens (or `start` asked for more
    /// than `maxWatchersOnStart`).
    case tooManyWatchTokens
    /// `since` is past the stream's current seq: the client is confused about which stream it watched.
    case sinceAhead
    /// A safety timer not in the future, or further ahead than `maxTimerMs`.
    case invalidTimer
    /// A safety timer is set on an amber stream only (a red one has raised the alarm already).
    case timerNeedsAmber
    /// A sealed update named a seq or status other than the stream's next seq and current status
    /// (`SealedSeqCheck`): the client seals again for these and resends.
    case seqMismatch(currentSeq: UInt64, status: PanicStatus)
    /// A clear location for an end-to-end encrypted stream: it takes sealed updates only, so that
    /// a client's mistake cannot put a position on the server in clear.
    case sealedRequired
    /// A sealed update or a rekey for a stream that was started in clear.
    case notE2E
}

import Foundation

/// What happens to the client's connection, and every event the server sends
/// (``VigilClient/events()``).
public enum ConnectionEvent: Sendable {
    /// An attempt to connect started.
    case connecting
    /// The server's welcome: the connection is open (`reconnected` after the first).
    case open(Welcome, reconnected: Bool)
    /// The open connection ended (`code` nil: lost without a close).
    case disconnected(code: UInt16?, reason: String)
    /// The next attempt waits `delay` (attempt counts from 1).
    case reconnecting(attempt: Int, delay: Duration)
    /// The heartbeat's request was not answered: the connection is replaced.
    case stalled(silentFor: Duration)
    /// A request was refused as `rate_limited` and is retried after `retryAfter`.
    case rateLimited(op: String, retryAfter: Duration)
    /// An error that answers no request: a server error without a `ref`, a message the client
    /// could not read, a failed restore after a reconnect.
    case error(VigilError)
    /// Every event the server sends, by its `type`, as it came.
    case event(type: String, message: JSONObject)
    /// ``VigilClient/close()`` was called, or the connection was lost with reconnects off.
    case closed
}

/// The pins of a map subscription (``VigilClient/subscribe(area:categories:viewer:)``), kept by
/// the subscribe replies (full snapshots, reconciled: a pin missing from a new reply is
/// ``PinRemoval/reconciled``) and the pin events.
public enum MapEvent: Sendable, Equatable {
    /// A pin came into the set.
    case added(Pin)
    /// A pin of the set changed.
    case updated(Pin)
    /// A pin left the set.
    case removed(Pin, reason: PinRemoval)
    /// A subscribe reply was applied (after the `added`/`updated`/`removed` it caused):
    /// `resubscribed` after a reconnect.
    case synced(count: Int, truncated: Bool, resubscribed: Bool)
    /// A message about the subscription could not be read, or its restore failed.
    case error(VigilError)
}

/// A clusters view (``VigilClient/subscribeClusters(area:categories:)``).
public enum ClustersEvent: Sendable, Equatable {
    /// A full reply (`resubscribed` after a reconnect); cells not in it are gone.
    case snapshot(ClustersView, resubscribed: Bool)
    /// `clusters.changed`: these cells now have these counts (0: remove the bubble).
    case changed(precision: Int, cells: [ClusterCell])
    /// A message about the view could not be read, or its restore failed.
    case error(VigilError)
}

/// A watched stream's events: each event with a seq exactly once and in order, or an explicit
/// ``gap(_:lastSeq:)``.
public enum WatchEvent: Sendable, Equatable {
    /// A (re-)watch reply; `gap` when events were missed that the server no longer holds.
    case state(PanicState, gap: Bool)
    /// Events after `lastSeq` were missed and cannot be replayed: `state` is the truth now.
    /// (Followed by the ``state(_:gap:)`` that carries it.)
    case gap(PanicState, lastSeq: Int)
    /// A location.
    case location(PanicLocation)
    /// A status change, or the missed check-in (`reason` `missed_check_in`).
    case status(PanicStatusChange)
    /// The safety timer set, moved or cancelled.
    case timer(PanicTimerChange)
    /// The stream ended (nothing follows).
    case ended(PanicEnded)
    /// No location for a while.
    case stale(PanicStale)
    /// The watch token (or member token) was revoked (nothing follows).
    case revoked
    /// A message could not be read, or a re-watch failed.
    case error(VigilError)
    /// An end-to-end encrypted stream's point that did not open with the watch's key: shown as
    /// ``CannotDecrypt/label``, never as a position. (A point that opens is a ``location(_:)``.)
    case cannotDecrypt(CannotDecrypt)
    /// What the watcher is told once about its key: missing, damaged, wrong, or no longer the stream's.
    case keyNotice(E2EKeyNotice)
    /// The stream's key was replaced (`panic.rekeyed`); a member's new box came with it.
    case rekeyed(kid: String)
}

/// What the owner of a stream hears.
public enum OwnerEvent: Sendable, Equatable {
    /// How many connections watch the stream.
    case watchers(Int)
    /// The safety timer passed: the server raised the alarm.
    case missedCheckIn(PanicStatusChange)
    /// The stream was resumed (after a reconnect): its state as the server has it.
    case resumed(PanicState)
    /// A resume failed.
    case error(VigilError)
}

/// A check-in circle's state and news.
public enum CircleEvent: Sendable, Equatable {
    /// An open/join reply: the state; after a reconnect, `missed` says what changed meanwhile.
    case state(CircleState, missed: CircleMissed?)
    /// A member asked "are you safe?".
    case requested(CheckinRequest)
    /// The owner answered.
    case answered(CheckinAnswer)
    /// Home safe set, cleared or lapsed.
    case home(HomeChange)
    /// A panic stream of the circle started, escalated or ended.
    case panic(CirclePanicNews)
    /// Someone has seen a notice.
    case acked(NoticeAck)
    /// This member was revoked (nothing follows).
    case revoked(member: Int?)
    /// The circle was closed (nothing follows).
    case closed(CircleClosed)
    /// A message could not be read, or a re-open failed (`forbidden`: withdrawn meanwhile,
    /// nothing follows).
    case error(VigilError)
}

/// A latitude and a longitude, for `subscribe`'s `viewer`.
public struct Coordinate: Sendable, Equatable {
    /// Latitude.
    public var lat: Double
    /// Longitude.
    public var lon: Double
    /// A coordinate.
    public init(lat: Double, lon: Double) { self.lat = lat; self.lon = lon }
}

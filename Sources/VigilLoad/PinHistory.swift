import VigilCore
import VigilGeo

/// One acknowledged state of a pin, as its publisher knows it.
///
/// Times are the client's monotonic clock: `sendNs` taken *before* the op's bytes were written
/// (queued counts), `ackNs` *after* the `ok` was read. The server applied the op somewhere
/// between the two, which is all the checker assumes about time.
public struct PinVersion: Equatable, Sendable {
    public var position: GeoPoint
    /// up + down after this op.
    public var votes: Int
    /// `pin.update` ops so far, this one included (the stamp's `m`).
    public var moves: Int
    /// The op removed the pin: a delete, or a vote that flagged it.
    public var deleted: Bool
    public var sendNs: UInt64
    public var ackNs: UInt64
    /// The pin's `range_m` after this op (nil: none).
    public var rangeMeters: Int?

    public init(position: GeoPoint, votes: Int, moves: Int, deleted: Bool, sendNs: UInt64, ackNs: UInt64, rangeMeters: Int? = nil) {
        self.position = position
        self.votes = votes
        self.moves = moves
        self.deleted = deleted
        self.sendNs = sendNs
        self.ackNs = ackNs
        self.rangeMeters = rangeMeters
    }

    /// The pin is visible to a subscription of `area` from `viewer`: it exists, its position is
    /// inside, and when it has a range it reaches the viewer (`PinReach`, the protocol's rule).
    func isInside(_ area: GeoArea, viewer: GeoPoint? = nil) -> Bool {
        !deleted && area.contains(position) && PinReach.shows(position, rangeMeters: rangeMeters, to: viewer)
    }
}

/// Everything the publishers did to their pins, version by version, for the offline map check.
///
/// Publishers keep one op in flight per pin, so for each pin send order is apply order and
/// `sendNs` / `ackNs` increase along its versions (the checker binary-searches them). A version is
/// appended when its op is acknowledged; an op answered with an error changed nothing and is not
/// a version. Version 0 is the create.
///
/// A pin whose history can no longer be trusted is *abandoned*: its events are counted but not
/// checked. That happens when an op's outcome is unknown (the connection closed before the
/// reply: call `abandon`), when a vote did not add exactly one to up + down (a session voting
/// twice on a pin replaces its vote, which would break `moves + votes = version`), or when the
/// calls do not fit the one-op-in-flight rule.
public struct PinHistory: Sendable {
    struct Track: Sendable {
        var versions: [PinVersion]
        var abandoned = false
    }

    /// `down - up` at which a vote removes the pin (the welcome's `vote_flag_threshold`).
    public let voteFlagThreshold: Int
    private(set) var tracks: [PinID: Track] = [:]

    public init(voteFlagThreshold: Int = 5) {
        self.voteFlagThreshold = voteFlagThreshold
    }

    /// Pins with at least one version.
    public var pinCount: Int { tracks.count }
    /// Pins whose events are not checked.
    public var abandonedCount: Int { tracks.values.reduce(0) { $0 + ($1.abandoned ? 1 : 0) } }
    /// Versions over all pins.
    public var versionCount: Int { tracks.values.reduce(0) { $0 + $1.versions.count } }

    /// The versions of `pin`, oldest first; nil for a pin this run did not create.
    public func versions(of pin: PinID) -> [PinVersion]? {
        tracks[pin]?.versions
    }

    /// The latest version (what the next stamp builds on: an update sends `moves + 1`, `votes`).
    public func latest(_ pin: PinID) -> PinVersion? {
        tracks[pin]?.versions.last
    }

    public func isAbandoned(_ pin: PinID) -> Bool {
        tracks[pin]?.abandoned ?? false
    }

    /// `pin.create` was acknowledged with id `pin`.
    public mutating func recordCreate(_ pin: PinID, at position: GeoPoint, rangeMeters: Int? = nil, sendNs: UInt64, ackNs: UInt64) {
        guard tracks[pin] == nil else {
            // The same id twice: the server broke uniqueness, or the caller recorded twice.
            tracks[pin]?.abandoned = true
            return
        }
        tracks[pin] = Track(versions: [PinVersion(position: position, votes: 0, moves: 0, deleted: false,
                                                  sendNs: sendNs, ackNs: ackNs, rangeMeters: rangeMeters)])
    }

    /// A `pin.update` (which rewrote the stamp with moves + 1) was acknowledged; `position` is the
    /// pin's position after it, moved or not, and `rangeMeters` its `range_m` after it.
    public mutating func recordUpdate(_ pin: PinID, to position: GeoPoint, rangeMeters: Int? = nil, sendNs: UInt64, ackNs: UInt64) {
        append(pin, sendNs: sendNs) { last in
            PinVersion(position: position, votes: last.votes, moves: last.moves + 1, deleted: false,
                       sendNs: sendNs, ackNs: ackNs, rangeMeters: rangeMeters)
        }
    }

    /// A `pin.vote` was acknowledged; `up` and `down` are the counts in its reply. A vote that
    /// did not add exactly one to up + down abandons the pin (see the type's notes).
    public mutating func recordVote(_ pin: PinID, up: Int, down: Int, sendNs: UInt64, ackNs: UInt64) {
        let threshold = voteFlagThreshold
        append(pin, sendNs: sendNs) { last in
            guard up + down == last.votes + 1 else { return nil }
            return PinVersion(position: last.position, votes: up + down, moves: last.moves,
                              deleted: down - up >= threshold, sendNs: sendNs, ackNs: ackNs, rangeMeters: last.rangeMeters)
        }
    }

    /// A `pin.delete` was acknowledged.
    public mutating func recordDelete(_ pin: PinID, sendNs: UInt64, ackNs: UInt64) {
        append(pin, sendNs: sendNs) { last in
            PinVersion(position: last.position, votes: last.votes, moves: last.moves, deleted: true,
                       sendNs: sendNs, ackNs: ackNs, rangeMeters: last.rangeMeters)
        }
    }

    /// The outcome of an op on `pin` is unknown (no reply): stop checking it.
    public mutating func abandon(_ pin: PinID) {
        tracks[pin, default: Track(versions: [])].abandoned = true
    }

    /// Adds another publisher group's pins (pin ids are unique, so the histories are disjoint; a
    /// pin present in both is abandoned).
    public mutating func merge(_ other: PinHistory) {
        for (pin, track) in other.tracks {
            if tracks[pin] != nil {
                tracks[pin]?.abandoned = true
            } else {
                tracks[pin] = track
            }
        }
    }

    /// Appends the version `make` builds from the latest one, or abandons the pin when the call
    /// breaks the rules: unknown pin, pin already removed, an op sent before the previous one was
    /// acknowledged, or `make` refusing.
    private mutating func append(_ pin: PinID, sendNs: UInt64, _ make: (PinVersion) -> PinVersion?) {
        guard let track = tracks[pin], !track.abandoned else {
            abandon(pin)
            return
        }
        guard let last = track.versions.last, !last.deleted, sendNs >= last.ackNs, let next = make(last) else {
            tracks[pin]?.abandoned = true
            return
        }
        tracks[pin]?.versions.append(next)
    }
}

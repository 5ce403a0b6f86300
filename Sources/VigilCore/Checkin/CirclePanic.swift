/// News of a panic stream started for a circle, as the circle's listeners hear it
/// (`checkin.panic`, docs/PROTOCOL.md "Circles as standing contacts"): that it started, was
/// escalated (its safety timer passed), or ended. Only these three: a member who wants the
/// locations watches the stream with its member token; the circle's news is what tells it to.
public struct CirclePanic: Equatable, Sendable {
    public enum Event: Equatable, Sendable {
        case started
        case escalated
        case ended(PanicEndReason)
    }

    public var stream: StreamID
    public var event: Event
    /// The stream's status after the event.
    public var status: PanicStatus
    /// The event's time (unix ms): the start, the escalation's (its deadline), the end.
    public var at: Int64

    /// The news of a stream just started.
    public static func started(_ stream: PanicStream) -> CirclePanic {
        CirclePanic(stream: stream.id, event: .started, status: stream.status, at: stream.startedAt)
    }

    /// The news of `event`, which `stream` (as it is after it) has just recorded: an escalation
    /// or an end; nil for every other event (locations, status changes, timers are the
    /// watchers' news, not the circle's).
    public static func of(_ event: PanicEvent, in stream: PanicStream) -> CirclePanic? {
        switch event.kind {
        case .missedCheckIn: return CirclePanic(stream: stream.id, event: .escalated, status: stream.status, at: event.at)
        case .ended(let reason): return CirclePanic(stream: stream.id, event: .ended(reason), status: stream.status, at: event.at)
        case .location, .sealedLocation, .status, .timer: return nil
        }
    }
}

extension CheckinHub {
    /// A stream of the circle started, escalated or ended: to every connection listening to the
    /// circle (nothing when the circle is gone or nobody listens). The circle does not change:
    /// its streams are the panic hub's, and the application hands the news over
    /// (V1Application+Panic.swift; `ReplicatedApply` on a cluster node).
    public func tell(_ news: CirclePanic, of id: CircleID, out: inout [CheckinDelivery]) {
        deliver(.panic(news), of: id, out: &out)
    }

    /// Whether `ownerToken` is the owner token of circle `id` (false for an unknown circle: the
    /// token is hashed before the lookup, so both cost the same). Changes nothing: a stream
    /// started for the circle does not keep it alive.
    public func isOwner(_ id: CircleID, ownerToken: String, secrets: Secrets) -> Bool {
        let digest = secrets.digest(ofToken: ownerToken)
        guard let circle = circles[id] else { return false }
        return circle.ownerDigest.matches(digest)
    }

    /// The live member of circle `id` whose token is `memberToken` (nil: none, no such circle, or
    /// `id` nil: a stream of no circle), without listening: a member watching one of the circle's
    /// streams. The token is hashed first whatever `id` is, so the time taken does not tell a
    /// stream of a circle from one of none (or from no stream).
    public func liveMember(_ id: CircleID?, memberToken: String, secrets: Secrets) -> CheckinMember? {
        let digest = secrets.digest(ofToken: memberToken)
        guard let id else { return nil }
        return circles[id]?.member(matching: digest)
    }
}

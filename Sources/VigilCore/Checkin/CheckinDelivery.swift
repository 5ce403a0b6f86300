/// Who a connection is in a circle it listens to: its owner, or one of its members.
public enum CheckinRole: Equatable, Sendable {
    case owner
    case member(UInt32)
}

/// Something the server must send about a circle: one message, encoded once, to every recipient.
public struct CheckinDelivery: Sendable {
    public enum Kind: Equatable, Sendable {
        /// A member asked to be told the owner is safe: to the owner and every member listening.
        case requested(CheckinAsk)
        /// The owner answered "safe": to everyone listening.
        case answered(CheckinAnswer)
        /// "Home safe" set (`home`), cleared by the owner (nil), or lapsed (`lapsed`, with the
        /// time it was in force until): to everyone listening.
        case home(CheckinHome?, lapsed: Bool)
        /// The recipients' member token was revoked: they no longer listen to the circle.
        case revoked(member: UInt32)
        /// The circle is gone (its owner closed it, or it was idle too long): nobody listens any more.
        case closed(CheckinCloseReason)
        /// A panic stream of the circle started, was escalated or ended: to everyone listening.
        case panic(CirclePanic)
    }

    public var circle: CircleID
    public var kind: Kind
    /// Never empty; sorted, so the hub's output is repeatable.
    public var recipients: [WatcherID]

    public init(circle: CircleID, kind: Kind, recipients: [WatcherID]) {
        self.circle = circle
        self.kind = kind
        self.recipients = recipients
    }
}

/// Why a circle was removed.
public enum CheckinCloseReason: String, Equatable, Sendable {
    /// `checkin.close` by its owner.
    case closed
    /// Nothing kept it alive for `idleLifetimeMs`.
    case idle
}

/// How `checkin.home` changes "home safe".
public enum CheckinHomeChange: Equatable, Sendable {
    /// For this many seconds from now.
    case forSeconds(Int64)
    /// Until this time (unix ms).
    case until(Int64)
    case clear
}

/// Why a check-in operation was refused.
public enum CheckinFailure: Error, Equatable, Sendable {
    /// Wrong token or no such circle: one answer, so a caller cannot learn whether a circle
    /// exists without a token for it.
    case forbidden
    /// `maxCircles` circles are held already.
    case capacityExceeded
    /// The circle has `maxMembers` live members.
    case tooManyMembers
    /// The member's requests per minute are spent; a retry after this many ms succeeds.
    case rateLimited(retryAfterMs: Int64)
    /// A home-safe time not in the future, or further ahead than `maxHomeMs`.
    case invalidHome
    /// The caller holds `maxSubscriptionsPerHolder` subscriptions in the circle already.
    case tooManySubscriptions
}

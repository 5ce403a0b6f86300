/// The `checkin.*` operations (docs/PROTOCOL.md, "Check-in circles"). `circle` is nil when the
/// text is not a circle id: answered like an unknown circle (`forbidden`).
public enum CheckinOperation: Equatable, Sendable {
    /// A new circle, with one member token per label (nil: a member without a label).
    case create(labels: [String?])
    /// The owner listens, and reads what it missed.
    case open(circle: CircleID?, ownerToken: String)
    case invite(circle: CircleID?, ownerToken: String, label: String?)
    case revoke(circle: CircleID?, ownerToken: String, member: UInt32)
    case answer(circle: CircleID?, ownerToken: String, note: String?)
    case home(circle: CircleID?, ownerToken: String, change: CheckinHomeChange)
    case close(circle: CircleID?, ownerToken: String)
    /// A member listens, and reads the state.
    case join(circle: CircleID?, memberToken: String)
    case request(circle: CircleID?, memberToken: String)
    /// Stop listening (owner or member).
    case leave(circle: CircleID?)
    /// A way to reach the caller (owner or member) when it is not connected: Web Push or a relay
    /// handle. `target` is well formed (`CheckinSubscription.Target.isWellFormed`); whether the
    /// server can use it is the application's to judge.
    case register(circle: CircleID?, credential: CheckinCredential, target: CheckinSubscription.Target)
    /// Removes one of the caller's subscriptions (nil: `subscription` is not an id, so none of them).
    case unregister(circle: CircleID?, credential: CheckinCredential, subscription: SubscriptionID?)
    /// "I have seen it": the owner or a member acknowledges a notice (nil: not a notice id).
    case ack(circle: CircleID?, credential: CheckinCredential, notice: NoticeID?)

    /// Wire names, in `index` order.
    public static let names = ["checkin.create", "checkin.open", "checkin.invite", "checkin.revoke", "checkin.answer",
                               "checkin.home", "checkin.close", "checkin.join", "checkin.request", "checkin.leave",
                               "checkin.register", "checkin.unregister", "checkin.ack"]

    /// Place in `names`.
    public var index: Int {
        switch self {
        case .create: return 0
        case .open: return 1
        case .invite: return 2
        case .revoke: return 3
        case .answer: return 4
        case .home: return 5
        case .close: return 6
        case .join: return 7
        case .request: return 8
        case .leave: return 9
        case .register: return 10
        case .unregister: return 11
        case .ack: return 12
        }
    }

    /// Counted against the session's write limit: what mints tokens, circles or subscriptions,
    /// and requests (which also have their own per-member rate). The owner's answer and home safe
    /// are not: saying "I am safe" is never rate limited below the message limit; nor is
    /// `unregister`: taking a way of reaching someone away only shrinks what the server holds.
    public var isWrite: Bool {
        switch self {
        case .create, .invite, .request, .register: return true
        case .open, .revoke, .answer, .home, .close, .join, .leave, .unregister, .ack: return false
        }
    }

    /// Journaled when they succeed (refused with `unavailable` while changes cannot be recorded).
    public var changesState: Bool {
        switch self {
        case .create, .invite, .revoke, .answer, .home, .close, .request, .register, .unregister, .ack: return true
        case .open, .join, .leave: return false
        }
    }

    /// Reads whose reply shows the circle's state (withdrawn with a change of the same turn that
    /// the journal could not record).
    public var readsState: Bool {
        switch self {
        case .open, .join: return true
        case .create, .invite, .revoke, .answer, .home, .close, .request, .leave, .register, .unregister, .ack: return false
        }
    }

    /// Whether it changes what the connection follows (a circle opened, joined or left).
    public var changesMembership: Bool {
        switch self {
        case .open, .join, .leave: return true
        case .create, .invite, .revoke, .answer, .home, .close, .request, .register, .unregister, .ack: return false
        }
    }
}

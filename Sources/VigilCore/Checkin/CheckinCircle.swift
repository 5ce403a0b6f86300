/// One member of a circle: an opaque number (1, 2, … in invitation order, never reused within the
/// circle), the label the owner chose when inviting (nil: none; members then see the number
/// only), and the digest of the member's token. The number and label are what other members see
/// of who asked; neither opens anything.
public struct CheckinMember: Equatable, Sendable {
    public let id: UInt32
    public let label: String?
    public let addedAt: Int64
    let digest: TokenDigest

    public init(id: UInt32, label: String?, addedAt: Int64, digest: TokenDigest) {
        self.id = id
        self.label = label
        self.addedAt = addedAt
        self.digest = digest
    }

    /// The token's digest, for the state codecs.
    public var tokenDigest: TokenDigest { digest }
}

/// A member's check-in request: who asked (number and label as they were then) and when.
public struct CheckinAsk: Equatable, Sendable {
    public let member: UInt32
    public let label: String?
    public let at: Int64

    public init(member: UInt32, label: String?, at: Int64) {
        self.member = member
        self.label = label
        self.at = at
    }
}

/// The owner's last answer: "safe", when, an optional note, and the requests it answered.
public struct CheckinAnswer: Equatable, Sendable {
    public let at: Int64
    public let note: String?
    public let answered: [CheckinAsk]

    public init(at: Int64, note: String?, answered: [CheckinAsk]) {
        self.at = at
        self.note = note
        self.answered = answered
    }
}

/// "Home safe", set at `at`, in force until `until` (then it lapses).
public struct CheckinHome: Equatable, Sendable {
    public let at: Int64
    public let until: Int64

    public init(at: Int64, until: Int64) {
        self.at = at
        self.until = until
    }
}

/// A check-in circle's durable state: a value, small (bounded by `maxMembers`), journaled whole
/// after every change (`circlePut`), so replay needs nothing but the last record of each circle.
/// Who is connected is not part of it (the hub keeps that).
public struct CheckinCircle: Equatable, Sendable {
    public let id: CircleID
    public let createdAt: Int64
    /// The last change that keeps the circle alive (see `CheckinSettings.idleLifetimeMs`).
    public internal(set) var activeAt: Int64
    let ownerDigest: TokenDigest
    /// Live members, in invitation order; a revoked member is removed.
    public internal(set) var members: [CheckinMember]
    /// The number the next member gets.
    public internal(set) var nextMember: UInt32
    /// Unanswered requests, oldest first, at most one per member (a newer one replaces it).
    public internal(set) var requests: [CheckinAsk]
    public internal(set) var answer: CheckinAnswer?
    public internal(set) var home: CheckinHome?
    /// How the owner and the members are reached when not connected, in registration order; at
    /// most `CheckinSettings.maxSubscriptionsPerHolder` each, and only the owner's and live
    /// members' (revoking a member removes its own).
    public internal(set) var subscriptions: [CheckinSubscription]

    public init(id: CircleID, createdAt: Int64, activeAt: Int64, ownerDigest: TokenDigest, members: [CheckinMember],
                nextMember: UInt32, requests: [CheckinAsk], answer: CheckinAnswer?, home: CheckinHome?,
                subscriptions: [CheckinSubscription] = []) {
        self.id = id
        self.createdAt = createdAt
        self.activeAt = activeAt
        self.ownerDigest = ownerDigest
        self.members = members
        self.nextMember = nextMember
        self.requests = requests
        self.answer = answer
        self.home = home
        self.subscriptions = subscriptions
    }

    public var ownerTokenDigest: TokenDigest { ownerDigest }

    /// When the circle is removed if nothing keeps it alive before.
    public func idleDeadline(_ settings: CheckinSettings) -> Int64 {
        PanicHub.saturatingSum(activeAt, settings.idleLifetimeMs)
    }

    /// The live member whose token has `digest`, checking every member whatever matches first, so
    /// the time taken says nothing about which member (or how many) come before it.
    func member(matching digest: TokenDigest) -> CheckinMember? {
        var found: CheckinMember?
        for m in members where m.digest.matches(digest) && found == nil { found = m }
        return found
    }

    func member(_ id: UInt32) -> CheckinMember? { members.first { $0.id == id } }

    /// Whether the state is one the hub could have made: members numbered below `nextMember` and
    /// unique, at most one request per member, subscriptions well formed, with unique ids, held by
    /// the owner or a live member, one per destination and holder. Restore refuses anything else
    /// as damage. (The per-holder bound is not checked: the config may have lowered it since.)
    public var isConsistent: Bool {
        var ids = Set<UInt32>()
        for m in members { guard m.id >= 1, m.id < nextMember, ids.insert(m.id).inserted else { return false } }
        var askers = Set<UInt32>()
        for r in requests { guard askers.insert(r.member).inserted else { return false } }
        if let home, home.until < home.at { return false }
        var subscriptionIDs = Set<SubscriptionID>()
        for (i, s) in subscriptions.enumerated() {
            if case .member(let m) = s.holder, !ids.contains(m) { return false }
            guard s.target.isWellFormed, subscriptionIDs.insert(s.id).inserted else { return false }
            guard !subscriptions[..<i].contains(where: { $0.holder == s.holder && $0.target.sameDestination(as: s.target) }) else { return false }
        }
        return activeAt >= createdAt
    }

    /// The same circle with `subscriptions` instead: the state codecs read them after the rest.
    public func withSubscriptions(_ subscriptions: [CheckinSubscription]) -> CheckinCircle {
        var circle = self
        circle.subscriptions = subscriptions
        return circle
    }

    /// The subscriptions of one holder, in registration order.
    public func subscriptions(of holder: CheckinRole) -> [CheckinSubscription] {
        subscriptions.filter { $0.holder == holder }
    }
}

extension CheckinCircle {
    /// When the hub must look at the circle next: home safe lapsing, or the circle idle too long.
    public func nextDue(_ settings: CheckinSettings) -> Int64 {
        min(home?.until ?? .max, idleDeadline(settings))
    }
}

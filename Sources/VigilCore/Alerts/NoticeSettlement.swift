/// One delivery of a notice that is done (delivered, gone, refused, expired or cancelled): durable,
/// so that a restart, which rebuilds every notice the state implies, does not send it again.
/// Kept with the circle the notice is about (`CheckinHub.settlements`), dropped with it, and
/// forgotten once the notice's time to live has passed (`CheckinHub.forgetSettlements`).
public struct NoticeSettlement: Equatable, Sendable {
    public let circle: CircleID
    public let notice: NoticeID
    public let subscription: SubscriptionID
    public let settlement: DeliverySettlement

    public init(circle: CircleID, notice: NoticeID, subscription: SubscriptionID, settlement: DeliverySettlement) {
        self.circle = circle
        self.notice = notice
        self.subscription = subscription
        self.settlement = settlement
    }

    public var key: DeliveryKey<SubscriptionID> { DeliveryKey(notice: notice, target: subscription) }
}

extension CheckinHub {
    /// Records a settled delivery (from the sender, the journal or another node). True when it
    /// was not held already (as this); a settlement for a circle not held is dropped (false).
    @discardableResult
    public mutating func recordSettlement(_ s: NoticeSettlement) -> Bool {
        guard circles[s.circle] != nil else { return false }
        return settlements[s.circle, default: [:]].updateValue(s, forKey: s.key) != s
    }

    /// Every settlement held, by circle, then notice, then subscription (for snapshots).
    public func exportSettlements() -> [NoticeSettlement] {
        var out: [NoticeSettlement] = []
        for id in settlements.keys.sorted() {
            out += settlements[id]!.values.sorted { ($0.notice, $0.subscription) < ($1.notice, $1.subscription) }
        }
        return out
    }

    public var settlementCount: Int { settlements.values.reduce(0) { $0 + $1.count } }

    /// Forgets the settlements of notices made before `cutoff` (their time to live is over: no
    /// restart would post them again).
    public mutating func forgetSettlements(before cutoff: Int64) {
        for (id, held) in settlements {
            let kept = held.filter { $0.key.notice.at >= cutoff }
            settlements[id] = kept.isEmpty ? nil : kept
        }
    }
}

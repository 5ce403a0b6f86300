import VigilCore
import VigilGeo

/// The live map by brute force, to check `MapHub` against: a plain list of subscriptions and a
/// plain list of pins, no geohash cells, covers, channels or indexes. For every change it says
/// exactly which subscribers must hear what, by asking each subscription whether its area and
/// categories hold the pin before and after.
///
/// It shares no code with the hub beyond the value types and `GeoArea.contains` (the definition
/// of "inside"), so a cover that misses a cell, a channel left behind by an unsubscribe, a stale
/// expiry entry or a transition sorted into the wrong kind all show up as a difference.
/// Used by MapHubTests' random walk and by the hub fuzz target (Tests/fuzz), which compiles this
/// file by path; so it uses only the public API of VigilCore and VigilGeo.
public struct MapHubOracle {
    public typealias SubscriberID = SubscriptionIndex.SubscriberID

    /// What one subscriber asked for; `categories` is the mask after defaulting to all.
    public struct Subscription {
        public let subscriber: SubscriberID
        public let area: GeoArea
        public let categories: UInt64
        /// The viewer position, for pins with a range.
        public let viewer: GeoPoint?
    }

    public let settings: PinSettings
    /// In the order they subscribed (a re-subscription replaces its entry in place).
    public private(set) var subscriptions: [Subscription] = []
    /// The live pins in creation order, which breaks ties of `createdAt` in subscribe replies.
    public private(set) var pins: [Pin] = []

    public init(settings: PinSettings) {
        self.settings = settings
    }

    /// Whether `subscription` holds `pin`: inside its area, of a wanted, known category, and for
    /// a pin with a range, within that great-circle distance of the subscription's viewer (none:
    /// never). Measured with `GeoDistance.meters` directly, not the hub's `PinReach`.
    public func holds(_ subscription: Subscription, _ pin: Pin) -> Bool {
        guard let bit = settings.categoryIndex(pin.category) else { return false }
        guard subscription.categories & (1 << UInt64(bit)) != 0 && subscription.area.contains(pin.point) else { return false }
        guard let range = pin.rangeMeters else { return true }
        guard let viewer = subscription.viewer else { return false }
        return GeoDistance.meters(pin.point, viewer) <= Double(range)
    }

    /// `kind` about `pin` to every subscription that holds it.
    func notices(_ kind: PinEventKind, _ pin: Pin) -> [PinNotice] {
        subscriptions.filter { holds($0, pin) }.map { PinNotice(subscriber: $0.subscriber, kind: kind, pin: pin) }
    }

    // MARK: subscriptions

    /// Replaces `subscriber`'s subscription; the reply it must get: the pins now inside, newest
    /// first (`createdAt`, then creation order), at most `maxSubscribePins`, and whether more matched.
    public mutating func subscribe(_ subscriber: SubscriberID, area: GeoArea, categories: UInt64?,
                                   viewer: GeoPoint? = nil) -> (pins: [Pin], truncated: Bool) {
        let subscription = Subscription(subscriber: subscriber, area: area, categories: categories ?? settings.allCategories, viewer: viewer)
        if let at = subscriptions.firstIndex(where: { $0.subscriber == subscriber }) {
            subscriptions[at] = subscription
        } else {
            subscriptions.append(subscription)
        }
        let inside = pins.enumerated().filter { holds(subscription, $0.element) }
            .sorted { ($0.element.createdAt, $0.offset) > ($1.element.createdAt, $1.offset) }
            .map(\.element)
        return (Array(inside.prefix(settings.maxSubscribePins)), inside.count > settings.maxSubscribePins)
    }

    public mutating func unsubscribe(_ subscriber: SubscriberID) {
        subscriptions.removeAll { $0.subscriber == subscriber }
    }

    // MARK: writes

    /// A new pin: `added` to every subscription that holds it; refused at `maxPins`.
    public mutating func create(_ draft: PinDraft, id: PinID, editDigest: TokenDigest, now: Int64) -> (result: Result<Pin, PinFailure>, notices: [PinNotice]) {
        guard pins.count < settings.maxPins else { return (.failure(.capacityExceeded), []) }
        var pin = Pin(id: id, point: draft.point, title: draft.title, description: draft.description, category: draft.category,
                      createdAt: now, expiresAt: now + Int64(draft.ttlSeconds) * 1000, editDigest: editDigest)
        pin.rangeMeters = draft.rangeMeters
        pins.append(pin)
        return (.success(pin), notices(.added, pin))
    }

    /// An owner's edit. Per subscription: held before and after, `updated`; only before,
    /// `removed(moved)`; only after, `added`; each with the edited pin.
    public mutating func update(_ id: PinID, digest: TokenDigest, changes: PinChanges, now: Int64) -> (result: Result<Pin, PinFailure>, notices: [PinNotice]) {
        guard let at = pins.firstIndex(where: { $0.id == id }), pins[at].editDigest.matches(digest) else { return (.failure(.forbidden), []) }
        let old = pins[at]
        var new = Pin(id: old.id, point: GeoPoint(lat: changes.lat ?? old.point.lat, lon: changes.lon ?? old.point.lon),
                      title: changes.title ?? old.title, description: changes.description ?? old.description,
                      category: changes.category ?? old.category, createdAt: old.createdAt,
                      expiresAt: changes.ttlSeconds.map { now + Int64($0) * 1000 } ?? old.expiresAt, editDigest: old.editDigest)
        new.updatedAt = now
        new.up = old.up
        new.down = old.down
        new.votes = old.votes
        switch changes.range {
        case .set(let meters)?: new.rangeMeters = meters
        case .remove?: new.rangeMeters = nil
        case nil: new.rangeMeters = old.rangeMeters
        }
        pins[at] = new
        var told: [PinNotice] = []
        for subscription in subscriptions {
            switch (holds(subscription, old), holds(subscription, new)) {
            case (true, true): told.append(PinNotice(subscriber: subscription.subscriber, kind: .updated, pin: new))
            case (true, false): told.append(PinNotice(subscriber: subscription.subscriber, kind: .removed(.moved), pin: new))
            case (false, true): told.append(PinNotice(subscriber: subscription.subscriber, kind: .added, pin: new))
            case (false, false): break
            }
        }
        return (.success(new), told)
    }

    /// The owner deletes: `removed(deleted)` to every subscription that held it.
    public mutating func delete(_ id: PinID, digest: TokenDigest) -> (result: Result<Pin, PinFailure>, notices: [PinNotice]) {
        guard let at = pins.firstIndex(where: { $0.id == id }), pins[at].editDigest.matches(digest) else { return (.failure(.forbidden), []) }
        let pin = pins.remove(at: at)
        return (.success(pin), notices(.removed(.deleted), pin))
    }

    /// `voter` votes `value`: the same value again changes nothing; a new voter beyond
    /// `maxVotersPerPin` is refused; otherwise the counts are recounted from the votes, and the pin
    /// is `updated` for its subscribers, or `removed(flagged)` for everyone at the threshold.
    public mutating func vote(_ id: PinID, voter: UInt64, value: Int8) -> (result: Result<VoteOutcome, PinFailure>, notices: [PinNotice]) {
        guard let at = pins.firstIndex(where: { $0.id == id }) else { return (.failure(.notFound), []) }
        var pin = pins[at]
        let previous = pin.votes[voter]
        if previous == value { return (.success(VoteOutcome(change: .unchanged, pin: pin, voter: voter, value: value)), []) }
        if previous == nil && pin.votes.count >= settings.maxVotersPerPin { return (.failure(.tooManyVoters), []) }
        pin.votes[voter] = value
        pin.up = pin.votes.values.filter { $0 == 1 }.count
        pin.down = pin.votes.values.filter { $0 == -1 }.count
        if pin.down - pin.up >= settings.voteFlagThreshold {
            pins.remove(at: at)
            return (.success(VoteOutcome(change: .flagged, pin: pin, voter: voter, value: value)), notices(.removed(.flagged), pin))
        }
        pins[at] = pin
        return (.success(VoteOutcome(change: .counted, pin: pin, voter: voter, value: value)), notices(.updated, pin))
    }

    /// Every pin whose `expiresAt` is at or before `now` goes: `expired` to every subscription that held it.
    public mutating func expire(now: Int64) -> (notices: [PinNotice], removed: Int) {
        let due = pins.filter { $0.expiresAt <= now }
        pins.removeAll { $0.expiresAt <= now }
        return (due.flatMap { notices(.expired, $0) }, due.count)
    }
}

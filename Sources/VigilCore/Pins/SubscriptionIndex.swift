import VigilGeo

/// Who listens where: map subscriptions and the geohash channels they are registered in.
///
/// A subscription is covered by cells of one precision, chosen per subscription under a cell
/// budget (a street gets 150 m cells, a country 150 km ones), and registered in the channel of
/// each cell. A pin event looks up, for each precision some subscription uses, the one channel
/// whose cell contains the pin (a shift and a dictionary lookup per precision), then filters the
/// candidates exactly against their area and categories. The cost of an event is therefore
/// O(subscribers of those channels), never O(all connections); each subscriber sits in exactly one
/// precision and a point lies in exactly one cell of it, so nobody is offered an event twice.
public struct SubscriptionIndex: Sendable {
    /// A subscriber: the application's id for a connection.
    public typealias SubscriberID = Int32

    public struct Subscription: Equatable, Sendable {
        public var area: GeoArea
        /// Bit i set: category i of `PinSettings.categories` is wanted.
        public var categories: UInt64
        public var precision: Int
        public var cells: [GeohashCell]

        public func wants(_ point: GeoPoint, categoryBit: Int) -> Bool {
            categories & (1 << UInt64(categoryBit)) != 0 && area.contains(point)
        }
    }

    /// A channel's entry: what the exact filter needs is stored inline, so an event walks a
    /// contiguous array without a dictionary lookup per candidate.
    struct Member: Sendable {
        let id: SubscriberID
        let categories: UInt64
        let area: GeoArea

        @inline(__always)
        func wants(_ point: GeoPoint, categoryBit: Int) -> Bool {
            categories & (1 << UInt64(categoryBit)) != 0 && area.contains(point)
        }
    }

    public private(set) var subscriptions: [SubscriberID: Subscription] = [:]
    private(set) var channels: [UInt64: [Member]] = [:]
    /// How many subscriptions use each precision (index = precision); events skip unused ones.
    private var precisionUse = [Int](repeating: 0, count: Geohash.maxPrecision + 1)

    public init() {}

    public var count: Int { subscriptions.count }

    /// Channels (geohash cells) with at least one subscriber.
    public var channelCount: Int { channels.count }

    /// Registers (or replaces) `subscriber`'s subscription.
    public mutating func set(_ subscriber: SubscriberID, _ subscription: Subscription) {
        remove(subscriber)
        subscriptions[subscriber] = subscription
        precisionUse[subscription.precision] += 1
        let member = Member(id: subscriber, categories: subscription.categories, area: subscription.area)
        for cell in subscription.cells {
            channels[cell.key, default: []].append(member)
        }
    }

    public mutating func remove(_ subscriber: SubscriberID) {
        guard let old = subscriptions.removeValue(forKey: subscriber) else { return }
        precisionUse[old.precision] -= 1
        for cell in old.cells {
            let key = cell.key
            // In place (the dictionary's modify accessor): copying a big channel out and back would
            // cost O(members) per cell, and a country-wide subscription can sit in busy channels.
            if channels[key]?.removeMember(subscriber) == true {
                channels.removeValue(forKey: key)
            }
        }
    }

    /// Calls `body` for every subscriber whose subscription holds a pin at `point` (in `cell`, a
    /// full-precision cell) with category bit `categoryBit`. Each subscriber at most once.
    public func forEachSubscriber(at point: GeoPoint, cell: GeohashCell, categoryBit: Int, _ body: (SubscriberID) -> Void) {
        for precision in 1...Geohash.maxPrecision where precisionUse[precision] > 0 {
            guard let members = channels[cell.ancestor(precision: precision).key] else { continue }
            for member in members where member.wants(point, categoryBit: categoryBit) {
                body(member.id)
            }
        }
    }

    /// Whether `subscriber` would see a pin at `point` with category bit `categoryBit`.
    public func wants(_ subscriber: SubscriberID, _ point: GeoPoint, categoryBit: Int) -> Bool {
        subscriptions[subscriber]?.wants(point, categoryBit: categoryBit) ?? false
    }
}

private extension Array where Element == SubscriptionIndex.Member {
    /// Removes `subscriber`'s entry, if any, by moving the last entry into its place (the order of
    /// a channel's members means nothing); returns whether the channel is left empty.
    mutating func removeMember(_ subscriber: SubscriptionIndex.SubscriberID) -> Bool {
        if let at = firstIndex(where: { $0.id == subscriber }) {
            swapAt(at, count - 1)
            removeLast()
        }
        return isEmpty
    }
}

import VigilGeo

/// Who listens where: map subscriptions and the geohash channels they are registered in.
///
/// A subscription is covered by cells of one precision, chosen per subscription under a cell
/// budget (a street gets 150 m cells, a country 150 km ones), and registered in the channel of
/// each cell. A pin event looks up, for each precision some subscription uses, the one channel
/// whose cell contains the pin (a shift and a dictionary lookup per precision), then filters the
/// candidates exactly against their area and categories (a member whose channel's cell lies wholly
/// inside its area needs the categories only). The cost of an event is therefore
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
        /// The subscriber's own position (`viewer`), for the reach of pins with a range only
        /// (`PinReach`): held while the subscription lasts, never stored or logged.
        public var viewer: GeoPoint? = nil

        public func wants(_ point: GeoPoint, categoryBit: Int) -> Bool {
            categories & (1 << UInt64(categoryBit)) != 0 && area.contains(point)
        }
    }

    /// A channel's entry: what the exact filter needs is stored inline, so an event walks a
    /// contiguous array without a dictionary lookup per candidate.
    struct Member: Sendable {
        let id: SubscriberID
        /// Which of the subscriber's cells this channel is (an index into its `cells`): where a
        /// swap-remove that moves this entry writes its new position (in `positions`).
        let slot: Int32
        let categories: UInt64
        let area: GeoArea
        /// The channel's cell lies wholly inside `area` (`GeoArea.surelyContains`, conservative:
        /// false when unsure), so every pin this channel is offered, which lies in the cell, is
        /// inside the area and needs only the category test. Most cells of a map's view are
        /// interior ones; only those along its rim still pay for the area test per pin.
        let whole: Bool

        init(id: SubscriberID, slot: Int32, categories: UInt64, area: GeoArea, cell: GeohashCell) {
            self.id = id
            self.slot = slot
            self.categories = categories
            self.area = area
            self.whole = area.surelyContains(cell.box)
        }

        /// `point` must lie in the channel's cell (a pin's point does: its full-precision cell,
        /// whose ancestor names the channel, has a box inside the ancestor's and holding the point).
        @inline(__always)
        func wants(_ point: GeoPoint, mask: UInt64) -> Bool {
            categories & mask != 0 && (whole || area.contains(point))
        }
    }

    public private(set) var subscriptions: [SubscriberID: Subscription] = [:]
    private(set) var channels: [UInt64: [Member]] = [:]
    /// Where each subscriber sits: `positions[s][k]` is its index in the channel of its k-th cell.
    /// Removing it is then a swap-remove per cell, O(1) whatever the channel's size, instead of a
    /// scan of the channel for it (a city's channels hold thousands of members, and a panning map
    /// leaves all of its cells about once a second).
    private(set) var positions: [SubscriberID: [Int32]] = [:]
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
        var at: [Int32] = []
        at.reserveCapacity(subscription.cells.count)
        for (k, cell) in subscription.cells.enumerated() {
            let member = Member(id: subscriber, slot: Int32(k), categories: subscription.categories, area: subscription.area, cell: cell)
            at.append(channels[cell.key, default: []].appendMember(member))
        }
        positions[subscriber] = at
    }

    public mutating func remove(_ subscriber: SubscriberID) {
        guard let old = subscriptions.removeValue(forKey: subscriber), var at = positions.removeValue(forKey: subscriber) else { return }
        precisionUse[old.precision] -= 1
        for (k, cell) in old.cells.enumerated() {
            let key = cell.key
            // In place (the dictionary's modify accessor): copying a big channel out and back would
            // cost O(members) per cell, and a country-wide subscription can sit in busy channels.
            guard let outcome = channels[key]?.removeMember(at: Int(at[k])) else { preconditionFailure("a subscriber's channel is missing") }
            switch outcome {
            case .emptied:
                channels.removeValue(forKey: key)
            case .moved(let member) where member.id == subscriber:
                at[Int(member.slot)] = at[k]          // the same cell listed twice in one cover
            case .moved(let member):
                positions[member.id]?[Int(member.slot)] = at[k]
            case .wasLast:
                break
            }
        }
    }

    /// Calls `body` for every subscriber whose subscription holds a pin at `point` (in `cell`, a
    /// full-precision cell) with category bit `categoryBit`. Each subscriber at most once.
    /// `cell` must be `point`'s own (`Geohash.cell(point, precision: Geohash.maxPrecision)`, as a
    /// pin's `cell` is): members whose channel cell lies wholly inside their area skip the area test.
    public func forEachSubscriber(at point: GeoPoint, cell: GeohashCell, categoryBit: Int, _ body: (SubscriberID) -> Void) {
        let mask: UInt64 = 1 << UInt64(categoryBit)
        for precision in 1...Geohash.maxPrecision where precisionUse[precision] > 0 {
            guard let members = channels[cell.ancestor(precision: precision).key] else { continue }
            // Each entry's fields are read where it lies: a `for member in members` copy made the
            // compiler load the whole 56-byte entry, area included, before the whole-cell test.
            members.withUnsafeBufferPointer { entries in
                for i in entries.indices where entries[i].wants(point, mask: mask) {
                    body(entries[i].id)
                }
            }
        }
    }

    /// How many channel entries `forEachSubscriber` walks for a pin in `cell` (a full-precision
    /// cell): an upper bound on the subscribers it calls.
    func candidateCount(in cell: GeohashCell) -> Int {
        var count = 0
        for precision in 1...Geohash.maxPrecision where precisionUse[precision] > 0 {
            count += channels[cell.ancestor(precision: precision).key]?.count ?? 0
        }
        return count
    }

    /// Whether `subscriber` would see a pin at `point` with category bit `categoryBit`.
    public func wants(_ subscriber: SubscriberID, _ point: GeoPoint, categoryBit: Int) -> Bool {
        subscriptions[subscriber]?.wants(point, categoryBit: categoryBit) ?? false
    }
}

extension SubscriptionIndex {
    /// What removing an entry from a channel did to the channel's other entries.
    enum Removal {
        /// The channel has no entries left.
        case emptied
        /// The removed entry was the last one: nothing moved.
        case wasLast
        /// The channel's last entry was moved into the removed one's place.
        case moved(Member)
    }

    /// Nil when every channel entry is where `positions` says and each subscription has exactly
    /// one entry per cell; else what is wrong (for tests).
    func inconsistency() -> String? {
        var entries = 0
        for (key, members) in channels {
            if members.isEmpty { return "channel \(key) is empty but kept" }
            for (index, member) in members.enumerated() {
                guard let sub = subscriptions[member.id], let at = positions[member.id], Int(member.slot) < sub.cells.count,
                      sub.cells[Int(member.slot)].key == key, at[Int(member.slot)] == Int32(index) else {
                    return "channel \(key) entry \(index) (subscriber \(member.id), slot \(member.slot)) is not where its positions say"
                }
                entries += 1
            }
        }
        let expected = subscriptions.values.reduce(0) { $0 + $1.cells.count }
        if entries != expected { return "\(entries) channel entries, expected \(expected)" }
        if positions.count != subscriptions.count { return "\(positions.count) position lists for \(subscriptions.count) subscriptions" }
        return nil
    }
}

private extension Array where Element == SubscriptionIndex.Member {
    /// Appends `member`; returns its index.
    mutating func appendMember(_ member: SubscriptionIndex.Member) -> Int32 {
        append(member)
        return Int32(count - 1)
    }

    /// Removes the entry at `index` by moving the last entry into its place (the order of a
    /// channel's members means nothing: each recipient has a queue of its own, and what one
    /// subscriber receives keeps the order of the events whatever order the recipients are
    /// walked in).
    mutating func removeMember(at index: Int) -> SubscriptionIndex.Removal {
        let last = count - 1
        if index == last {
            removeLast()
            return isEmpty ? .emptied : .wasLast
        }
        self[index] = self[last]
        removeLast()
        return .moved(self[index])
    }
}

import HeapModule
import VigilGeo

/// Who watches counts where: cluster subscriptions, the channels (cells) they are registered in,
/// which of their cells changed since they were last told, and when each may be told next.
///
/// A subscription is covered by cells of one precision (its cover). A channel (a cell) lists only
/// its **clean** subscribers: those not yet told that the cell changed since their last message.
/// Invariant: for every subscriber and every cell of its cover, the cell is in its dirty set or
/// the subscriber is in the cell's channel (or both).
///
/// A change at a point looks up, per precision in use, the channel of the cell holding the point,
/// and moves each member wanting the pin's category out of it, marking the cell dirty for it and
/// scheduling its next slot (`lastSentMs + interval`, in a heap). A member leaves a channel once
/// and comes back only when it is next told (its message clears its dirty cells), so the marking
/// work is bounded by the messages sent (at most a cover per subscriber per interval), not by the
/// rate of changes: the thousandth change to a busy cell within a second finds its channel empty.
/// No message is built per change: a subscriber's dirty cells wait for its slot, when one message
/// carries them all.
public struct ClusterIndex: Sendable {
    public typealias SubscriberID = SubscriptionIndex.SubscriberID

    public struct Subscription: Sendable {
        /// Bit i set: category i of `PinSettings.categories` is counted.
        public var categories: UInt64
        public var precision: Int
        public var cells: [GeohashCell]
        /// Keys of the cells changed since the subscriber was last told (at most its cover).
        public internal(set) var dirty: Set<UInt64> = []
        /// When it was last told (its reply, or its last `clusters.changed`), monotonic ms.
        public internal(set) var lastSentMs: Int64
        /// Whether a heap entry will bring it up.
        var scheduled = false
        /// Tells this subscription's heap entries from those of an earlier one of the subscriber.
        var generation: UInt64

        /// Moves the dirty cells out (told at `now`).
        mutating func takeDirty(into cells: inout [GeohashCell], now: Int64) {
            scheduled = false
            lastSentMs = now
            cells.reserveCapacity(dirty.count)
            for key in dirty { cells.append(GeohashCell(bits: key >> 4, precision: Int(key & 0xF))) }
            dirty.removeAll(keepingCapacity: true)
        }
    }

    /// What is due for one subscriber: its dirty cells, to be told their counts now.
    public struct Due: Sendable {
        public var subscriber: SubscriberID
        public var categories: UInt64
        public var cells: [GeohashCell]
    }

    struct Slot: Comparable, Sendable {
        let at: Int64
        let subscriber: SubscriberID
        let generation: UInt64
        static func < (a: Slot, b: Slot) -> Bool { (a.at, a.generation) < (b.at, b.generation) }
    }

    public private(set) var subscriptions: [SubscriberID: Subscription] = [:]
    /// Cell key → the clean subscribers whose cover holds it (see above). Sets: a country's cells
    /// can be held by thousands of subscribers, and leaving must not scan them.
    private var channels: [UInt64: Set<SubscriberID>] = [:]
    private var precisionUse = [Int](repeating: 0, count: Geohash.maxPrecision + 1)
    private var slots = Heap<Slot>()
    private var nextGeneration: UInt64 = 0

    public init() {}

    public var count: Int { subscriptions.count }
    public var isEmpty: Bool { subscriptions.isEmpty }
    public var channelCount: Int { channels.count }

    /// Registers (or replaces) `subscriber`'s subscription, told its counts at `now`.
    public mutating func set(_ subscriber: SubscriberID, categories: UInt64, precision: Int, cells: [GeohashCell], now: Int64) {
        remove(subscriber)
        nextGeneration += 1
        subscriptions[subscriber] = Subscription(categories: categories, precision: precision, cells: cells,
                                                 lastSentMs: now, generation: nextGeneration)
        precisionUse[precision] += 1
        for cell in cells { channels[cell.key, default: []].insert(subscriber) }
    }

    public mutating func remove(_ subscriber: SubscriberID) {
        guard let old = subscriptions.removeValue(forKey: subscriber) else { return }
        precisionUse[old.precision] -= 1
        for cell in old.cells {
            // In place: no copy of a big channel per cell.
            if channels[cell.key]?.remove(subscriber) != nil, channels[cell.key]?.isEmpty == true {
                channels.removeValue(forKey: cell.key)
            }
        }
        // Its heap entry, if any, is now stale (no subscription of that generation) and skipped.
    }

    /// The precisions some subscription uses, coarsest first.
    public var precisionsInUse: [Int] { (1...Geohash.maxPrecision).filter { precisionUse[$0] > 0 } }

    /// A pin in `cell` (full precision) with category bit `categoryBit` changed the counts:
    /// marks the cell dirty for every subscriber counting it, and schedules those not yet due.
    public mutating func mark(_ cell: GeohashCell, categoryBit: Int, now: Int64, intervalMs: Int64) {
        for precision in 1...min(cell.precision, Geohash.maxPrecision) where precisionUse[precision] > 0 {
            markChannel(cell.ancestor(precision: precision).key, categoryBit: categoryBit, now: now, intervalMs: intervalMs)
        }
    }

    /// `mark` for one channel (a cell key of a precision in use): O(its clean members).
    public mutating func markChannel(_ key: UInt64, categoryBit: Int, now: Int64, intervalMs: Int64) {
        let bit: UInt64 = 1 << UInt64(categoryBit)
        // Taken out whole: members counting the category leave it, and usually all of them do.
        guard let clean = channels.removeValue(forKey: key) else { return }
        var kept = Set<SubscriberID>()
        for subscriber in clean {
            // Read through a temporary gone before the write: a copy held across it would
            // share the dirty set and make the insert copy it.
            guard let (categories, scheduled, last) = subscriptions[subscriber].map({ ($0.categories, $0.scheduled, $0.lastSentMs) }) else { continue }
            if categories & bit == 0 {
                kept.insert(subscriber)
                continue
            }
            subscriptions[subscriber]?.dirty.insert(key)
            if !scheduled { schedule(subscriber, at: max(now, last + intervalMs)) }
        }
        if !kept.isEmpty { channels[key] = kept }
    }

    /// Takes every subscriber whose slot has come with its dirty cells (clearing them); each is
    /// then due again no earlier than `now + interval`.
    public mutating func takeDue(now: Int64) -> [Due] {
        var due: [Due] = []
        while let top = slots.min, top.at <= now {
            _ = slots.popMin()
            guard let categories = subscriptions[top.subscriber].flatMap({ $0.generation == top.generation && $0.scheduled ? $0.categories : nil }) else { continue }
            var cells: [GeohashCell] = []
            subscriptions[top.subscriber]?.takeDirty(into: &cells, now: now)
            // Told now: clean again in those cells' channels.
            for cell in cells { channels[cell.key, default: []].insert(top.subscriber) }
            if !cells.isEmpty { due.append(Due(subscriber: top.subscriber, categories: categories, cells: cells)) }
        }
        return due
    }

    /// Gives back cells that could not be sent now (the subscriber's previous message is still
    /// unsent, or the message would have been too large): they go out `intervalMs` from now.
    public mutating func postpone(_ subscriber: SubscriberID, cells: [GeohashCell], now: Int64, intervalMs: Int64) {
        guard let (precision, wasScheduled, generation) = subscriptions[subscriber].map({ ($0.precision, $0.scheduled, $0.generation) }),
              !cells.isEmpty else { return }
        for cell in cells where cell.precision == precision { subscriptions[subscriber]?.dirty.insert(cell.key) }
        subscriptions[subscriber]?.scheduled = true
        if !wasScheduled { slots.insert(Slot(at: now + intervalMs, subscriber: subscriber, generation: generation)) }
    }

    /// The subscriber's message was handed to its connection at `at` (monotonic ms), later than
    /// the `now` of the `takeDue` that took it: its next slot counts from then. A flush of
    /// thousands of messages takes a while, and counting every slot from the flush's start would
    /// let a subscriber written late in one flush and early in the next hear twice in less than
    /// an interval.
    public mutating func told(_ subscriber: SubscriberID, at: Int64) {
        guard let last = subscriptions[subscriber]?.lastSentMs, at > last else { return }
        subscriptions[subscriber]?.lastSentMs = at
    }

    /// The earliest slot pending (possibly a stale one), for tests and the bench.
    public var nextSlot: Int64? { slots.min?.at }

    private mutating func schedule(_ subscriber: SubscriberID, at: Int64) {
        guard let generation = subscriptions[subscriber]?.generation else { return }
        subscriptions[subscriber]?.scheduled = true
        slots.insert(Slot(at: at, subscriber: subscriber, generation: generation))
    }
}

extension ClusterIndex {
    /// Nil when every cell of every cover is dirty for its subscriber or lists it as clean, and
    /// no channel lists anyone else; else what is wrong (for tests).
    func inconsistency() -> String? {
        for (id, sub) in subscriptions {
            for cell in sub.cells where !sub.dirty.contains(cell.key) && channels[cell.key]?.contains(id) != true {
                return "subscriber \(id): cell \(cell) neither dirty nor clean"
            }
        }
        for (key, members) in channels {
            if members.isEmpty { return "channel \(key) is empty but kept" }
            for id in members where subscriptions[id]?.cells.contains(where: { $0.key == key }) != true {
                return "channel \(key) lists \(id), whose cover does not hold it"
            }
        }
        return nil
    }
}

import VigilGeo

/// One cell of a cluster view, as a subscriber sees it: its pins of the categories it counts.
public struct ClusterCell: Equatable, Sendable {
    public var cell: GeohashCell
    public var count: Int
    /// Pins per category (in the order of `PinSettings.categories`), only categories with pins.
    public var byCategory: [CategoryCount]
    /// The mean position of the counted pins (0 when `count` is 0).
    public var lat: Double
    public var lon: Double
}

public struct CategoryCount: Equatable, Sendable {
    public var category: String
    public var count: Int
}

/// The cells one cluster subscriber is to be told of now (`clusters.changed`).
public struct ClusterUpdate: Sendable {
    public var subscriber: MapHub.SubscriberID
    public var precision: Int
    public var cells: [ClusterCell]
}

/// What one flush's messages share: category bits by tag, and each cell's JSON per category mask.
public struct ClusterEncoding: Sendable {
    struct Key: Hashable {
        let cell: UInt64
        let categories: UInt64
    }
    let bits: [Int?]
    var cache: [Key: [UInt8]] = [:]
}

/// Cluster subscriptions (`"view":"clusters"`, docs/PROTOCOL.md): counts per cell instead of pins.
/// A connection has one subscription, of either view: subscribing with one ends the other.
extension MapHub {
    /// Subscribes `subscriber` to the counts of `area` (replacing any subscription, of either
    /// view); returns the precision chosen and every cell of the cover with pins it counts.
    public mutating func subscribeClusters(_ subscriber: SubscriberID, area: GeoArea, categories: UInt64?, now: Int64) -> (precision: Int, cells: [ClusterCell]) {
        subscriptions.remove(subscriber)
        let (precision, cover) = GeohashCover.choose(covering: area, budget: settings.clusterCellBudget,
                                                     minPrecision: settings.clusterPrecisionMin, maxPrecision: settings.clusterPrecisionMax)
        var seen = Set<UInt64>()
        let cells = cover.filter { seen.insert($0.key).inserted }     // a cover across the antimeridian may list a cell twice
        let mask = categories ?? settings.allCategories
        clusterSubscriptions.set(subscriber, categories: mask, precision: precision, cells: cells, now: now)
        store.clusters.recording = true
        let bits = categoryBitsByTag()
        var shown: [ClusterCell] = []
        for cell in cells {
            let c = clusterCell(cell, categories: mask, bits: bits)
            if c.count > 0 { shown.append(c) }
        }
        return (precision, shown)
    }

    /// Ends `subscriber`'s cluster subscription, if it has one.
    public mutating func unsubscribeClusters(_ subscriber: SubscriberID) {
        clusterSubscriptions.remove(subscriber)
        if clusterSubscriptions.isEmpty { store.clusters.recording = false }
    }

    /// The `clusters.changed` due at `now` (monotonic ms): the changes since the last call are
    /// marked on the subscribers that count them, then every subscriber whose slot has come gets
    /// the current counts of its changed cells (a cell now empty with count 0).
    public mutating func takeClusterUpdates(now: Int64) -> [ClusterUpdate] {
        let (due, encoding) = takeDueClusters(now: now)
        return due.map { d in
            ClusterUpdate(subscriber: d.subscriber, precision: d.cells[0].precision,
                          cells: d.cells.map { clusterCell($0, categories: d.categories, bits: encoding.bits) })
        }
    }

    /// `takeClusterUpdates` for the server: the subscribers due, with their changed cells, and
    /// the encoding state for `clustersChangedJSON` (valid until the hub changes again).
    public mutating func takeDueClusters(now: Int64) -> (due: [ClusterIndex.Due], encoding: ClusterEncoding) {
        guard !clusterSubscriptions.isEmpty else { return ([], ClusterEncoding(bits: [])) }
        markClusterChanges(now: now)
        return (clusterSubscriptions.takeDue(now: now), ClusterEncoding(bits: categoryBitsByTag()))
    }

    /// Writes `due`'s `clusters.changed` (at most `maxBytes`, at least one cell); returns how
    /// many of its cells it holds. Each (cell, categories) is encoded once per `encoding`: the
    /// country-wide subscribers due in one flush share their cells' bytes.
    public func clustersChangedJSON(_ due: ClusterIndex.Due, encoding: inout ClusterEncoding, maxBytes: Int, into w: inout JSONWriter) -> Int {
        var cells: [[UInt8]] = []
        cells.reserveCapacity(due.cells.count)
        for cell in due.cells {
            let key = ClusterEncoding.Key(cell: cell.key, categories: due.categories)
            if let bytes = encoding.cache[key] {
                cells.append(bytes)
            } else {
                let bytes = ServerMessages.clusterCellJSON(clusterCell(cell, categories: due.categories, bits: encoding.bits))
                encoding.cache[key] = bytes
                cells.append(bytes)
            }
        }
        return ServerMessages.clustersChanged(precision: due.cells[0].precision, cells, maxBytes: maxBytes, into: &w)
    }

    /// The first half of `takeClusterUpdates`: marks the changes since the last call on the
    /// subscribers that count them (and schedules them), building nothing.
    public mutating func markClusterChanges(now: Int64) {
        let touched = store.clusters.takeTouched()
        guard !touched.isEmpty else { return }
        let bits = categoryBitsByTag()
        let interval = Int64(settings.clusterIntervalMs)
        // Each (cell, category) walks its channel once per call however often it changed: a
        // busy turn's changes in one city cost one walk of that city's subscribers, not one each.
        let precisions = clusterSubscriptions.precisionsInUse
        var walked = Set<ChannelMark>()
        for touch in touched {
            guard let bit = bits[Int(touch.tag)] else { continue }
            for precision in precisions where precision <= touch.cell.precision {
                let key = touch.cell.ancestor(precision: precision).key
                if walked.insert(ChannelMark(key: key, bit: bit)).inserted {
                    clusterSubscriptions.markChannel(key, categoryBit: bit, now: now, intervalMs: interval)
                }
            }
        }
    }

    private struct ChannelMark: Hashable {
        let key: UInt64
        let bit: Int
    }

    /// Cells that could not be sent at their slot, with their counts as they are then: after a
    /// message that went out (`sent`: it was cut to size), at the subscriber's next slot; when
    /// nothing went out (its earlier output is still unsent), retried `retryMs` later.
    public mutating func postponeClusters(_ subscriber: SubscriberID, cells: [GeohashCell], now: Int64, sent: Bool, retryMs: Int64 = 50) {
        let after = sent ? Int64(settings.clusterIntervalMs) : min(retryMs, Int64(settings.clusterIntervalMs))
        clusterSubscriptions.postpone(subscriber, cells: cells, now: now, intervalMs: after)
    }

    /// `subscriber`'s `clusters.changed` went out at `at` (after the `now` of the flush that took
    /// it): its next slot is an interval after that (`ClusterIndex.told`).
    public mutating func clustersSent(_ subscriber: SubscriberID, at: Int64) {
        clusterSubscriptions.told(subscriber, at: at)
    }

    /// A cell's counts for a subscriber counting the categories of `categories`.
    func clusterCell(_ cell: GeohashCell, categories: UInt64, bits: [Int?]) -> ClusterCell {
        var count: Int64 = 0, lat: Int64 = 0, lon: Int64 = 0
        var byCategory: [(bit: Int, count: Int)] = []
        for tally in store.clusters.tallies(cell) {
            guard Int(tally.tag) < bits.count, let bit = bits[Int(tally.tag)], categories & (1 << UInt64(bit)) != 0 else { continue }
            count += Int64(tally.count)
            lat += tally.latSum
            lon += tally.lonSum
            byCategory.append((bit, Int(tally.count)))
        }
        byCategory.sort { $0.bit < $1.bit }
        let n = Double(max(count, 1))
        return ClusterCell(cell: cell, count: Int(count),
                           byCategory: byCategory.map { CategoryCount(category: settings.categories[$0.bit], count: $0.count) },
                           lat: count == 0 ? 0 : Double(lat) / n / 1e7, lon: count == 0 ? 0 : Double(lon) / n / 1e7)
    }

    /// Each store category tag's bit in `settings.categories` (nil: not a listed category, so
    /// counted for nobody), indexed by tag.
    func categoryBitsByTag() -> [Int?] {
        var bits = store.categoryTags.names.map { settings.categoryIndex($0) }
        if bits.count <= Int(CategoryTags.overflow) {
            bits.append(contentsOf: repeatElement(nil, count: Int(CategoryTags.overflow) + 1 - bits.count))
        }
        return bits
    }
}

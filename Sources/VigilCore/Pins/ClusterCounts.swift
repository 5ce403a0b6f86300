import VigilGeo

/// Live pin counts per geohash cell, at every cluster precision: what a zoomed-out map shows
/// instead of pins (docs/PROTOCOL.md, "Cluster subscriptions").
///
/// Kept by `PinStore` wherever its spatial index changes (insert, replace, remove, expiry,
/// restore, and so every revert), never recounted per event: a change costs one dictionary
/// update per precision. Each cell holds, per category tag (`CategoryTags`), the number of pins
/// and the sums of their coordinates in units of 1e-7° as integers. Integer sums add and subtract
/// exactly, so after any sequence of changes a tally equals a recount, bit for bit, and the mean
/// position computed from it is the recount's (a `Double` sum would drift).
///
/// Not persisted: a restored store counts once, when the hub is built over it.
public struct ClusterCounts: Sendable {
    /// One category's pins in one cell.
    public struct Tally: Equatable, Sendable {
        public var tag: UInt8
        public var count: UInt32
        /// Sums of the pins' latitudes and longitudes in 1e-7° (`fixed`).
        public var latSum: Int64
        public var lonSum: Int64
    }

    /// A change to the counts: the pin's full-precision cell and its category tag (what tells
    /// which cluster subscribers must hear of it).
    public struct Touch: Equatable, Sendable {
        public var cell: GeohashCell
        public var tag: UInt8
    }

    /// The precisions counted; nil counts nothing (a store being replayed, before its hub exists).
    public let precisions: ClosedRange<Int>?
    /// `levels[p - precisions.lowerBound]`: cell key → that cell's tallies, one per tag present,
    /// sorted by tag. A cell without pins has no entry.
    private var levels: [[UInt64: [Tally]]]
    /// Changes since the last `takeTouched`, kept only while `recording` (someone listens).
    private(set) var touched: [Touch] = []
    var recording = false {
        didSet { if !recording { touched = [] } }
    }

    public init(precisions: ClosedRange<Int>?) {
        if let precisions {
            precondition(precisions.lowerBound >= 1 && precisions.upperBound <= Geohash.maxPrecision, "cluster precisions outside 1...\(Geohash.maxPrecision)")
        }
        self.precisions = precisions
        self.levels = Array(repeating: [:], count: precisions?.count ?? 0)
    }

    /// A coordinate in the integer units the sums are kept in.
    @inline(__always)
    public static func fixed(_ degrees: Double) -> Int64 {
        Int64((degrees * 1e7).rounded())
    }

    mutating func add(_ cell: GeohashCell, _ point: GeoPoint, tag: UInt8) {
        adjust(cell, point, tag: tag, by: 1)
    }

    mutating func remove(_ cell: GeohashCell, _ point: GeoPoint, tag: UInt8) {
        adjust(cell, point, tag: tag, by: -1)
    }

    /// The tallies of `cell` (of a counted precision), sorted by tag; empty when it has no pins.
    public func tallies(_ cell: GeohashCell) -> [Tally] {
        guard let precisions, precisions.contains(cell.precision) else { return [] }
        return levels[cell.precision - precisions.lowerBound][cell.key] ?? []
    }

    /// Cells with pins at `precision` (for tests and diagnostics).
    public func cellCount(precision: Int) -> Int {
        guard let precisions, precisions.contains(precision) else { return 0 }
        return levels[precision - precisions.lowerBound].count
    }

    /// Every counted cell with its tallies, at every precision (for tests: the recount check).
    public var allCells: [(cell: UInt64, tallies: [Tally])] {
        levels.flatMap { level in level.map { (cell: $0.key, tallies: $0.value) } }
    }

    /// The changes recorded since the last call.
    mutating func takeTouched() -> [Touch] {
        defer { touched.removeAll(keepingCapacity: true) }
        return touched
    }

    private mutating func adjust(_ cell: GeohashCell, _ point: GeoPoint, tag: UInt8, by sign: Int64) {
        guard let precisions else { return }
        let lat = Self.fixed(point.lat) * sign, lon = Self.fixed(point.lon) * sign
        for precision in precisions {
            let key = cell.ancestor(precision: precision).key
            let level = precision - precisions.lowerBound
            // In place (the dictionary's modify accessor), no copy of the cell's array.
            let emptied = levels[level][key, default: []].adjust(tag: tag, count: sign, lat: lat, lon: lon)
            if emptied { levels[level].removeValue(forKey: key) }
        }
        if recording { touched.append(Touch(cell: cell, tag: tag)) }
    }
}

private extension Array where Element == ClusterCounts.Tally {
    /// Adds `count` pins with these coordinate sums to tag `tag`'s tally (a negative count removes
    /// them); true when the cell has no pins left.
    mutating func adjust(tag: UInt8, count: Int64, lat: Int64, lon: Int64) -> Bool {
        var i = 0
        while i < self.count && self[i].tag < tag { i += 1 }
        if i < self.count && self[i].tag == tag {
            let left = Int64(self[i].count) + count
            precondition(left >= 0, "cluster count below zero")
            if left == 0 {
                remove(at: i)
            } else {
                self[i].count = UInt32(left)
                self[i].latSum += lat
                self[i].lonSum += lon
            }
        } else {
            precondition(count > 0, "removing a pin that was never counted")
            insert(ClusterCounts.Tally(tag: tag, count: UInt32(count), latSum: lat, lonSum: lon), at: i)
        }
        return isEmpty
    }
}

extension Pin {
    /// Whether the pin is in the cluster counts: a pin with a reach (`range_m`) is not. Its author
    /// chose who may see it (viewers within its range), and a cluster subscription has no viewer:
    /// a count, and above all a cell's mean position, would tell anyone where it is.
    var countsInClusters: Bool { rangeMeters == nil }
}

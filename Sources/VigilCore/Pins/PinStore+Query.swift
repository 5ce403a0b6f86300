import HeapModule
import VigilGeo

/// The subscribe query: the newest pins of an area, taken by merging the recency-ordered cells
/// that cover it instead of collecting every pin inside and sorting them.
///
/// A heap holds one cursor per non-empty cell, at that cell's newest live entry; each step takes
/// the newest of all (the heap's top), checks it exactly against the area and categories and moves
/// that cell's cursor one entry older. So pins are visited newest first across the whole cover,
/// and the walk stops as soon as it has `limit` matches and knows whether one more exists:
/// O(visited · log cells + cells) for a query that visits `visited` pins, instead of O(pins in
/// the cover · log) for all of them. A world-sized area whose first 10,001 pins all match visits
/// 10,001 pins, not every pin in the store.
///
/// The worst case is bounded too: a category filter or a circle that rejects most candidates
/// would otherwise walk the whole cover, so the walk stops after a scan budget (`scanBudget`,
/// a few times `limit`) and reports `truncated`. What it returns is always the newest matches in
/// order, a prefix of the complete answer; when the walk ends within the budget it is exactly the
/// answer the full scan-and-sort gave.
///
/// Measured (release build, 2 vCPUs, pins spread over the world, reply limit 10,000): a world-sized
/// subscribe over 100,000 pins 69–75 ms → 3.1–4.0 ms, over 1,000,000 pins 1,183 ms → 3.5–4.8 ms;
/// with a category filter matching a fifth, 35–47 ms → 7–8 ms (stopped by the budget at 7,928 pins).
extension PinStore {
    /// What one query did, beyond its reply: for tests and diagnostics.
    struct QueryReport {
        var pins: [Pin]
        var truncated: Bool
        /// Live entries looked at (each a pin lookup and an exact test).
        var visited: Int
        /// Dead entries stepped over (a compare each).
        var skipped: Int
        /// Whether the walk stopped at its budget rather than at an answer.
        var stoppedByBudget: Bool
    }

    /// A cursor into one cell's entries: that cell's newest live entry not yet visited.
    private struct Cursor: Comparable {
        let createdAt: Int64
        let sequence: UInt64
        let cell: Int32
        let position: Int32

        static func < (a: Cursor, b: Cursor) -> Bool { (a.createdAt, a.sequence) < (b.createdAt, b.sequence) }
        static func == (a: Cursor, b: Cursor) -> Bool { a.createdAt == b.createdAt && a.sequence == b.sequence }
    }

    /// Live entries a query may visit for a reply of `limit`: `subscribeScanFactor` times the
    /// limit, and never fewer than 4,096 so a small limit with a selective filter still finds some.
    static func scanBudget(limit: Int, settings: PinSettings) -> Int {
        max(limit, 4_096 / max(1, settings.subscribeScanFactor)) * max(1, settings.subscribeScanFactor)
    }

    /// Every pin exactly inside `area` whose category bit is in `categories`, newest first,
    /// at most `limit`, and whether the reply was cut: more matched, or the scan budget ran out
    /// before the walk could tell (see the extension's comment). `cells` is the area's cover at
    /// `precision`. A pin with a range is a match only when it reaches `viewer` (`PinReach`).
    public func pins(in area: GeoArea, cells: [GeohashCell], precision: Int, categories: UInt64,
                     settings: PinSettings, limit: Int, viewer: GeoPoint? = nil) -> (pins: [Pin], truncated: Bool) {
        let report = query(area: area, cells: cells, precision: precision, categories: categories, settings: settings,
                           limit: limit, budget: Self.scanBudget(limit: limit, settings: settings), viewer: viewer)
        return (report.pins, report.truncated)
    }

    func query(area: GeoArea, cells: [GeohashCell], precision: Int, categories: UInt64, settings: PinSettings,
               limit: Int, budget: Int, viewer: GeoPoint? = nil) -> QueryReport {
        var lists: [CellRecency] = []
        for key in Self.indexKeys(covering: area, cells: cells, precision: precision) {
            if let list = spatial[key] { lists.append(list) }     // a reference to its storage, not a copy
        }
        var skipped = 0
        var heap = Heap<Cursor>()
        heap.reserveCapacity(lists.count)
        for (cell, list) in lists.enumerated() {
            if let at = list.newestLive(before: list.entries.count, skipped: &skipped) {
                heap.insert(Self.cursor(list, Int32(cell), at))
            }
        }
        let wanted = categoryTags.wanted(categories, settings: settings)
        var found: [Pin] = []
        found.reserveCapacity(min(limit, 1 << 14))
        var visited = 0
        // Dead entries cost a compare each, not a lookup: they may take 8 times the budget. (A
        // cell compacts once its dead outnumber its live, so they rarely come near.)
        let skipBudget = budget > Int.max / 8 ? Int.max : budget * 8
        var more = false
        var stoppedByBudget = false
        while let top = heap.max {
            if visited >= budget || skipped >= skipBudget {
                stoppedByBudget = true
                break
            }
            visited += 1
            let list = lists[Int(top.cell)]
            let entry = list.entries[Int(top.position)]
            let tagWanted = Int(entry.tag) < wanted.count ? wanted[Int(entry.tag)] : nil
            if tagWanted != false, let pin = pins[entry.id], area.contains(pin.point),
               tagWanted == true || Self.wants(pin, categories, settings),
               PinReach.shows(pin.point, rangeMeters: pin.rangeMeters, to: viewer) {
                if found.count == limit {
                    more = true
                    break
                }
                found.append(pin)
            }
            if let next = list.newestLive(before: Int(top.position), skipped: &skipped) {
                _ = heap.replaceMax(with: Self.cursor(list, top.cell, next))
            } else {
                _ = heap.removeMax()
            }
        }
        return QueryReport(pins: found, truncated: more || stoppedByBudget, visited: visited, skipped: skipped,
                           stoppedByBudget: stoppedByBudget)
    }

    /// The category test by name, for a pin whose category has the overflow tag.
    private static func wants(_ pin: Pin, _ categories: UInt64, _ settings: PinSettings) -> Bool {
        guard let bit = settings.categoryIndex(pin.category) else { return false }
        return categories & (1 << UInt64(bit)) != 0
    }

    private static func cursor(_ list: CellRecency, _ cell: Int32, _ position: Int) -> Cursor {
        let entry = list.entries[position]
        return Cursor(createdAt: entry.createdAt, sequence: entry.sequence, cell: cell, position: Int32(position))
    }

    /// The index cells that can hold a pin of `area`, each once: the area's cover at the index
    /// level at or just finer than the cover's precision, so that a coarse cover cell does not
    /// bring in the pins of all 32 index cells inside it, only of those the area reaches (a
    /// world-sized area is the 1,024 cells of level 2; Europe's box about 200 fewer than its
    /// precision-1 cover would give). `cells` (the cover at `precision`) is the fallback should
    /// that cover be larger than 32 index cells per cover cell, which a bounding-box cover never is.
    static func indexKeys(covering area: GeoArea, cells: [GeohashCell], precision: Int) -> [UInt64] {
        let level = indexLevels.first(where: { $0 >= precision }) ?? indexLevels[indexLevels.count - 1]
        if level == precision { return cells.map(\.key) }
        if let fine = GeohashCover.cells(covering: area, precision: level, limit: max(1, cells.count) << 5) {
            return fine.map(\.key)
        }
        var keys: [UInt64] = []
        var seen = Set<UInt64>()
        for cell in cells {
            if precision >= level {
                let key = cell.ancestor(precision: level).key
                if seen.insert(key).inserted { keys.append(key) }
            } else {
                let shift = 5 * (level - precision)
                for k in 0..<(UInt64(1) << UInt64(shift)) {
                    keys.append(GeohashCell(bits: cell.bits << UInt64(shift) | k, precision: level).key)
                }
            }
        }
        return keys
    }
}

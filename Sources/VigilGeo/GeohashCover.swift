/// Covers an area with geohash cells of one precision, for subscribing a viewport to the
/// per-cell channels that pin events are published on.
///
/// Contract: for every point `p` with `area.contains(p)` and every precision `q`,
/// `Geohash.cell(p, precision: q)` is in the cover of `area` at `q`. The cover is built from
/// `area.boundingBox`, so it over-covers (circles, cells straddling the box edge); the exact
/// filter is `GeoArea.contains`. Invalid areas (`!area.isValid`) get an empty cover.
public enum GeohashCover {
    /// Every cell of `precision` that holds a point of `area`'s bounding box (both parts when
    /// it crosses the antimeridian), or nil when there would be more than `limit`. The size is
    /// decided from the grid-index ranges before anything is allocated, so `limit` is also the
    /// caller's bound on memory (a cell is 8 bytes).
    public static func cells(covering area: GeoArea, precision: Int, limit: Int) -> [GeohashCell]? {
        let ranges = self.ranges(area, precision: precision)
        guard ranges.count <= limit else { return nil }
        return ranges.cells()
    }

    /// The number of cells `cells(covering:precision:limit:)` would return, in O(1).
    public static func count(covering area: GeoArea, precision: Int) -> Int {
        ranges(area, precision: precision).count
    }

    /// The finest precision in `minPrecision...maxPrecision` whose cover has at most `budget`
    /// cells, with those cells. When even `minPrecision` exceeds the budget its cover is
    /// returned anyway, so callers must pick `minPrecision` and `budget` so that this is bounded
    /// (precision 1 covers the whole world with 32 cells, so `minPrecision` 1 and `budget` >= 32
    /// always fit). An invalid area yields `(maxPrecision, [])`.
    ///
    /// Cover sizes never shrink as precision grows (each cell's index is a prefix of its
    /// children's), so searching from the finest precision down finds the finest that fits.
    public static func choose(covering area: GeoArea, budget: Int, minPrecision: Int, maxPrecision: Int) -> (precision: Int, cells: [GeohashCell]) {
        precondition(minPrecision >= 1 && minPrecision <= maxPrecision && maxPrecision <= Geohash.maxPrecision, "cover precisions \(minPrecision)...\(maxPrecision) outside 1...\(Geohash.maxPrecision)")
        for precision in stride(from: maxPrecision, to: minPrecision, by: -1) {
            let ranges = self.ranges(area, precision: precision)
            if ranges.count <= budget {
                return (precision, ranges.cells())
            }
        }
        return (minPrecision, ranges(area, precision: minPrecision).cells())
    }

    private static func ranges(_ area: GeoArea, precision: Int) -> GeohashCoverRanges {
        let grid = GeohashGrid(precision: precision)
        return GeohashCoverRanges(box: area.isValid ? area.boundingBox : nil, grid: grid)
    }
}

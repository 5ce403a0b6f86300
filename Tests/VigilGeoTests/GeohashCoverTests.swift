import Testing
import VigilGeo
import VigilTestSupport

/// Covers never miss a point of their area, count what they return, respect the budget, and
/// match a brute-force oracle on the small grids.
struct GeohashCoverTests {
    @Test func wholeWorldAtPrecisionOneIs32Cells() throws {
        let cells = try #require(GeohashCover.cells(covering: .box(.world), precision: 1, limit: 32))
        #expect(cells.count == 32)
        #expect(Set(cells.map(\.string)) == Set("0123456789bcdefghjkmnpqrstuvwxyz".map(String.init)))
        #expect(GeohashCover.cells(covering: .box(.world), precision: 1, limit: 31) == nil)
        #expect(GeohashCover.count(covering: .box(.world), precision: 2) == 1024)
    }

    @Test func limitIsDecidedWithoutEnumerating() {
        // 2^60 cells: any attempt to enumerate would never finish.
        #expect(GeohashCover.count(covering: .box(.world), precision: 12) == 1 << 60)
        #expect(GeohashCover.cells(covering: .box(.world), precision: 12, limit: 1_000_000) == nil)
    }

    @Test func crossingPartsSharingAColumnAreNotDuplicated() throws {
        // At precision 1, lon 5 and lon 10 are both in column 4: the parts meet and overlap.
        let cells = try #require(GeohashCover.cells(covering: .box(GeoBox(south: -90, west: 10, north: 90, east: 5)), precision: 1, limit: 100))
        #expect(cells.count == 32)
        #expect(Set(cells).count == 32)
    }

    @Test func antimeridianEdgeAddsTheOtherEndColumn() throws {
        // A box ending at east 180 also holds points spelled lon -180, which live in column 0.
        let box = GeoBox(south: 1, west: 170, north: 2, east: 180)
        let cells = try #require(GeohashCover.cells(covering: .box(box), precision: 1, limit: 100))
        #expect(Set(cells.map(\.string)) == ["x", "8"])
        let mirrored = GeoBox(south: 1, west: -180, north: 2, east: -170)
        #expect(Set(try #require(GeohashCover.cells(covering: .box(mirrored), precision: 1, limit: 100)).map(\.string)) == ["8", "x"])
        // Zero width on the antimeridian, within one row (rows are 1.40625 degrees at precision 3).
        let meridian = GeoBox(south: 1.5, west: 180, north: 2.5, east: 180)
        #expect(GeohashCover.count(covering: .box(meridian), precision: 3) == 2)
    }

    @Test func crossingBoxCoversBothSides() throws {
        let area = GeoArea.box(GeoBox(south: -1, west: 179, north: 1, east: -179))
        let result = GeohashCover.choose(covering: area, budget: 64, minPrecision: 1, maxPrecision: 12)
        let cells = Set(result.cells)
        #expect(cells.contains(Geohash.cell(GeoPoint(lat: 0, lon: 179.5), precision: result.precision)))
        #expect(cells.contains(Geohash.cell(GeoPoint(lat: 0, lon: -179.5), precision: result.precision)))
        #expect(!cells.contains(Geohash.cell(GeoPoint(lat: 0, lon: 0), precision: result.precision)))
    }

    @Test func viewportSizesPickSensiblePrecisions() {
        // ~500 m street viewport in Paris, a country, the world.
        let street = GeoArea.box(GeoBox(south: 48.856, west: 2.350, north: 48.8605, east: 2.357))
        let country = GeoArea.box(GeoBox(south: 42.3, west: -4.8, north: 51.1, east: 8.2))
        let streetChoice = GeohashCover.choose(covering: street, budget: 64, minPrecision: 1, maxPrecision: 12)
        let countryChoice = GeohashCover.choose(covering: country, budget: 64, minPrecision: 1, maxPrecision: 12)
        let worldChoice = GeohashCover.choose(covering: .box(.world), budget: 64, minPrecision: 1, maxPrecision: 12)
        #expect(streetChoice.precision >= 6)
        #expect(countryChoice.precision >= 2 && countryChoice.precision <= 4)
        #expect(worldChoice.precision == 1 && worldChoice.cells.count == 32)
        // Over budget at minPrecision: its cover is returned anyway.
        let forced = GeohashCover.choose(covering: .box(.world), budget: 10, minPrecision: 2, maxPrecision: 5)
        #expect(forced.precision == 2 && forced.cells.count == 1024)
    }

    @Test func invalidAreasCoverNothing() {
        let bad = GeoArea.box(GeoBox(south: 10, west: 0, north: 5, east: 1))
        #expect(GeohashCover.cells(covering: bad, precision: 3, limit: 10) == [])
        #expect(GeohashCover.count(covering: bad, precision: 3) == 0)
        #expect(GeohashCover.choose(covering: bad, budget: 10, minPrecision: 1, maxPrecision: 12).cells.isEmpty)
        let nanCircle = GeoArea.circle(center: GeoPoint(lat: .nan, lon: 0), radiusMeters: 10)
        #expect(GeohashCover.cells(covering: nanCircle, precision: 5, limit: 10) == [])
    }

    /// For each random area: pick a precision under a random budget, then check the budget, that
    /// the next finer precision would not fit, that the count is exact and duplicate-free, and
    /// that every sampled point inside the area has its cell in the cover.
    func checkCover(_ area: GeoArea, points: [GeoPoint], budget: Int) {
        let (precision, cells) = GeohashCover.choose(covering: area, budget: budget, minPrecision: 1, maxPrecision: 12)
        let count = GeohashCover.count(covering: area, precision: precision)
        #expect(cells.count == count)
        #expect(cells.allSatisfy { $0.precision == precision })
        if precision > 1 { #expect(count <= budget) }
        if precision < 12 { #expect(GeohashCover.count(covering: area, precision: precision + 1) > budget) }
        // Monotone in precision, which is what makes the top-down search correct.
        if precision > 1 { #expect(GeohashCover.count(covering: area, precision: precision - 1) <= count) }
        let set = Set(cells)
        #expect(set.count == cells.count)
        #expect(points.allSatisfy(area.contains), "sampler produced a point outside \(area)")
        let missed = points.filter { !set.contains(Geohash.cell($0, precision: precision)) }
        #expect(missed.isEmpty, "\(area) at \(precision) misses \(missed)")
        // A coarser and a finer precision must not miss either (checked without enumerating huge covers).
        for other in [1, Swift.min(12, precision + 1)] {
            guard let otherCells = GeohashCover.cells(covering: area, precision: other, limit: 4 * budget + 32) else { continue }
            let otherSet = Set(otherCells)
            let missed = points.filter { !otherSet.contains(Geohash.cell($0, precision: other)) }
            #expect(missed.isEmpty, "\(area) at \(other) misses \(missed)")
        }
    }

    @Test func randomBoxesNeverMissAPoint() {
        var rng = SplitMix64(state: 8)
        for _ in 0..<2_000 {
            let box = GeoSampling.randomBox(using: &rng)
            let points = GeoSampling.points(in: box, count: 4, using: &rng)
            checkCover(.box(box), points: points, budget: Int.random(in: 4...96, using: &rng))
        }
    }

    @Test func randomCirclesNeverMissAPoint() {
        var rng = SplitMix64(state: 9)
        for _ in 0..<1_500 {
            let (center, radius) = GeoSampling.randomCircle(using: &rng)
            let area = GeoArea.circle(center: center, radiusMeters: radius)
            let points = GeoSampling.points(in: area, center: center, radius: radius, count: 8, using: &rng)
            checkCover(area, points: points, budget: Int.random(in: 4...96, using: &rng))
        }
    }

    /// Oracle for small grids: a cell is in the cover iff some point of the box is assigned to
    /// it, worked out from cell edges (half-open, the last column/row closed) rather than from
    /// grid indices, with lon ±180 treated as one meridian.
    func oracle(_ box: GeoBox, precision: Int) -> Set<GeohashCell> {
        var result = Set<GeohashCell>()
        let all = (0..<(UInt64(1) << UInt64(5 * precision))).map { GeohashCell(bits: $0, precision: precision) }
        for cell in all {
            let c = cell.box
            let latHit = box.south < c.north && box.north >= c.south || (c.north == 90 && box.north == 90)
            guard latHit else { continue }
            var lonHit = false
            for part in box.parts {
                var intervals = [(part.west, part.east)]
                if part.west == -180 { intervals.append((180, 180)) }
                if part.east == 180 { intervals.append((-180, -180)) }
                for (w, e) in intervals where w < c.east && e >= c.west || (c.east == 180 && e == 180) {
                    lonHit = true
                }
            }
            if lonHit { result.insert(cell) }
        }
        return result
    }

    @Test func matchesBruteForceOnSmallGrids() {
        var rng = SplitMix64(state: 10)
        for _ in 0..<300 {
            let box = GeoSampling.randomBox(using: &rng)
            for precision in 1...2 {
                let cells = GeohashCover.cells(covering: .box(box), precision: precision, limit: 1024) ?? []
                #expect(Set(cells) == oracle(box, precision: precision), "\(box) at \(precision)")
            }
        }
    }
}

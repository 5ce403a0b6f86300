import Testing
import VigilGeo
import VigilTestSupport

/// `GeoArea.surelyContains`: the fan-out skips the per-pin area test for a channel whose cell it
/// says yes to, so a yes must hold for every point of the cell, edges, corners and both spellings
/// of lon ±180 included. A no is always allowed; the last test checks that it is not the answer
/// everywhere.
@Suite struct GeoAreaCellsTests {
    /// Random areas of every awkward kind, their cover cells and those cells' neighbours (cells
    /// along and just outside the rim); every cell said to be inside is sampled densely.
    @Test func aCellSaidToBeInsideIsInsideAtEveryPoint() {
        var rng = SplitMix64(state: 1313)
        var said = 0, checkedPoints = 0
        for _ in 0..<3_000 {
            let area: GeoArea
            if Bool.random(using: &rng) {
                area = .box(GeoSampling.randomBox(using: &rng))
            } else {
                let (center, radius) = GeoSampling.randomCircle(using: &rng)
                area = .circle(center: center, radiusMeters: radius)
            }
            let (_, cover) = GeohashCover.choose(covering: area, budget: Int.random(in: 4...64, using: &rng), minPrecision: 1,
                                                 maxPrecision: Int.random(in: 2...9, using: &rng))
            var cells = cover
            for cell in cover.prefix(8) {
                cells += GeohashCell.Direction.allCases.compactMap { cell.neighbor($0) }
            }
            for cell in cells where area.surelyContains(cell.box) {
                said += 1
                for p in GeoSampling.points(in: cell.box, count: 6, using: &rng) {
                    checkedPoints += 1
                    if !area.contains(p) {
                        Issue.record("\(area) said to hold \(cell) but not \(p)")
                        return
                    }
                }
            }
        }
        #expect(said > 5_000 && checkedPoints > 100_000, "the property was exercised: \(said) cells, \(checkedPoints) points")
    }

    /// Circles whose rim runs right through a cell's farthest corner: the slack keeps such cells
    /// out, whatever rounding does at the corner.
    @Test func aCircleThroughTheFarthestCornerDoesNotHoldTheCell() {
        var rng = SplitMix64(state: 2626)
        for _ in 0..<2_000 {
            let center = GeoPoint(lat: Double.random(in: -90...90, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            let cell = Geohash.cell(GeoSampling.destination(from: center, bearing: Double.random(in: 0..<6.28, using: &rng),
                                                             meters: Double.random(in: 0...2_000_000, using: &rng)),
                                    precision: Int.random(in: 3...8, using: &rng))
            let box = cell.box
            let farthest = [GeoPoint(lat: box.south, lon: box.west), GeoPoint(lat: box.south, lon: box.east),
                            GeoPoint(lat: box.north, lon: box.west), GeoPoint(lat: box.north, lon: box.east)]
                .map { GeoDistance.meters(center, $0) }.max()!
            #expect(!GeoArea.circle(center: center, radiusMeters: farthest).surelyContains(box))
            #expect(!GeoArea.circle(center: center, radiusMeters: farthest + 9).surelyContains(box))
            if abs(box.west - center.lon) < 80 && abs(box.east - center.lon) < 80 {
                #expect(GeoArea.circle(center: center, radiusMeters: farthest + 11).surelyContains(box))
            }
        }
    }

    @Test func boxesHoldCellsExactlyToTheirEdges() {
        let cell = GeohashCell("u33d")!.box
        #expect(GeoArea.box(cell).surelyContains(cell), "a box equal to the cell holds it: edges are inclusive")
        var shrunk = cell
        shrunk.north = shrunk.north.nextDown
        #expect(!GeoArea.box(shrunk).surelyContains(cell))
        shrunk = cell
        shrunk.west = shrunk.west.nextUp
        #expect(!GeoArea.box(shrunk).surelyContains(cell))
        // A box crossing the antimeridian holds cells on both of its sides, and not those between.
        let crossing = GeoArea.box(GeoBox(south: -10, west: 170, north: 10, east: -170))
        #expect(crossing.surelyContains(Geohash.cell(GeoPoint(lat: 1, lon: 179.9), precision: 4).box))
        #expect(crossing.surelyContains(Geohash.cell(GeoPoint(lat: 1, lon: -179.9), precision: 4).box))
        #expect(crossing.surelyContains(Geohash.cell(GeoPoint(lat: 1, lon: 180), precision: 4).box))
        #expect(!crossing.surelyContains(Geohash.cell(GeoPoint(lat: 1, lon: 0), precision: 4).box))
        #expect(!crossing.surelyContains(Geohash.cell(GeoPoint(lat: 9.99, lon: 179.9), precision: 3).box), "pokes out north")
        #expect(GeoArea.box(.world).surelyContains(Geohash.cell(GeoPoint(lat: 90, lon: 180), precision: 1).box))
    }

    /// The cases the check has to be right about, with their expected answers.
    @Test func circlesAtThePolesAndFarAway() {
        // Centred on a pole: cells at every longitude near it are inside.
        let polar = GeoArea.circle(center: GeoPoint(lat: 90, lon: 0), radiusMeters: 500_000)
        for lon in stride(from: -180.0, through: 180, by: 15) {
            #expect(polar.surelyContains(Geohash.cell(GeoPoint(lat: 89, lon: lon), precision: 4).box), "lon \(lon)")
        }
        #expect(!polar.surelyContains(Geohash.cell(GeoPoint(lat: 85, lon: 0), precision: 2).box))
        // A cell more than 90° of longitude from the centre is never claimed, even when inside.
        let huge = GeoArea.circle(center: GeoPoint(lat: 60, lon: 0), radiusMeters: 15_000_000)
        let far = Geohash.cell(GeoPoint(lat: 70, lon: 150), precision: 5).box
        #expect(!huge.surelyContains(far))
        var rng = SplitMix64(state: 5)
        #expect(GeoSampling.points(in: far, count: 10, using: &rng).allSatisfy { huge.contains($0) }, "it is inside, though")
        #expect(huge.surelyContains(Geohash.cell(GeoPoint(lat: 50, lon: 40), precision: 5).box))
        // Invalid input answers no.
        #expect(!GeoArea.circle(center: GeoPoint(lat: .nan, lon: 0), radiusMeters: 1e6).surelyContains(Geohash.cell(GeoPoint(lat: 0, lon: 0), precision: 5).box))
        #expect(!GeoArea.circle(center: GeoPoint(lat: 0, lon: 0), radiusMeters: .infinity).surelyContains(Geohash.cell(GeoPoint(lat: 0, lon: 0), precision: 5).box))
    }
}

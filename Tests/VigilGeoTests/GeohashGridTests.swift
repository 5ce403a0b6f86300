import Testing
@testable import VigilGeo
import VigilTestSupport

/// Grid geometry and bit interleaving, the single source of truth for points, cells and covers.
struct GeohashGridTests {
    @Test func bitSplitPerPrecision() {
        for precision in 1...Geohash.maxPrecision {
            let grid = GeohashGrid(precision: precision)
            #expect(grid.lonBits + grid.latBits == 5 * precision)
            #expect(grid.lonBits - grid.latBits == precision % 2)
        }
        #expect(GeohashGrid(precision: 1).columnCount == 8)
        #expect(GeohashGrid(precision: 1).rowCount == 4)
    }

    @Test func spreadAndCompactAreInverse() {
        var rng = SplitMix64(state: 1)
        #expect(GeohashGrid.spread(0xFFFF_FFFF) == 0x5555_5555_5555_5555)
        #expect(GeohashGrid.spread(0b1011) == 0b100_0101)
        for _ in 0..<1_000 {
            let v = rng.next() & 0xFFFF_FFFF
            #expect(GeohashGrid.compact(GeohashGrid.spread(v)) == v)
            #expect(GeohashGrid.spread(v) & 0xAAAA_AAAA_AAAA_AAAA == 0)
        }
    }

    @Test func bitsAndCellAreInverse() {
        var rng = SplitMix64(state: 2)
        for precision in 1...Geohash.maxPrecision {
            let grid = GeohashGrid(precision: precision)
            for _ in 0..<200 {
                let ix = Int.random(in: 0..<grid.columnCount, using: &rng)
                let iy = Int.random(in: 0..<grid.rowCount, using: &rng)
                let bits = grid.bits(column: ix, row: iy)
                #expect(bits >> UInt64(5 * precision) == 0)
                #expect(grid.cell(bits: bits) == (ix, iy))
            }
        }
    }

    @Test func firstBitIsTheTopLongitudeBit() {
        for precision in 1...Geohash.maxPrecision {
            let grid = GeohashGrid(precision: precision)
            let top = UInt64(1) << UInt64(5 * precision - 1)
            #expect(grid.bits(column: grid.columnCount / 2, row: 0) == top)
            #expect(grid.bits(column: 0, row: grid.rowCount / 2) == top >> 1)
        }
    }

    @Test func stripsAreExactAtEveryEdge() {
        var rng = SplitMix64(state: 3)
        for precision in 1...Geohash.maxPrecision {
            let grid = GeohashGrid(precision: precision)
            #expect(grid.westEdge(0) == -180 && grid.westEdge(grid.columnCount) == 180)
            #expect(grid.southEdge(0) == -90 && grid.southEdge(grid.rowCount) == 90)
            for _ in 0..<300 {
                let ix = Int.random(in: 0..<grid.columnCount, using: &rng)
                let edge = grid.westEdge(ix)
                #expect(grid.column(edge) == ix)
                #expect(grid.column(grid.westEdge(ix + 1).nextDown) == ix)
                if ix > 0 { #expect(grid.column(edge.nextDown) == ix - 1) }
                let iy = Int.random(in: 0..<grid.rowCount, using: &rng)
                #expect(grid.row(grid.southEdge(iy)) == iy)
                #expect(grid.row(grid.southEdge(iy + 1).nextDown) == iy)
                if iy > 0 { #expect(grid.row(grid.southEdge(iy).nextDown) == iy - 1) }
            }
        }
    }

    @Test func valuesJustBelowAnEdgeStayBelowIt() {
        // -1e-16 + 180 rounds to exactly 180, so a plain floor((lon + 180) / w) puts this in the
        // east half; the correction step must bring it back west of lon 0.
        let grid = GeohashGrid(precision: 12)
        #expect(grid.column(-1e-16) == grid.columnCount / 2 - 1)
        #expect(grid.column(0) == grid.columnCount / 2)
        #expect(grid.row(-1e-17) == grid.rowCount / 2 - 1)
        #expect(GeohashGrid(precision: 1).column(-1e-300) == 3)
    }

    @Test func outOfRangeClampsAndNaNIsSafe() {
        let grid = GeohashGrid(precision: 4)
        #expect(grid.column(180) == grid.columnCount - 1)
        #expect(grid.column(500) == grid.columnCount - 1)
        #expect(grid.column(-180) == 0)
        #expect(grid.column(-500) == 0)
        #expect(grid.column(.nan) == 0)
        #expect(grid.row(90) == grid.rowCount - 1)
        #expect(grid.row(-.infinity) == 0)
        #expect(grid.row(.nan) == 0)
    }
}

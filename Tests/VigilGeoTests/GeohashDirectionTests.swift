import Testing
import VigilGeo
import VigilTestSupport

/// Neighbours: the first-level layout, antimeridian wrap-around, poles, and edge sharing.
struct GeohashDirectionTests {
    // Precision 1 laid out north to south, west to east (columns are longitude).
    static let layout = [
        "bcfguvyz",
        "89destwx",
        "2367kmqr",
        "0145hjnp",
    ].map { Array($0) }

    func neighbor(_ hash: String, _ direction: GeohashCell.Direction) -> String? {
        GeohashCell(hash)!.neighbor(direction)?.string
    }

    @Test func firstLevelLayoutMatchesTheCells() throws {
        for (r, row) in Self.layout.enumerated() {
            for (c, symbol) in row.enumerated() {
                let box = try #require(GeohashCell(String(symbol))).box
                #expect(box.west == -180 + Double(c) * 45)
                #expect(box.north == 90 - Double(r) * 45)
            }
        }
    }

    @Test func firstLevelNeighbours() {
        #expect(neighbor("g", .e) == "u")
        #expect(neighbor("s", .n) == "u")
        #expect(neighbor("s", .sw) == "7")
        #expect(neighbor("s", .ne) == "v")
        #expect(neighbor("k", .s) == "h")
        #expect(neighbor("k", .w) == "7")
        #expect(neighbor("k", .nw) == "e")
        #expect(neighbor("k", .se) == "j")
    }

    @Test func eastAndWestWrapAroundTheAntimeridian() {
        #expect(neighbor("z", .e) == "b")
        #expect(neighbor("b", .w) == "z")
        #expect(neighbor("0", .w) == "p")
        #expect(neighbor("p", .e) == "0")
        #expect(neighbor("x", .ne) == "b")
        #expect(neighbor("8", .sw) == "r")
        let east = Geohash.cell(GeoPoint(lat: 10, lon: 179.99), precision: 6)
        let west = Geohash.cell(GeoPoint(lat: 10, lon: -179.99), precision: 6)
        #expect(east.neighbor(.e) == west)
        #expect(west.neighbor(.w) == east)
        #expect(east.box.east == 180 && west.box.west == -180)
    }

    @Test func nothingBeyondThePoles() {
        for direction in [GeohashCell.Direction.n, .ne, .nw] {
            #expect(neighbor("z", direction) == nil)
            #expect(Geohash.cell(GeoPoint(lat: 90, lon: 3), precision: 9).neighbor(direction) == nil)
        }
        for direction in [GeohashCell.Direction.s, .se, .sw] {
            #expect(neighbor("0", direction) == nil)
            #expect(Geohash.cell(GeoPoint(lat: -90, lon: 3), precision: 7).neighbor(direction) == nil)
        }
        #expect(neighbor("z", .e) != nil && neighbor("z", .s) == "x")
    }

    @Test func neighboursShareAnEdgeOrCorner() {
        var rng = SplitMix64(state: 5)
        for _ in 0..<500 {
            let precision = Int.random(in: 1...Geohash.maxPrecision, using: &rng)
            let p = GeoPoint(lat: Double.random(in: -89...89, using: &rng), lon: Double.random(in: -179...179, using: &rng))
            let cell = Geohash.cell(p, precision: precision)
            let box = cell.box
            for direction in GeohashCell.Direction.allCases {
                guard let other = cell.neighbor(direction) else { continue }
                let o = other.box
                #expect(other.precision == precision && other != cell)
                switch direction {
                case .n, .ne, .nw: #expect(o.south == box.north)
                case .s, .se, .sw: #expect(o.north == box.south)
                case .e, .w: #expect(o.south == box.south)
                }
                switch direction {
                case .e, .ne, .se: #expect(o.west == box.east || (box.east == 180 && o.west == -180))
                case .w, .nw, .sw: #expect(o.east == box.west || (box.west == -180 && o.east == 180))
                case .n, .s: #expect(o.west == box.west)
                }
                // Stepping back returns home.
                let back: [GeohashCell.Direction: GeohashCell.Direction] = [.n: .s, .s: .n, .e: .w, .w: .e, .ne: .sw, .sw: .ne, .nw: .se, .se: .nw]
                #expect(other.neighbor(back[direction]!) == cell)
            }
        }
    }
}

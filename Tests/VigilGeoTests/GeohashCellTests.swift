import Testing
import VigilGeo
import VigilTestSupport

/// Cell parsing, spelling, bounds, ancestors and the packed key.
struct GeohashCellTests {
    @Test func parsesAndSpells() throws {
        let cell = try #require(GeohashCell("ezs42"))
        #expect(cell.precision == 5)
        #expect(cell.string == "ezs42")
        #expect(cell.description == "ezs42")
        // e=13 z=31 s=24 4=4 2=2
        #expect(cell.bits == (13 << 20) | (31 << 15) | (24 << 10) | (4 << 5) | 2)
        #expect(GeohashCell("EZS42") == cell)
        #expect(GeohashCell("EzS42")?.string == "ezs42")
    }

    @Test(arguments: ["", "a", "ezs4i", "ezs4l", "ezs4o", "u4pruydqqvj00", "ezs 42", "ézs42", "ezs42\u{0}"])
    func rejectsNonGeohashes(_ text: String) {
        #expect(GeohashCell(text) == nil)
    }

    @Test func twelveCharactersIsTheMaximum() throws {
        let cell = try #require(GeohashCell("zzzzzzzzzzzz"))
        #expect(cell.bits == (1 << 60) - 1)
        #expect(cell.precision == 12)
        #expect(cell.string == "zzzzzzzzzzzz")
        #expect(GeohashCell("zzzzzzzzzzzzz") == nil)
    }

    @Test func keyIsUniqueAcrossPrecisions() throws {
        let u = try #require(GeohashCell("u"))
        let u0 = try #require(GeohashCell("u0"))
        let zero = try #require(GeohashCell("0"))
        let zeroZero = try #require(GeohashCell("00"))
        #expect(u != u0 && zero != zeroZero)
        #expect(Set([u.key, u0.key, zero.key, zeroZero.key]).count == 4)
        #expect(u0.key == (u0.bits << 4) | 2)
        #expect(MemoryLayout<GeohashCell>.size <= 16)
    }

    @Test func stringRoundTripsForRandomBits() {
        var rng = SplitMix64(state: 4)
        for _ in 0..<2_000 {
            let precision = Int.random(in: 1...Geohash.maxPrecision, using: &rng)
            let bits = rng.next() >> UInt64(64 - 5 * precision)
            let cell = GeohashCell(bits: bits, precision: precision)
            #expect(GeohashCell(cell.string) == cell)
            #expect(cell.string.utf8.count == precision)
        }
    }

    @Test func boxOfEzs42() throws {
        // 25 bits: 13 of longitude (width 360/8192) and 12 of latitude (height 180/4096).
        let box = try #require(GeohashCell("ezs42")).box
        #expect(box.south == 42.5830078125)
        #expect(box.north == 42.626953125)
        #expect(box.west == -5.625)
        #expect(box.east == -5.5810546875)
    }

    @Test func firstLevelBoxes() throws {
        #expect(try #require(GeohashCell("0")).box == GeoBox(south: -90, west: -180, north: -45, east: -135))
        #expect(try #require(GeohashCell("s")).box == GeoBox(south: 0, west: 0, north: 45, east: 45))
        #expect(try #require(GeohashCell("z")).box == GeoBox(south: 45, west: 135, north: 90, east: 180))
    }

    @Test func ancestorsArePrefixesAndNest() throws {
        let cell = try #require(GeohashCell("u4pruydqqvj"))
        for precision in 1...cell.precision {
            let ancestor = cell.ancestor(precision: precision)
            #expect(ancestor.string == String("u4pruydqqvj".prefix(precision)))
            #expect(ancestor.contains(cell))
            let outer = ancestor.box
            let inner = cell.box
            #expect(outer.south <= inner.south && inner.north <= outer.north)
            #expect(outer.west <= inner.west && inner.east <= outer.east)
        }
        #expect(cell.ancestor(precision: 11) == cell)
        #expect(!cell.contains(cell.ancestor(precision: 3)))
        #expect(!(try #require(GeohashCell("u5"))).contains(cell))
    }

    @Test func centerIsTheMiddleOfTheBox() throws {
        let center = try #require(GeohashCell("ezs42")).center
        #expect(center == GeoPoint(lat: 42.60498046875, lon: -5.60302734375))
    }
}

import Testing
import VigilGeo

/// Box containment (inclusive, antimeridian-crossing, the two spellings of lon 180), parts, validity.
struct GeoBoxTests {
    @Test func containsIsInclusiveOnEveryEdge() {
        let box = GeoBox(south: 10, west: 20, north: 30, east: 40)
        #expect(box.contains(GeoPoint(lat: 20, lon: 30)))
        #expect(box.contains(GeoPoint(lat: 10, lon: 20)))
        #expect(box.contains(GeoPoint(lat: 30, lon: 40)))
        #expect(box.contains(GeoPoint(lat: 10, lon: 40)))
        #expect(!box.contains(GeoPoint(lat: 9.999999, lon: 30)))
        #expect(!box.contains(GeoPoint(lat: 20, lon: 40.000001)))
        #expect(!box.contains(GeoPoint(lat: .nan, lon: 30)))
        #expect(!box.contains(GeoPoint(lat: 20, lon: .nan)))
        #expect(!box.crossesAntimeridian)
    }

    @Test func crossingBoxContainsBothSides() {
        let box = GeoBox(south: -10, west: 170, north: 10, east: -170)
        #expect(box.crossesAntimeridian)
        #expect(box.contains(GeoPoint(lat: 0, lon: 175)))
        #expect(box.contains(GeoPoint(lat: 0, lon: 180)))
        #expect(box.contains(GeoPoint(lat: 0, lon: -180)))
        #expect(box.contains(GeoPoint(lat: 0, lon: -175)))
        #expect(box.contains(GeoPoint(lat: 0, lon: 170)))
        #expect(box.contains(GeoPoint(lat: 0, lon: -170)))
        #expect(!box.contains(GeoPoint(lat: 0, lon: 0)))
        #expect(!box.contains(GeoPoint(lat: 0, lon: 169.9)))
        #expect(!box.contains(GeoPoint(lat: 0, lon: -169.9)))
    }

    @Test func antimeridianHasTwoSpellings() {
        let endsAt180 = GeoBox(south: 0, west: 170, north: 10, east: 180)
        #expect(endsAt180.contains(GeoPoint(lat: 5, lon: 180)))
        #expect(endsAt180.contains(GeoPoint(lat: 5, lon: -180)))
        let startsAtMinus180 = GeoBox(south: 0, west: -180, north: 10, east: -170)
        #expect(startsAtMinus180.contains(GeoPoint(lat: 5, lon: -180)))
        #expect(startsAtMinus180.contains(GeoPoint(lat: 5, lon: 180)))
        // Only the meridian itself is shared.
        #expect(!startsAtMinus180.contains(GeoPoint(lat: 5, lon: 179.999)))
    }

    @Test func zeroWidthBoxIsAMeridianSegmentNotTheWorld() {
        let box = GeoBox(south: 0, west: 12, north: 10, east: 12)
        #expect(!box.crossesAntimeridian)
        #expect(box.isValid)
        #expect(box.contains(GeoPoint(lat: 5, lon: 12)))
        #expect(!box.contains(GeoPoint(lat: 5, lon: 12.0000001)))
        #expect(!box.contains(GeoPoint(lat: 5, lon: -100)))
    }

    @Test func partsSplitAtTheAntimeridian() {
        let plain = GeoBox(south: 1, west: 2, north: 3, east: 4)
        #expect(plain.parts == [plain])
        let crossing = GeoBox(south: -5, west: 160, north: 5, east: -150)
        #expect(crossing.parts == [
            GeoBox(south: -5, west: 160, north: 5, east: 180),
            GeoBox(south: -5, west: -180, north: 5, east: -150),
        ])
        for part in crossing.parts {
            #expect(!part.crossesAntimeridian)
            #expect(part.isValid)
        }
    }

    @Test func world() {
        #expect(GeoBox.world == GeoBox(south: -90, west: -180, north: 90, east: 180))
        #expect(GeoBox.world.isValid)
        #expect(!GeoBox.world.crossesAntimeridian)
        for p in [GeoPoint(lat: 90, lon: 180), GeoPoint(lat: -90, lon: -180), GeoPoint(lat: 0, lon: 0)] {
            #expect(GeoBox.world.contains(p))
        }
    }

    @Test func validity() {
        #expect(GeoBox(south: -90, west: 170, north: 90, east: -170).isValid)
        #expect(!GeoBox(south: 10, west: 0, north: 5, east: 1).isValid)
        #expect(!GeoBox(south: -91, west: 0, north: 5, east: 1).isValid)
        #expect(!GeoBox(south: 0, west: 0, north: 90.5, east: 1).isValid)
        #expect(!GeoBox(south: 0, west: -180.5, north: 5, east: 1).isValid)
        #expect(!GeoBox(south: 0, west: 0, north: 5, east: 181).isValid)
        #expect(!GeoBox(south: .nan, west: 0, north: 5, east: 1).isValid)
        #expect(!GeoBox(south: 0, west: 0, north: 5, east: .infinity).isValid)
    }
}

import Testing
import VigilGeo

/// `GeoPoint.isValid` bounds.
struct GeoPointTests {
    @Test func validRangeIsInclusive() {
        #expect(GeoPoint(lat: 0, lon: 0).isValid)
        #expect(GeoPoint(lat: 90, lon: 180).isValid)
        #expect(GeoPoint(lat: -90, lon: -180).isValid)
    }

    @Test func outOfRangeOrNonFiniteIsInvalid() {
        #expect(!GeoPoint(lat: 90.000001, lon: 0).isValid)
        #expect(!GeoPoint(lat: -90.5, lon: 0).isValid)
        #expect(!GeoPoint(lat: 0, lon: 180.000001).isValid)
        #expect(!GeoPoint(lat: 0, lon: -181).isValid)
        #expect(!GeoPoint(lat: .nan, lon: 0).isValid)
        #expect(!GeoPoint(lat: 0, lon: .infinity).isValid)
    }

    @Test func hashableByValue() {
        let set: Set = [GeoPoint(lat: 1, lon: 2), GeoPoint(lat: 1, lon: 2), GeoPoint(lat: 2, lon: 1)]
        #expect(set.count == 2)
    }
}

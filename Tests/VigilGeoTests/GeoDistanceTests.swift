import Testing
import VigilGeo

/// Haversine distances against known figures and edge cases.
struct GeoDistanceTests {
    let r = GeoDistance.earthRadiusMeters

    @Test func parisToLondon() {
        let paris = GeoPoint(lat: 48.8566, lon: 2.3522)
        let london = GeoPoint(lat: 51.5074, lon: -0.1278)
        let d = GeoDistance.meters(paris, london)
        #expect(abs(d - 343_500) < 343_500 * 0.005)
        #expect(d == GeoDistance.meters(london, paris))
    }

    @Test func samePointIsZero() {
        let p = GeoPoint(lat: 12.34, lon: 56.78)
        #expect(GeoDistance.meters(p, p) == 0)
        // lon 180 and -180 are one meridian.
        #expect(GeoDistance.meters(GeoPoint(lat: 10, lon: 180), GeoPoint(lat: 10, lon: -180)) < 1e-6)
    }

    @Test func quarterMeridianAndAntipodes() {
        let quarter = GeoDistance.meters(GeoPoint(lat: 0, lon: 0), GeoPoint(lat: 90, lon: 0))
        #expect(abs(quarter - Double.pi / 2 * r) < 1e-6)
        let half = GeoDistance.meters(GeoPoint(lat: 0, lon: 0), GeoPoint(lat: 0, lon: 180))
        #expect(abs(half - Double.pi * r) < 1e-6)
        let poles = GeoDistance.meters(GeoPoint(lat: 90, lon: 0), GeoPoint(lat: -90, lon: 0))
        #expect(abs(poles - Double.pi * r) < 1e-6)
        #expect(!half.isNaN)
    }

    @Test func tinyDistancesKeepPrecision() {
        // 1e-9 degree of latitude is ~0.111 mm; acos-based formulas return 0 or garbage here.
        let d = GeoDistance.meters(GeoPoint(lat: 45, lon: 7), GeoPoint(lat: 45 + 1e-9, lon: 7))
        let expected = 1e-9 * Double.pi / 180 * r
        #expect(abs(d - expected) < expected * 1e-5)
    }

    @Test func oneDegreeOfEquatorialLongitude() {
        let d = GeoDistance.meters(GeoPoint(lat: 0, lon: 179.5), GeoPoint(lat: 0, lon: -179.5))
        #expect(abs(d - Double.pi / 180 * r) < 1e-6)
    }
}

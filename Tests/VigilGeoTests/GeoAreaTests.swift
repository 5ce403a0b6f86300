#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
import VigilGeo
import VigilTestSupport

/// Area membership and the circle's bounding box (which the cover relies on never to be too small).
struct GeoAreaTests {
    let earth = GeoDistance.earthRadiusMeters

    @Test func boxAreaDelegatesToTheBox() {
        let box = GeoBox(south: -10, west: 170, north: 10, east: -170)
        let area = GeoArea.box(box)
        #expect(area.boundingBox == box)
        #expect(area.contains(GeoPoint(lat: 0, lon: 180)))
        #expect(!area.contains(GeoPoint(lat: 0, lon: 0)))
        #expect(area.isValid)
        #expect(!GeoArea.box(GeoBox(south: 5, west: 0, north: 4, east: 1)).isValid)
    }

    @Test func circleContainsIsTheHaversineTest() {
        var rng = SplitMix64(state: 11)
        for _ in 0..<500 {
            let (center, radius) = GeoSampling.randomCircle(using: &rng)
            let area = GeoArea.circle(center: center, radiusMeters: radius)
            let p = GeoPoint(lat: Double.random(in: -90...90, using: &rng), lon: Double.random(in: -180...180, using: &rng))
            #expect(area.contains(p) == (GeoDistance.meters(center, p) <= radius))
        }
        let paris = GeoPoint(lat: 48.8566, lon: 2.3522)
        let london = GeoPoint(lat: 51.5074, lon: -0.1278)
        #expect(GeoArea.circle(center: paris, radiusMeters: 345_000).contains(london))
        #expect(!GeoArea.circle(center: paris, radiusMeters: 342_000).contains(london))
        #expect(GeoArea.circle(center: paris, radiusMeters: 0).contains(paris))
    }

    /// The invariant the cover needs: every point the circle accepts is in its bounding box.
    /// Points are generated right at the rim (where the box is tightest); the test's own
    /// destination formula is inexact near the poles, so a generated point only counts when
    /// the exact haversine test accepts it.
    @Test func boundingBoxHoldsEveryAcceptedRimPoint() {
        var rng = SplitMix64(state: 12)
        var accepted = 0
        var missed: [String] = []
        for _ in 0..<1_000 {
            let (center, radius) = GeoSampling.randomCircle(using: &rng)
            let area = GeoArea.circle(center: center, radiusMeters: radius)
            let box = area.boundingBox
            #expect(box.isValid)
            for step in 0..<48 {
                let bearing = Double(step) / 48 * 2 * Double.pi + Double.random(in: 0..<0.1, using: &rng)
                for fraction in [1, 1 - 1e-9, 1 - 1e-6] {
                    let rim = GeoSampling.destination(from: center, bearing: bearing, meters: radius * fraction)
                    guard area.contains(rim) else { continue }
                    accepted += 1
                    if !box.contains(rim) { missed.append("circle \(center) r=\(radius) box \(box) misses \(rim)") }
                }
            }
        }
        #expect(missed.isEmpty, "\(missed.prefix(5))")
        #expect(accepted > 50_000)
    }

    @Test func boundingBoxUsesTheSphericalHalfWidth() {
        // At lat 60 a 2000 km cap is ~38.1 degrees wide each way; the flat r / (R cos lat)
        // estimate gives ~36.0 and would miss the poleward rim.
        let box = GeoArea.circle(center: GeoPoint(lat: 60, lon: 0), radiusMeters: 2_000_000).boundingBox
        let exact = asin(sin(2_000_000 / earth) / cos(Double.pi / 3)) * 180 / Double.pi
        #expect(abs(box.east - exact) < 1e-6)
        #expect(abs(box.west + exact) < 1e-6)
        #expect(box.east > 38)
        let degrees = 2_000_000 / earth * 180 / Double.pi
        #expect(abs(box.north - (60 + degrees)) < 1e-6)
        #expect(abs(box.south - (60 - degrees)) < 1e-6)
    }

    @Test func boundingBoxWrapsAcrossTheAntimeridian() {
        let box = GeoArea.circle(center: GeoPoint(lat: 0, lon: 179.9), radiusMeters: 50_000).boundingBox
        #expect(box.crossesAntimeridian)
        #expect(box.west > 179 && box.west < 179.9)
        #expect(box.east > -180 && box.east < -179.4)
        let west = GeoArea.circle(center: GeoPoint(lat: 0, lon: -180), radiusMeters: 10_000).boundingBox
        #expect(west.crossesAntimeridian)
        #expect(west.isValid)
    }

    @Test func capReachingAPoleSpansAllLongitudes() {
        let north = GeoArea.circle(center: GeoPoint(lat: 89.5, lon: 20), radiusMeters: 100_000).boundingBox
        #expect(north.west == -180 && north.east == 180 && north.north == 90)
        #expect(north.south < 89.5)
        let south = GeoArea.circle(center: GeoPoint(lat: -90, lon: 0), radiusMeters: 1).boundingBox
        #expect(south.west == -180 && south.east == 180 && south.south == -90)
    }

    @Test func halfTheCircumferenceIsTheWorld() {
        let center = GeoPoint(lat: 10, lon: 10)
        #expect(GeoArea.circle(center: center, radiusMeters: Double.pi * earth).boundingBox == .world)
        #expect(GeoArea.circle(center: center, radiusMeters: .infinity).boundingBox == .world)
    }

    @Test func degenerateRadiiStayFinite() {
        let center = GeoPoint(lat: 10, lon: 10)
        for radius in [0, -5, Double.nan] {
            let box = GeoArea.circle(center: center, radiusMeters: radius).boundingBox
            #expect(box.isValid)
            #expect(box.contains(center))
            #expect(box.north - box.south < 1e-8)
        }
        #expect(!GeoArea.circle(center: center, radiusMeters: -5).isValid)
        #expect(!GeoArea.circle(center: center, radiusMeters: .nan).isValid)
        #expect(!GeoArea.circle(center: GeoPoint(lat: 91, lon: 0), radiusMeters: 5).isValid)
        #expect(GeoArea.circle(center: center, radiusMeters: 0).isValid)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import VigilGeo
import VigilTestSupport

/// Random areas and points for the property tests: ordinary cases plus the awkward ones (tiny,
/// whole world, touching the poles and the antimeridian, crossing it, edges on grid lines).
enum GeoSampling {
    /// The point `distance` meters from `start` along initial `bearing` (radians from north),
    /// on the same sphere as `GeoDistance`, longitude wrapped into -180...180.
    static func destination(from start: GeoPoint, bearing: Double, meters distance: Double) -> GeoPoint {
        let delta = distance / GeoDistance.earthRadiusMeters
        let lat1 = start.lat * Double.pi / 180
        let lon1 = start.lon * Double.pi / 180
        let sinLat2 = sin(lat1) * cos(delta) + cos(lat1) * sin(delta) * cos(bearing)
        let lat2 = asin(Swift.min(1, Swift.max(-1, sinLat2)))
        let lon2 = lon1 + atan2(sin(bearing) * sin(delta) * cos(lat1), cos(delta) - sin(lat1) * sinLat2)
        var lon = lon2 * 180 / Double.pi
        while lon > 180 { lon -= 360 }
        while lon < -180 { lon += 360 }
        return GeoPoint(lat: Swift.min(90, Swift.max(-90, lat2 * 180 / Double.pi)), lon: lon)
    }

    /// A value on a geohash grid line of some precision, `origin + k * span / 2^bits`.
    static func gridLine(origin: Double, span: Double, using rng: inout SplitMix64) -> Double {
        let bits = Int.random(in: 1...30, using: &rng)
        let k = Int.random(in: 0...(1 << bits), using: &rng)
        return origin + Double(k) * (span / Double(1 << bits))
    }

    static func randomBox(using rng: inout SplitMix64) -> GeoBox {
        func lat() -> Double { Double.random(in: -90...90, using: &rng) }
        func lon() -> Double { Double.random(in: -180...180, using: &rng) }
        func sorted(_ a: Double, _ b: Double) -> (Double, Double) { a <= b ? (a, b) : (b, a) }
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: // anything; about half of these cross the antimeridian
            let (s, n) = sorted(lat(), lat())
            return GeoBox(south: s, west: lon(), north: n, east: lon())
        case 1: // street-sized or smaller, sometimes straddling lon 180
            let size = pow(10, Double.random(in: -7 ... -1, using: &rng))
            let s = Double.random(in: -90...(90 - size), using: &rng)
            if Bool.random(using: &rng) {
                let w = Double.random(in: (180 - size)...180, using: &rng)
                return GeoBox(south: s, west: w, north: s + size, east: w + size - 360)
            }
            let w = Double.random(in: -180...(180 - size), using: &rng)
            return GeoBox(south: s, west: w, north: s + size, east: w + size)
        case 2:
            return .world
        case 3: // touching a pole
            let (w, e) = (lon(), lon())
            return Bool.random(using: &rng)
                ? GeoBox(south: lat(), west: w, north: 90, east: e)
                : GeoBox(south: -90, west: w, north: lat(), east: e)
        case 4: // touching the antimeridian with one of its spellings
            let (s, n) = sorted(lat(), lat())
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return GeoBox(south: s, west: -180, north: n, east: lon())
            case 1: return GeoBox(south: s, west: lon(), north: n, east: 180)
            case 2: return GeoBox(south: s, west: 180, north: n, east: lon())
            default: return GeoBox(south: s, west: lon(), north: n, east: -180)
            }
        case 5: // crossing, modest width
            let (s, n) = sorted(lat(), lat())
            return GeoBox(south: s, west: Double.random(in: 150...180, using: &rng), north: n, east: Double.random(in: -180 ... -150, using: &rng))
        case 6: // zero width or zero height, including on the antimeridian and the poles
            let edge = [180.0, -180.0, 0.0, lon()].randomElement(using: &rng)!
            let (s, n) = sorted(lat(), lat())
            if Bool.random(using: &rng) {
                return GeoBox(south: s, west: edge, north: n, east: edge)
            }
            let y = [90.0, -90.0, lat()].randomElement(using: &rng)!
            let (w, e) = sorted(lon(), lon())
            return GeoBox(south: y, west: w, north: y, east: e)
        default: // every edge on a grid line
            let (s, n) = sorted(gridLine(origin: -90, span: 180, using: &rng), gridLine(origin: -90, span: 180, using: &rng))
            return GeoBox(south: s, west: gridLine(origin: -180, span: 360, using: &rng), north: n, east: gridLine(origin: -180, span: 360, using: &rng))
        }
    }

    static func randomCircle(using rng: inout SplitMix64) -> (center: GeoPoint, radius: Double) {
        let lat: Double
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: lat = Double.random(in: 89...90, using: &rng) * (Bool.random(using: &rng) ? 1 : -1)
        case 1: lat = [90.0, -90.0, 0.0].randomElement(using: &rng)!
        default: lat = Double.random(in: -90...90, using: &rng)
        }
        let lon: Double = Bool.random(using: &rng)
            ? Double.random(in: 179...180, using: &rng) * (Bool.random(using: &rng) ? 1 : -1)
            : Double.random(in: -180...180, using: &rng)
        // Log-uniform from 1 m to beyond half the circumference.
        let radius = pow(10, Double.random(in: 0...7.4, using: &rng))
        return (GeoPoint(lat: lat, lon: lon), radius)
    }

    /// Points of `box`: corners, edge points and uniform interior points, with points on the
    /// antimeridian also given in their other spelling.
    static func points(in box: GeoBox, count: Int, using rng: inout SplitMix64) -> [GeoPoint] {
        var result: [GeoPoint] = []
        for part in box.parts {
            let lats = [part.south, part.north]
            let lons = [part.west, part.east]
            for lat in lats { for lon in lons { result.append(GeoPoint(lat: lat, lon: lon)) } }
            for _ in 0..<count {
                let lat = Double.random(in: part.south...part.north, using: &rng)
                let lon = Double.random(in: part.west...part.east, using: &rng)
                result.append(GeoPoint(lat: lat, lon: lon))
                result.append(GeoPoint(lat: lats.randomElement(using: &rng)!, lon: lon))
                result.append(GeoPoint(lat: lat, lon: lons.randomElement(using: &rng)!))
            }
        }
        for p in result where abs(p.lon) == 180 {
            result.append(GeoPoint(lat: p.lat, lon: -p.lon))
        }
        return result
    }

    /// Points of a circle: uniform by area, right at the rim, and uniform in the bounding box,
    /// keeping only those the exact test accepts.
    static func points(in area: GeoArea, center: GeoPoint, radius: Double, count: Int, using rng: inout SplitMix64) -> [GeoPoint] {
        var result: [GeoPoint] = [center]
        for _ in 0..<count {
            let bearing = Double.random(in: 0..<(2 * Double.pi), using: &rng)
            let fraction = [sqrt(Double.random(in: 0...1, using: &rng)), 1, 1 - 1e-12].randomElement(using: &rng)!
            result.append(destination(from: center, bearing: bearing, meters: radius * fraction))
        }
        result += points(in: area.boundingBox, count: count, using: &rng)
        return result.filter { area.contains($0) }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Great-circle distances on a spherical earth.
///
/// A sphere of the mean radius is within ~0.5% of the ellipsoid everywhere, which is far below
/// what a map subscription needs; what matters is that `GeoArea.contains` and the circle's
/// bounding box use the same sphere, so the cover never misses a point the filter accepts.
public enum GeoDistance {
    /// The IUGG mean earth radius, R1.
    public static let earthRadiusMeters = 6_371_008.8

    /// Haversine distance in meters. Stable for tiny distances (no `acos` of a value near 1)
    /// and for antipodes (the `asin` argument is clamped to 0...1 against rounding).
    public static func meters(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        earthRadiusMeters * centralAngle(a, b)
    }

    /// The angle between `a` and `b` seen from the earth's centre, in radians (0...pi).
    static func centralAngle(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        let lat1 = radians(a.lat)
        let lat2 = radians(b.lat)
        let sinHalfDLat = sin((lat2 - lat1) / 2)
        let sinHalfDLon = sin(radians(b.lon - a.lon) / 2)
        let h = sinHalfDLat * sinHalfDLat + cos(lat1) * cos(lat2) * sinHalfDLon * sinHalfDLon
        // Rounding can push h a hair outside 0...1; sqrt and asin must not see that.
        let clamped = Swift.min(1, Swift.max(0, h))
        return 2 * asin(sqrt(clamped))
    }

    static func radians(_ degrees: Double) -> Double { degrees * (Double.pi / 180) }
    static func degrees(_ radians: Double) -> Double { radians * (180 / Double.pi) }
}

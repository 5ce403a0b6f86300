#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A subscriber's area of interest: a lat/lon box or a great circle around a point.
///
/// Invariant the fan-out relies on: every point for which `contains` is true lies inside
/// `boundingBox`, so the geohash cover built from the bounding box never misses a pin that the
/// exact filter would accept. The box is allowed to be a little larger than the area, never smaller.
public enum GeoArea: Equatable, Sendable {
    case box(GeoBox)
    /// All points whose haversine distance from `center` is at most `radiusMeters`.
    case circle(center: GeoPoint, radiusMeters: Double)

    /// Relative and absolute (radians) padding added to a circle's angular radius before its
    /// bounding box is computed, so rounding in the haversine (used by `contains`) or in the box
    /// formulas cannot put an accepted point a few ulps outside the box. 1e-12 rad is ~6 um.
    static let radiusPaddingRelative = 1e-9
    static let radiusPaddingRadians = 1e-12

    /// A valid box, or a valid centre with a finite radius >= 0.
    public var isValid: Bool {
        switch self {
        case .box(let box):
            return box.isValid
        case .circle(let center, let radius):
            return center.isValid && radius.isFinite && radius >= 0
        }
    }

    /// Exact membership: inclusive box containment, or great-circle distance <= radius.
    public func contains(_ p: GeoPoint) -> Bool {
        switch self {
        case .box(let box):
            return box.contains(p)
        case .circle(let center, let radius):
            return GeoDistance.meters(center, p) <= radius
        }
    }

    /// The box itself, or for a circle the smallest lat/lon box around the spherical cap (plus
    /// rounding padding). The cap's longitude half-width is `asin(sin d / cos lat)` for angular
    /// radius `d`, which is wider than the flat `d / cos lat` estimate: the widest points of the
    /// cap sit poleward of the centre, so the flat estimate would cut them off.
    /// A cap that reaches a pole spans every longitude; a radius of half the circumference or
    /// more is the whole world. The result may cross the antimeridian.
    public var boundingBox: GeoBox {
        switch self {
        case .box(let box):
            return box
        case .circle(let center, let radiusMeters):
            return Self.capBoundingBox(center: center, radiusMeters: radiusMeters)
        }
    }

    private static func capBoundingBox(center: GeoPoint, radiusMeters: Double) -> GeoBox {
        // A NaN or negative radius contains nothing but its centre at most; treat it as zero so
        // the result is still a box around the centre rather than NaN.
        let radius = radiusMeters.isNaN ? 0 : Swift.max(0, radiusMeters)
        if radius >= Double.pi * GeoDistance.earthRadiusMeters {
            return .world
        }
        let angle = radius / GeoDistance.earthRadiusMeters * (1 + radiusPaddingRelative) + radiusPaddingRadians
        let angleDegrees = GeoDistance.degrees(angle)
        let south = center.lat - angleDegrees
        let north = center.lat + angleDegrees
        if south <= -90 || north >= 90 {
            // The cap holds a pole, and a pole touches every meridian.
            return GeoBox(south: Swift.max(-90, south), west: -180, north: Swift.min(90, north), east: 180)
        }
        let sineRatio = sin(angle) / cos(GeoDistance.radians(center.lat))
        if !(sineRatio < 1) {
            // Only reachable by rounding right at the pole-touching limit: be generous.
            return GeoBox(south: south, west: -180, north: north, east: 180)
        }
        let halfWidth = GeoDistance.degrees(asin(sineRatio))
        var west = center.lon - halfWidth
        var east = center.lon + halfWidth
        // halfWidth < 90 here (asin of a value < 1), so at most one side wraps and the result
        // never degenerates into west == east.
        if west < -180 { west += 360 }
        if east > 180 { east -= 360 }
        return GeoBox(south: south, west: west, north: north, east: east)
    }
}

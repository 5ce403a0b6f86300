/// A latitude/longitude rectangle with inclusive edges.
///
/// `west > east` means the box crosses the antimeridian (west 170, east -170 spans 20 degrees
/// through lon 180). `west == east` is a zero-width box, never the whole longitude range: the
/// whole range is spelled west -180, east 180. Longitudes -180 and 180 are the same meridian, so
/// `contains` treats a point on either as lying on both.
public struct GeoBox: Equatable, Sendable {
    public var south: Double
    public var west: Double
    public var north: Double
    public var east: Double

    public init(south: Double, west: Double, north: Double, east: Double) {
        self.south = south
        self.west = west
        self.north = north
        self.east = east
    }

    /// The whole earth.
    public static let world = GeoBox(south: -90, west: -180, north: 90, east: 180)

    /// True when the box spans lon 180 from west to east, i.e. `west > east`.
    public var crossesAntimeridian: Bool { west > east }

    /// Finite, `-90 <= south <= north <= 90`, both longitudes in -180...180.
    /// Any west/east pair in range is valid: `west > east` crosses, `west == east` is zero-width.
    public var isValid: Bool {
        south.isFinite && north.isFinite && west.isFinite && east.isFinite
            && south >= -90 && south <= north && north <= 90
            && west >= -180 && west <= 180
            && east >= -180 && east <= 180
    }

    /// Inclusive on every edge. A point at lon 180 also counts as lon -180 and vice versa, so a
    /// box ending at east 180 holds points at lon -180 and a box starting at west -180 holds
    /// points at lon 180. NaN coordinates are never inside.
    public func contains(_ p: GeoPoint) -> Bool {
        guard p.lat >= south && p.lat <= north else { return false }
        if containsLongitude(p.lon) { return true }
        // The antimeridian has two spellings; try the other one.
        if p.lon == 180 { return containsLongitude(-180) }
        if p.lon == -180 { return containsLongitude(180) }
        return false
    }

    /// The box as non-crossing pieces: itself, or for a crossing box its part from `west` to 180
    /// followed by its part from -180 to `east`.
    public var parts: [GeoBox] {
        guard crossesAntimeridian else { return [self] }
        return [
            GeoBox(south: south, west: west, north: north, east: 180),
            GeoBox(south: south, west: -180, north: north, east: east),
        ]
    }

    /// Longitude test for one spelling of `lon`, with the crossing case as a union of two ranges.
    private func containsLongitude(_ lon: Double) -> Bool {
        if crossesAntimeridian {
            return lon >= west || lon <= east
        }
        return lon >= west && lon <= east
    }
}

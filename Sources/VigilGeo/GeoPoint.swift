/// A position on the earth in degrees (WGS 84 style latitude and longitude).
///
/// The struct does not normalise or validate: a decoded client message may hold anything, so the
/// caller checks `isValid` once at the edge and the geometry below may then assume valid input.
/// Longitudes -180 and 180 name the same meridian; both are valid.
public struct GeoPoint: Equatable, Hashable, Sendable {
    /// Degrees north of the equator, -90...90 when valid.
    public var lat: Double
    /// Degrees east of Greenwich, -180...180 when valid.
    public var lon: Double

    public init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }

    /// Finite, latitude in -90...90 and longitude in -180...180 (both ends inclusive).
    public var isValid: Bool {
        lat.isFinite && lon.isFinite
            && lat >= -90 && lat <= 90
            && lon >= -180 && lon <= 180
    }
}
